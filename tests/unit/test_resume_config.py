"""What a checkpoint must match to be resumed (issue 25): keys that cannot change a
run's results are left out of the config digest; the differing keys are named."""

from __future__ import annotations

from pathlib import Path

import pytest

from mage_core.config import parse_config
from mage_core.stages.train import (
    RESUME_INDEPENDENT_KEYS,
    RUN_OUTPUTS,
    config_differences,
    config_digest,
    move_aside,
    resume_config,
)

BASE = parse_config({})


@pytest.mark.parametrize("changed", [
    {"tracking": {"mlflow": True}},
    {"tracking": {"experiment": "other", "system_metrics": False, "register_models": False}},
    {"train": {"output_dir": "elsewhere", "keep_checkpoints": 5, "checkpoint_every": 3, "time_budget_minutes": 9}},
    {"rollout": {"workers": 2, "ray_address": "auto"}},
    {"reproduce": {"iterations": 3, "eval_per_pair": 7}},
])
def test_keys_that_cannot_change_results_leave_the_digest_unchanged(changed: dict) -> None:
    assert config_digest(parse_config(changed)) == config_digest(BASE)


@pytest.mark.parametrize("changed", [
    {"train": {"learning_rate": 3e-4}},
    {"train": {"eval_every": 7}},  # which policies are evaluated, so which becomes best/
    {"train": {"num_threads": 2}},
    {"train": {"iterations": 3}},  # the default schedules run over the iterations
    {"seed": 5},
])
def test_keys_that_change_results_change_the_digest(changed: dict) -> None:
    assert config_digest(parse_config(changed)) != config_digest(BASE)


def test_iterations_are_left_out_only_when_no_schedule_runs_over_them() -> None:
    flat = {"lr_schedule": "constant", "entropy_coef": 0.01, "entropy_coef_final": 0.01}
    assert (config_digest(parse_config({"train": {**flat, "iterations": 3}}))
            == config_digest(parse_config({"train": {**flat, "iterations": 30}})))
    decaying = {**flat, "entropy_coef_final": 0.002}
    assert (config_digest(parse_config({"train": {**decaying, "iterations": 3}}))
            != config_digest(parse_config({"train": {**decaying, "iterations": 30}})))


def test_the_stored_configuration_lacks_exactly_the_independent_keys() -> None:
    stored = resume_config(BASE)
    for key in RESUME_INDEPENDENT_KEYS:
        section, _, name = key.partition(".")
        assert (section not in stored) if not name else (name not in stored[section]), key
    assert stored["train"]["learning_rate"] == BASE.train.learning_rate


def test_differences_name_the_keys_with_both_values_then_how_many_more() -> None:
    now = parse_config({"train": {"learning_rate": 3e-4}})
    assert (config_differences(resume_config(BASE), resume_config(now))
            == "train.learning_rate: 0.001 in the checkpoint, 0.0003 now")
    many = parse_config({"seed": 3, "train": {"learning_rate": 0.5, "kl_coef": 0.1, "weight_decay": 0.3,
                                              "max_grad_norm": 2.0, "eval_every": 3, "num_threads": 2}})
    line = config_differences(resume_config(BASE), resume_config(many))
    assert line.startswith("seed: 0 in the checkpoint, 3 now; ") and line.endswith("; and 2 more")
    assert line.count(" in the checkpoint, ") == 5
    assert (config_differences({"a": {"b": "x"}}, {"a": {"c": [1, 2]}})
            == 'a.b: "x" in the checkpoint, absent now; a.c: absent in the checkpoint, [1, 2] now')


def test_move_aside_keeps_every_output_of_the_old_run(tmp_path: Path) -> None:
    assert move_aside(tmp_path) is None  # nothing to move: no folder made
    assert not (tmp_path / "superseded").exists()
    for name in RUN_OUTPUTS:
        if "." in name:
            (tmp_path / name).write_text(name)
        else:
            (tmp_path / name).mkdir()
            (tmp_path / name / "f").write_text(name)
    (tmp_path / "other.txt").write_text("not a run output")
    first = move_aside(tmp_path)
    assert first is not None and first.parent == tmp_path / "superseded"
    assert sorted(p.name for p in first.iterdir()) == sorted(RUN_OUTPUTS)
    assert (first / "checkpoints" / "f").read_text() == "checkpoints"
    assert (tmp_path / "other.txt").exists() and not (tmp_path / "checkpoints").exists()
    (tmp_path / "summary.json").write_text("{}")
    second = move_aside(tmp_path)  # the same second: a folder of its own
    assert second is not None and second != first and (second / "summary.json").read_text() == "{}"


def test_a_finished_run_is_kept_only_while_its_record_vouches_for_everything(tmp_path: Path) -> None:
    # Issue 39: `--resume auto` keeps a finished run instead of training it again only when its
    # finished.json names these params, code and input files (here a warm start, model.init) and
    # every output is the bytes it wrote; anything else is a reason to train afresh.
    from mage_core.stages.train_resume import FINISHED, why_not_kept, write_finished

    init = tmp_path / "sft" / "model"
    init.mkdir(parents=True)
    (init / "model.safetensors").write_bytes(b"weights")
    cfg = parse_config({"model": {"init": str(init)}, "train": {"iterations": 4}})
    out = tmp_path / "run"
    (out / "best").mkdir(parents=True)
    (out / "best" / "model.safetensors").write_bytes(b"best")
    for name in ("metrics.jsonl", "summary.json", "transcripts.txt"):
        (out / name).write_text(name)
    digest = config_digest(cfg)
    assert why_not_kept(out, cfg, digest, "code") == f"holds no {FINISHED} vouching for its outputs"
    write_finished(out, cfg, digest, "code")
    assert why_not_kept(out, cfg, digest, "code") is None
    assert why_not_kept(out, cfg, digest, "other code") == f"its {FINISHED} names other params or code"
    longer = parse_config({"model": {"init": str(init)}, "train": {"iterations": 5}})
    assert why_not_kept(out, longer, digest, "code") == "it ran 4 iterations, not 5"
    (init / "model.safetensors").write_bytes(b"other weights")  # the warm start was made again
    assert why_not_kept(out, cfg, digest, "code") == f"its input files changed since ({init})"
    (init / "model.safetensors").write_bytes(b"weights")
    (out / "best" / "model.safetensors").unlink()  # an output gone (DVC re-runs the stage for it)
    assert why_not_kept(out, cfg, digest, "code") == (
        "its outputs changed since it wrote them (best/model.safetensors)")
    assert FINISHED in RUN_OUTPUTS  # moved aside with the run it vouches for
