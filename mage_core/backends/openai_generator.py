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
unset (a local server). Requests run ``max_concurrency`` at a time; a request
that times out, fails to connect or gets a 429/5xx is retried ``max_retries``
times with exponential back-off, then the evaluation stops with one line naming
the URL and the cause. A reply without ``choices[0].text`` stops it at once
(``EndpointError``); ``mage evaluate`` writes its outputs only at the end, so
nothing partial is left.
"""

from __future__ import annotations

import json
import math
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

import torch

from mage_core.backends.base import Generation, RowGenerators, SamplingParams, check_generators

#: HTTP statuses worth a retry: rate limited, or the server's own failure.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


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
        self.api_key = os.environ.get(api_key_env) or None
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="openai")

    # -- HTTP -------------------------------------------------------------------------------------

    def _request(self, method: str, route: str, body: Mapping[str, Any] | None = None) -> Any:
        url = f"{self.base_url}{route}"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode() if body is not None else None
        cause = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                    raw = reply.read()
            except urllib.error.HTTPError as err:
                detail = err.read()[:200].decode(errors="replace")
                if err.code not in RETRY_STATUSES:
                    raise EndpointError(f"{url}: HTTP {err.code} {err.reason}: {detail}") from None
                cause = f"HTTP {err.code} {err.reason}"
                continue
            except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as err:
                reason = getattr(err, "reason", err)
                cause = ("timed out after " f"{self.timeout_s:g} s" if isinstance(reason, TimeoutError)
                         or "timed out" in str(reason) else f"cannot connect ({reason})")
                continue
            try:
                return json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise EndpointError(f"{url}: the reply is not JSON: {raw[:200]!r}") from None
        raise EndpointError(f"{url}: {cause} ({self.max_retries + 1} attempts); check backend.openai.base_url "
                            "and that the server is up")

    def check(self) -> list[str]:
        """The model names the endpoint serves (``GET /models``); an EndpointError if
        it does not answer or does not serve ``model``. Called before any work."""
        reply = self._request("GET", "/models")
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list) or not all(isinstance(m, dict) and "id" in m for m in data):
            raise EndpointError(f"{self.base_url}/models: malformed reply (no data[].id): {str(reply)[:200]}")
        names = [str(m["id"]) for m in data]
        if self.model not in names:
            raise EndpointError(f"{self.base_url}: serves {', '.join(names) or 'no model'}, not "
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
            raise EndpointError(f"{self.base_url}/completions: malformed reply (no choices[0].text): "
                                f"{str(reply)[:200]}") from None
        if not isinstance(text, str):
            raise EndpointError(f"{self.base_url}/completions: choices[0].text is {type(text).__name__}, not text")
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
