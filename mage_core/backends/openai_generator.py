"""A Generator over an OpenAI-compatible HTTP endpoint (``backend.generator: openai``).

For evaluating with a served model (vLLM's ``vllm serve``, SGLang, a hosted API):
the baselines and trained checkpoints alike. It speaks the legacy completions
route, ``POST {base_url}/completions``, the one that takes a raw prompt (the
project renders its own chat template):

- the prompt's token ids are decoded to text with the run's tokenizer and sent
  as ``prompt``; the reply's ``choices[0].text`` is encoded back to ids with the
  same tokenizer (so a response's ids are the local tokenizer's, which a server
  with the same model agrees with);
- ``max_tokens``, ``temperature``, ``top_p`` (and ``top_k`` where the server
  takes it, as vLLM does) come from the sampling settings; ``seed`` is drawn
  from the row's ``torch.Generator``, so a server that honours seeds (vLLM)
  returns the same text on every run;
- a row ends on the server's stop (``finish_reason: stop``) or its length limit.

Evaluation only: an endpoint gives no log-probabilities under the policy at
temperature 1 (what PPO needs), so ``Generation.logprobs`` are NaN and
``mage train`` refuses this backend; ``score`` (constrained mode's candidate
scoring) is not offered by the completions route: use ``policy.action_mode:
free``. The API key is read from the environment variable
``backend.openai.api_key_env`` (never from params.yaml); none is sent when it is
unset (a local server). Requests run ``max_concurrency`` at a time.

``timeout_s`` is a deadline for a whole request (connecting, sending and the whole
reply), not a per-read timeout: a server that drip-feeds its answer a byte at a
time is cut off at the deadline all the same (a watchdog shuts the socket). A
request that misses its deadline, fails to connect or gets a 408/429/5xx is
retried ``max_retries`` times with exponential back-off (``backoff_s``, doubling),
so a request gives up after at most ``(max_retries + 1) * timeout_s + backoff_s *
(2 ** max_retries - 1)`` seconds (defaults: 4 x 120 s + 7 s, about 8 minutes); the
evaluation then stops with one line naming the URL (without credentials), the
deadline and the attempt. A request still waiting after ``PROGRESS_AFTER_S``
prints a line to stderr every ``PROGRESS_EVERY_S`` (one line per generator at a
time, not one per request in flight). An error reply's body is never echoed as
is: a 401/403 prints no body at all (a server may echo the request's headers,
the key among them), other errors at most a short excerpt with the key, ``Bearer
...`` and ``sk-...`` redacted. A reply without ``choices[0].text`` stops it at
once (``EndpointError``); ``mage evaluate`` writes its outputs only at the end,
so nothing partial is left.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Mapping, Sequence

import torch

from mage_core.generation import Generation, RowGenerators, SamplingParams, check_generators

#: HTTP statuses worth a retry: rate limited, or the server's own failure.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: A request still waiting after this many seconds prints a progress line to stderr,
#: then one every PROGRESS_EVERY_S (module constants so tests can lower them).
PROGRESS_AFTER_S = 10.0
PROGRESS_EVERY_S = 10.0
#: How much of an error reply's body (after redaction) an error message shows.
EXCERPT_CHARS = 200
#: Token-like strings redacted from anything a server sent back.
_SECRET_PATTERNS = (re.compile(r"(?i)\bBearer\s+\S+"), re.compile(r"\bsk-[A-Za-z0-9_\-]{4,}"))


def redact(text: str, secret: str | None = None, limit: int = EXCERPT_CHARS) -> str:
    """A short, printable excerpt of what a server sent: the API key in use,
    ``Bearer ...`` and ``sk-...`` replaced by ``[redacted]``, control characters
    dropped, at most ``limit`` characters (redacted before cutting, so a key cut in
    half cannot slip through)."""
    if secret:
        text = text.replace(secret, "[redacted]")
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub("[redacted]", text)
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def display_url(url: str) -> str:
    """``url`` without any ``user:password@`` part (for messages)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


class _Watch:
    """The sockets one request opens, so a watchdog can shut them at the deadline
    (a shutdown wakes a thread blocked reading them; a plain close does not)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._aborted = False

    def _connect(self, *args: Any, **kwargs: Any) -> socket.socket:
        sock = socket.create_connection(*args, **kwargs)
        with self._lock:
            self._socks.append(sock)
            aborted = self._aborted
        if aborted:  # the deadline passed while connecting
            self._shut(sock)
        return sock

    def wrap(self, http_class: Any) -> Any:
        def make(*args: Any, **kwargs: Any) -> Any:
            conn = http_class(*args, **kwargs)
            conn._create_connection = self._connect  # http.client's hook for opening the socket
            return conn

        return make

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            socks = list(self._socks)
        for sock in socks:
            self._shut(sock)


class _Watched:
    """A urllib handler whose connections are ``_Watch``-ed (mixed into the HTTP and HTTPS handlers)."""

    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self._watch = watch

    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        return super().do_open(self._watch.wrap(http_class), req, **kwargs)  # type: ignore[misc]


class _WatchedHTTP(_Watched, urllib.request.HTTPHandler):
    pass


class _WatchedHTTPS(_Watched, urllib.request.HTTPSHandler):
    pass


class _Expired(Exception):
    """The request's deadline passed."""


