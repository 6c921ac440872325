"""The OpenAI-compatible endpoint generator against a real local HTTP server that
serves the embedded tiny model (tests/openai_server.py): a generation through
the endpoint, `mage evaluate` through it, and the failures a user meets: a
server that is down, a slow one, a malformed reply, a transient 503."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch

from mage_core.backends.base import SamplingParams
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
        with pytest.raises(EndpointError, match=r"timed out after 0.5 s \(2 attempts\)"):
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
