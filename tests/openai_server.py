"""A small OpenAI-compatible server for the endpoint generator's tests: it serves
a local model folder (the embedded tiny model) on ``/v1/models`` and
``/v1/completions`` through the project's HF generator, in a thread.

``mode`` makes it misbehave on ``/v1/completions``: ``"ok"``; ``"slow"`` (answers
after ``delay_s``); ``"malformed"`` (a reply without ``choices``); ``"flaky"``
(HTTP 503 on the first request, then ok). It records every request body."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch

from mage_core.generation import SamplingParams
from mage_core.backends.hf import HFGenerator
from mage_core.policy.model import load_policy


class ModelServer:
    def __init__(self, model_dir: Path, name: str = "tiny", mode: str = "ok", delay_s: float = 0.0) -> None:
        model, self.tokenizer = load_policy(model_dir)
        self.generator = HFGenerator(model, pad_token_id=self.tokenizer.pad_token_id)
        self.name, self.mode, self.delay_s = name, mode, delay_s
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: Any) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.name, "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append({**body, "authorization": self.headers.get("Authorization")})
                    first = len(server.requests) == 1
                if server.mode == "slow":
                    time.sleep(server.delay_s)
                if server.mode == "malformed":
                    return self._send(200, {"id": "x", "object": "text_completion"})
                if server.mode == "flaky" and first:
                    return self._send(503, {"error": "warming up"})
                self._send(200, server.complete(body))

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # the default listen backlog of 5 drops the connections of a busy client
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                import sys

                if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                    super().handle_error(request, client_address)  # a client that timed out: expected here

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        ids = self.tokenizer.encode(body["prompt"], add_special_tokens=False)
        sampling = SamplingParams(temperature=body.get("temperature", 1.0), top_p=body.get("top_p", 1.0),
                                  top_k=body.get("top_k", 0), max_new_tokens=body["max_tokens"],
                                  stop_token_ids=(self.tokenizer.eos_token_id,))
        with self._lock:  # one generation at a time on the model
            out = self.generator.generate([ids], sampling, torch.Generator().manual_seed(int(body.get("seed", 0))))[0]
        text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
        return {"id": "cmpl", "object": "text_completion", "model": self.name,
                "choices": [{"index": 0, "text": text, "finish_reason": "stop" if out.finished else "length"}]}

    def __enter__(self) -> "ModelServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