class EndpointError(RuntimeError):
    """The endpoint did not answer, or answered something that is not a completion."""


class OpenAIGenerator:
    """``Generator`` over ``{base_url}/completions``; see the module docstring."""

    def __init__(self, tokenizer: Any, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY",
                 timeout_s: float = 60.0, max_retries: int = 3, max_concurrency: int = 8,
                 backoff_s: float = 1.0) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"backend.openai.base_url: {base_url!r} is not an http(s) URL")
        if timeout_s <= 0 or max_retries < 0 or max_concurrency < 1:
            raise ValueError("backend.openai: timeout_s must be > 0, max_retries >= 0, max_concurrency >= 1")
        self.tokenizer = tokenizer
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.api_key = os.environ.get(api_key_env) or None
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        self._progress_lock = threading.Lock()
        self._last_progress = -math.inf
        self._in_flight = 0
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="openai")

    # -- HTTP -------------------------------------------------------------------------------------

    def _attempt(self, request: urllib.request.Request, watch: _Watch, timeout: float) -> tuple[int, str, bytes]:
        """One HTTP exchange (in a worker thread): (status, reason, body); a body of
        an error reply is read too (bounded), for a redacted excerpt."""
        opener = urllib.request.build_opener(_WatchedHTTP(watch), _WatchedHTTPS(watch))  # proxies still apply
        try:
            with opener.open(request, timeout=timeout) as reply:
                return reply.status, reply.reason, reply.read()
        except urllib.error.HTTPError as err:
            try:
                body = err.read(4096)
            except Exception:  # noqa: BLE001 -- the body is only for the message
                body = b""
            finally:
                err.close()
            return err.code, str(err.reason), body

    def _exchange(self, request: urllib.request.Request, attempt: int, attempts: int) -> tuple[int, str, bytes]:
        """``_attempt`` under a total deadline of ``timeout_s``: run in a worker thread
        while this one waits, prints progress, and at the deadline shuts the
        request's sockets and raises ``_Expired``."""
        watch = _Watch()
        future: Future[tuple[int, str, bytes]] = Future()

        def work() -> None:
            try:
                future.set_result(self._attempt(request, watch, self.timeout_s))
            except BaseException as err:  # noqa: BLE001 -- handed to the waiting thread
                future.set_exception(err)

        start = time.monotonic()
        deadline = start + self.timeout_s
        threading.Thread(target=work, name="openai-request", daemon=True).start()
        shown = display_url(request.full_url)
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            waited = now - start
            wake = min(deadline, start + PROGRESS_AFTER_S) if waited < PROGRESS_AFTER_S else \
                min(deadline, now + PROGRESS_EVERY_S)
            try:
                return future.result(timeout=max(0.0, wake - now))
            except FutureTimeout:
                pass
            waited = time.monotonic() - start
            if waited >= PROGRESS_AFTER_S and time.monotonic() < deadline:
                self._progress(f"waiting for {shown}: {waited:.0f} s of {self.timeout_s:g} s "
                               f"(attempt {attempt} of {attempts})")
        watch.abort()
        if future.done() and future.exception() is None:  # it finished just at the deadline
            return future.result()
        raise _Expired

    def _progress(self, line: str) -> None:
        """Print ``line`` unless another request of this generator printed one less
        than PROGRESS_EVERY_S ago (so N requests in flight print one line, not N)."""
        with self._progress_lock:
            now = time.monotonic()
            if now - self._last_progress < PROGRESS_EVERY_S * 0.9:
                return
            self._last_progress = now
        in_flight = self._in_flight
        more = f"; {in_flight} requests in flight" if in_flight > 1 else ""
        print(line + more, file=sys.stderr, flush=True)

    def _request(self, method: str, route: str, body: Mapping[str, Any] | None = None) -> Any:
        url = f"{self.base_url}{route}"
        shown = display_url(url)
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode() if body is not None else None
        attempts = self.max_retries + 1
        cause = ""
        with self._progress_lock:
            self._in_flight += 1
        try:
            for attempt in range(1, attempts + 1):
                if attempt > 1:
                    time.sleep(self.backoff_s * 2 ** (attempt - 2))
                request = urllib.request.Request(url, data=data, headers=headers, method=method)
                try:
                    status, reason, raw = self._exchange(request, attempt, attempts)
                    reason = redact(reason, self.api_key, 60)  # the status line is the server's text too
                except _Expired:
                    cause = (f"timed out after {self.timeout_s:g} s (backend.openai.timeout_s, the deadline "
                             f"for a whole request) on attempt {attempt} of {attempts}")
                    continue
                except (TimeoutError, urllib.error.URLError, ConnectionError, OSError,
                        http.client.HTTPException) as err:  # e.g. a bad status line
                    reason_ = getattr(err, "reason", err)
                    if isinstance(reason_, TimeoutError) or "timed out" in str(reason_):
                        cause = (f"timed out after {self.timeout_s:g} s (backend.openai.timeout_s, the deadline "
                                 f"for a whole request) on attempt {attempt} of {attempts}")
                    else:
                        cause = (f"cannot connect ({redact(str(reason_), self.api_key)}) "
                                 f"on attempt {attempt} of {attempts}")
                    continue
                if status in (401, 403):
                    source = (f"the key in ${self.api_key_env}" if self.api_key else
                              f"no key was sent (${self.api_key_env} is unset)")
                    raise EndpointError(f"{shown}: the endpoint refused the API key (HTTP {status} {reason}): "
                                        f"{source}; check {self.api_key_env} / backend.openai.api_key_env")
                if status >= 400:
                    if status not in RETRY_STATUSES:
                        detail = redact(raw.decode(errors="replace"), self.api_key)
                        raise EndpointError(f"{shown}: HTTP {status} {reason}" + (f": {detail}" if detail else ""))
                    cause = f"HTTP {status} {reason} on attempt {attempt} of {attempts}"
                    continue
                try:
                    return json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    raise EndpointError(f"{shown}: the reply is not JSON: "
                                        f"{redact(raw.decode(errors='replace'), self.api_key)!r}") from None
        finally:
            with self._progress_lock:
                self._in_flight -= 1
        raise EndpointError(f"{shown}: {cause} (at most {self.worst_case_s():g} s in all); check "
                            "backend.openai.base_url and that the server is up")

    def worst_case_s(self) -> float:
        """The longest one request can take before it gives up: every attempt to its
        deadline, plus the back-off between them."""
        return (self.max_retries + 1) * self.timeout_s + self.backoff_s * (2 ** self.max_retries - 1)

    def check(self) -> list[str]:
        """The model names the endpoint serves (``GET /models``); an EndpointError if
        it does not answer or does not serve ``model``. Called before any work."""
        reply = self._request("GET", "/models")
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list) or not all(isinstance(m, dict) and "id" in m for m in data):
            raise EndpointError(f"{display_url(self.base_url)}/models: malformed reply (no data[].id): "
                                f"{redact(str(reply), self.api_key)}")
        names = [str(m["id"]) for m in data]
        if self.model not in names:
            raise EndpointError(f"{display_url(self.base_url)}: serves {', '.join(names) or 'no model'}, not "
                                f"{self.model!r} (backend.openai.model)")
        return names

    def _complete(self, prompt: str, sampling: SamplingParams, seed: int) -> tuple[str, bool]:
        body: dict[str, Any] = {"model": self.model, "prompt": prompt, "max_tokens": sampling.max_new_tokens,
                                "temperature": sampling.temperature, "top_p": sampling.top_p, "seed": seed}
        if sampling.top_k:
            body["top_k"] = sampling.top_k
        reply = self._request("POST", "/completions", body)
        try:
            choice = reply["choices"][0]
            text = choice["text"]
        except (KeyError, IndexError, TypeError):
            raise EndpointError(f"{display_url(self.base_url)}/completions: malformed reply (no choices[0].text): "
                                f"{redact(str(reply), self.api_key)}") from None
        if not isinstance(text, str):
            raise EndpointError(f"{display_url(self.base_url)}/completions: choices[0].text is "
                                f"{type(text).__name__}, not text")
        return text, choice.get("finish_reason") == "stop"

    # -- Generator ----------------------------------------------------------------------------------

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams,
                 generator: RowGenerators) -> list[Generation]:
        checked = check_generators(generator, len(prompts))
        rows = checked if isinstance(checked, list) else [checked] * len(prompts)
        seeds = [int(torch.randint(0, 2**31 - 1, (1,), generator=g)) for g in rows]  # in row order
        texts = [self.tokenizer.decode(list(p), skip_special_tokens=False) for p in prompts]
        replies = list(self._pool.map(lambda args: self._complete(args[0], sampling, args[1]), zip(texts, seeds)))
        out = []
        for text, finished in replies:
            ids = self.tokenizer.encode(text, add_special_tokens=False)[: sampling.max_new_tokens]
            out.append(Generation(token_ids=ids, logprobs=[math.nan] * len(ids), finished=finished))
        return out

    def score(self, prompts: Sequence[Sequence[int]],
              candidates: Sequence[Sequence[Sequence[int]]]) -> list[list[list[float]]]:
        raise NotImplementedError(
            "backend.generator: openai cannot score candidates (the completions route returns no "
            "log-probabilities of given continuations); use policy.action_mode: free with a served model")

    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        raise NotImplementedError("backend.generator: openai serves a fixed model: it cannot take trained "
                                  "weights (mage train needs backend.generator hf or vllm)")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
