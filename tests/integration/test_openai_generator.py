"""The OpenAI-compatible endpoint generator against a real local HTTP server that
serves the embedded tiny model (tests/openai_server.py): a generation through
the endpoint, `mage evaluate` through it, and the failures a user meets: a
server that is down, a slow one, a malformed reply, a transient 503."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch

from mage_core.generation import SamplingParams
from mage_core.backends.openai_generator import EndpointError, OpenAIGenerator
from mage_core.cli import main
from mage_core.config import ConfigError, parse_config
from mage_core.stages.evaluate import evaluate
from mage_core.stages.train import build_policy, train
from tests.openai_server import ModelServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("policy")
    build_policy(parse_config({"tournament": {"matches": []}}), out)
    return out / "policy-init"


def params(url: str, **openai) -> dict:
    # Tic-Tac-Toe: a short game per episode (Kuhn's exact greedy value would enumerate every deal)
    return {"env": {"name": "tic_tac_toe"}, "tournament": {"matches": []}, "tracking": {"mlflow": False},
            "policy": {"action_mode": "free", "max_new_tokens": 8},
            "backend": {"generator": "openai", "openai": {"base_url": url, "model": "tiny", **openai}}}


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there once the socket is closed


def test_generation_through_the_endpoint_is_the_served_models_and_seeded(model_dir: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAGE_TEST_KEY", "sk-test")
    with ModelServer(model_dir) as server:
        gen = OpenAIGenerator(server.tokenizer, server.url, "tiny", api_key_env="MAGE_TEST_KEY", max_concurrency=2)
        assert gen.check() == ["tiny"]
        prompts = [server.tokenizer.encode("kuhn first ep1 K", add_special_tokens=False)] * 2
        sampling = SamplingParams(temperature=1.0, top_k=5, max_new_tokens=6)
        a = gen.generate(prompts, sampling, [torch.Generator().manual_seed(s) for s in (1, 2)])
        b = gen.generate(prompts, sampling, [torch.Generator().manual_seed(s) for s in (1, 2)])
        gen.close()
        assert [g.token_ids for g in a] == [g.token_ids for g in b]  # seeds travel with the request
        assert all(0 < len(g.token_ids) <= 6 and all(x != x for x in g.logprobs) for g in a)  # NaN: no PPO
        # what came back is what the served model generated for that seed, re-encoded locally
        body = server.requests[0]
        assert body["top_k"] == 5 and body["max_tokens"] == 6 and body["authorization"] == "Bearer sk-test"
        expected = server.complete(body)["choices"][0]["text"]
        assert server.tokenizer.decode(a[0].token_ids) == expected or server.tokenizer.decode(a[1].token_ids) == expected
        with pytest.raises(NotImplementedError, match="action_mode: free"):
            gen.score(prompts, [[[1]], [[1]]])


def test_mage_evaluate_through_a_served_model(model_dir: Path, tmp_path: Path) -> None:
    with ModelServer(model_dir) as server:
        metrics = evaluate(parse_config(params(server.url)), model_dir, tmp_path / "eval", "in_domain",
                           per_opponent_seat=1)
        assert (tmp_path / "eval" / "trials.parquet").is_file()
        assert metrics["eval/in_domain/all/num_meta_episodes"] == 16  # 8 opponents x 2 seats
        assert len(server.requests) >= 6 and all(r["model"] == "tiny" for r in server.requests)
        assert all("authorization" in r and r["authorization"] is None for r in server.requests)  # no key set


def test_a_server_that_is_down_stops_before_the_evaluation(model_dir: Path, tmp_path: Path, capsys) -> None:
    url = closed_port_url()
    with pytest.raises(EndpointError, match=r"cannot connect.*check backend.openai.base_url"):
        evaluate(parse_config(params(url, max_retries=0)), model_dir, tmp_path / "eval")
    assert not (tmp_path / "eval").exists()
    # the CLI: one line, exit 1, nothing written
    import yaml

    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params(url, max_retries=0)))
    assert main(["evaluate", "--params", str(tmp_path / "p.yaml"), "--policy", str(model_dir), "--out",
                 str(tmp_path / "cli")]) == 1
    assert "endpoint error" in capsys.readouterr().err and not (tmp_path / "cli").exists()


def test_a_slow_server_times_out_with_a_clear_error(model_dir: Path, tmp_path: Path) -> None:
    with ModelServer(model_dir, mode="slow", delay_s=3.0) as server:
        cfg = parse_config(params(server.url, timeout_s=0.5, max_retries=1))
        with pytest.raises(EndpointError, match=r"timed out after 0.5 s .*attempt 2 of 2"):
            evaluate(cfg, model_dir, tmp_path / "eval", "in_domain", per_opponent_seat=1)
    assert not (tmp_path / "eval").exists()


def test_a_malformed_reply_stops_at_once_and_writes_nothing(model_dir: Path, tmp_path: Path) -> None:
    with ModelServer(model_dir, mode="malformed") as server:
        with pytest.raises(EndpointError, match=r"malformed reply \(no choices\[0\]\.text\)"):
            evaluate(parse_config(params(server.url)), model_dir, tmp_path / "eval", "in_domain", per_opponent_seat=1)
        # not retried (a malformed reply is not transient) and no second turn: only the first
        # turn's requests of the 16 meta-episodes (up to max_concurrency of them in flight) went out
        assert 1 <= len(server.requests) <= 16
        assert all(" ep1 " in r["prompt"] for r in server.requests)
    assert not (tmp_path / "eval").exists()


def test_a_transient_503_is_retried(model_dir: Path, tmp_path: Path) -> None:
    with ModelServer(model_dir, mode="flaky") as server:
        gen = OpenAIGenerator(server.tokenizer, server.url, "tiny", backoff_s=0.01, max_concurrency=1)
        out = gen.generate([[2, 5]], SamplingParams(max_new_tokens=3), torch.Generator().manual_seed(0))
        gen.close()
        assert len(server.requests) == 2 and len(out) == 1


def test_bad_settings_are_refused_before_any_work(model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="backend.openai.model"):
        parse_config({"backend": {"generator": "openai"}})
    with pytest.raises(ConfigError, match="base_url"):
        parse_config({"backend": {"openai": {"base_url": "localhost:8000"}}})
    with ModelServer(model_dir) as server:
        with pytest.raises(ConfigError, match="action_mode: free"):
            evaluate(parse_config({**params(server.url), "policy": {"action_mode": "constrained"}}), model_dir,
                     tmp_path / "eval")
        with pytest.raises(ConfigError, match="serves a fixed model"):
            train(parse_config(params(server.url)), tmp_path / "train")
        with pytest.raises(EndpointError, match="not 'other'"):
            evaluate(parse_config(params(server.url, model="other")), model_dir, tmp_path / "eval")
    assert not (tmp_path / "eval").exists() and not (tmp_path / "train").exists()


# -- a hung, drip-feeding or key-echoing server: a raw TCP server in a thread ------------------------


class RawServer:
    """Accepts connections on 127.0.0.1 and hands each (with the request's bytes) to
    ``handle(conn, request, stop)`` in its own thread; ``stop`` is set on exit."""

    def __init__(self, handle) -> None:
        import threading

        self.handle, self.stop = handle, threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        import threading

        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            self.handle(conn, data, self.stop)
        except OSError:
            pass  # the client gave up (its deadline shut the socket)
        finally:
            conn.close()

    def __enter__(self) -> "RawServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.sock.close()
        for conn in self.conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def drip(text: bytes):
    def handle(conn: socket.socket, request: bytes, stop) -> None:
        for i in range(10**6):  # one byte a second, for ever (the status line, then the body)
            conn.sendall(text[i % len(text): i % len(text) + 1])
            if stop.wait(1.0):
                return

    return handle


@pytest.mark.parametrize("reply", [b"HTTP/1.1 200 OK\r\n", None], ids=["status-line", "body"])
def test_a_drip_feeding_server_is_cut_off_at_the_deadline(reply: bytes | None) -> None:
    import time

    def handle(conn: socket.socket, request: bytes, stop) -> None:
        if reply is None:  # headers at once, then a body that never ends
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
            return drip(b'{"data": ')(conn, request, stop)
        return drip(reply)(conn, request, stop)

    with RawServer(handle) as server:
        gen = OpenAIGenerator(None, server.url, "tiny", timeout_s=2.0, max_retries=0)
        start = time.monotonic()
        with pytest.raises(EndpointError) as info:
            gen.check()
        elapsed = time.monotonic() - start
        gen.close()
    # a per-read timeout of 2 s never fires here (a byte a second); the whole request's deadline does
    assert 2.0 <= elapsed < 3.5, elapsed
    message = str(info.value)
    assert message.startswith(f"{server.url}/models: timed out after 2 s")
    assert "deadline" in message and "attempt 1 of 1" in message and "at most 2 s in all" in message


def test_the_worst_case_is_bounded_over_the_retries() -> None:
    import time

    with RawServer(drip(b"HTTP/1.1 200 OK\r\n")) as server:
        gen = OpenAIGenerator(None, server.url, "tiny", timeout_s=1.0, max_retries=1, backoff_s=0.1)
        assert gen.worst_case_s() == pytest.approx(2.1)
        start = time.monotonic()
        with pytest.raises(EndpointError, match=r"timed out after 1 s .*attempt 2 of 2"):
            gen.check()
        assert time.monotonic() - start < 2.1 + 1.0
        gen.close()


def echo_headers(status: bytes):
    def handle(conn: socket.socket, request: bytes, stop) -> None:
        body = b"you sent:\n" + request  # a server that echoes the request's headers, the key among them
        conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)

    return handle


def _error_from_echoing_server(monkeypatch: pytest.MonkeyPatch, key: str, status: bytes) -> str:
    """The one-line error of a check against a server that answers ``status`` echoing the request."""
    monkeypatch.setenv("MAGE_TEST_KEY", key)
    with RawServer(echo_headers(status)) as server:
        gen = OpenAIGenerator(None, server.url, "tiny", api_key_env="MAGE_TEST_KEY", max_retries=0)
        with pytest.raises(EndpointError) as info:
            gen.check()
        gen.close()
    return str(info.value)


@pytest.mark.parametrize("key", ["sk-secret-abc123XYZ", "hunter2-plain-token"])
def test_a_refused_key_is_not_echoed(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    message = _error_from_echoing_server(monkeypatch, key, b"401 Unauthorized")
    assert key not in message and "Bearer" not in message and "you sent" not in message  # no body at all
    assert "refused the API key (HTTP 401 Unauthorized)" in message and "MAGE_TEST_KEY" in message
    assert "backend.openai.api_key_env" in message


def test_other_error_bodies_are_redacted_excerpts(monkeypatch: pytest.MonkeyPatch) -> None:
    message = _error_from_echoing_server(monkeypatch, "hunter2-plain-token", b"400 Bad Request")
    assert "HTTP 400 Bad Request: you sent:" in message and "[redacted]" in message
    assert "hunter2-plain-token" not in message and "\n" not in message and len(message) < 300


def test_redaction_and_urls_without_credentials() -> None:
    from mage_core.backends.openai_generator import display_url, redact

    text = "Authorization: Bearer abc.def\nx-api-key: sk-proj-0123456789 and mykey " + "y" * 500
    out = redact(text, "mykey")
    assert "abc.def" not in out and "sk-proj" not in out and "mykey" not in out and len(out) <= 200
    assert display_url("https://user:pw@host:8000/v1/models") == "https://host:8000/v1/models"
    assert display_url("http://host/v1") == "http://host/v1"


def test_a_slow_request_prints_progress_and_a_fast_one_does_not(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import mage_core.backends.openai_generator as og

    def slow(conn: socket.socket, request: bytes, stop) -> None:
        stop.wait(1.6 if b"slow" in request else 0.0)
        body = b'{"object": "list", "data": [{"id": "tiny"}]}'
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)

    with RawServer(slow) as server:
        gen = OpenAIGenerator(None, server.url, "tiny", timeout_s=5.0, max_retries=0)
        assert gen.check() == ["tiny"]  # fast, default thresholds: nothing printed
        assert capsys.readouterr().err == ""
        monkeypatch.setattr(og, "PROGRESS_AFTER_S", 0.5)
        monkeypatch.setattr(og, "PROGRESS_EVERY_S", 0.5)
        gen.api_key = "slow"  # the handler sees it in the Authorization header
        assert gen.check() == ["tiny"]
        gen.close()
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith(f"waiting for {server.url}/models: ") for line in lines)
    assert "of 5 s (attempt 1 of 1)" in lines[0] and 1 <= len(lines) <= 3
