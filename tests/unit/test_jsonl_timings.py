"""Timings stay out of the JSONL metric log (a DVC-cached output): every key under
train/time/ or eval/time/, also behind final/, and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mage_core.tracking.jsonl import JsonlLogger, is_timing, without_timings

pytestmark = pytest.mark.unit

TIMINGS = ["train/time/rollout_s", "train/time/meta_episodes_per_s", "train/time/tokens_per_s",
           "eval/time/in_domain_s", "final/eval/time/in_domain_s", "train/time/total_s"]
NOT_TIMINGS = ["train/rollout/all/chips_ep3", "eval/all/success_ep3", "final/eval/all/chips_ep3",
               "eval/in_domain/time/chips_ep1", "train/timeout/x", "time/train/x", "eval/timers/x",
               "final/final/train/time/x"]


@pytest.mark.parametrize("key", TIMINGS)
def test_timing_keys(key: str) -> None:
    assert is_timing(key)


@pytest.mark.parametrize("key", NOT_TIMINGS)
def test_other_keys(key: str) -> None:
    assert not is_timing(key)


def test_the_log_drops_timings_and_writes_no_empty_record(tmp_path: Path) -> None:
    log = JsonlLogger(tmp_path / "metrics.jsonl")
    log.log_metrics(1, {"train/rollout/all/chips_ep3": 0.25, "train/time/iteration_s": 4.2})
    log.log_metrics(1, {"train/time/total_s": 9.0})  # timings only: no record at all
    log.log_metrics(2, {"final/eval/all/chips_ep3": -0.5, "final/eval/time/in_domain_s": 1.0})
    log.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"step": 1, "train/rollout/all/chips_ep3": 0.25},
                                                    {"step": 2, "final/eval/all/chips_ep3": -0.5}]
    assert without_timings({"a/b/c": 1, "eval/time/x_s": 2}) == {"a/b/c": 1}


def test_a_resume_with_other_settings_records_them_from_its_step(tmp_path: Path) -> None:
    """Issue 39: a run resumed with a setting that cannot change its results changed (tracking.*)
    kept only its first params record, with the old value. The change is recorded with the step it
    applies after; a resume with the same settings adds nothing; cutting the log back to an earlier
    step drops a params record written at a later resume, as it drops that resume's steps."""
    path = tmp_path / "metrics.jsonl"
    log = JsonlLogger(path)
    log.log_params({"tracking.mlflow": True, "train.iterations": 4})
    for step in (1, 2, 3):
        log.log_metrics(step, {"a/b/c": step})
    log.close()
    log = JsonlLogger(path, resume_from_step=2)  # killed after step 3, checkpoint at 2
    assert log.log_resumed_params({"tracking.mlflow": True, "train.iterations": 4}, 2) is False
    assert log.log_resumed_params({"tracking.mlflow": False, "train.iterations": 4}, 2) is True
    log.log_metrics(3, {"a/b/c": 3})
    log.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records == [{"params": {"tracking.mlflow": True, "train.iterations": 4}}, {"step": 1, "a/b/c": 1},
                       {"step": 2, "a/b/c": 2},
                       {"params": {"tracking.mlflow": False, "train.iterations": 4}, "resumed_after_step": 2},
                       {"step": 3, "a/b/c": 3}]
    log = JsonlLogger(path, resume_from_step=3)  # a later resume keeps what came before it
    assert log.log_resumed_params({"tracking.mlflow": False, "train.iterations": 4}, 3) is False
    log.close()
    assert [json.loads(line) for line in path.read_text().splitlines()] == records
    log = JsonlLogger(path, resume_from_step=2)  # an earlier one drops the steps and the settings after it
    log.close()
    assert [json.loads(line) for line in path.read_text().splitlines()] == records[:3]
