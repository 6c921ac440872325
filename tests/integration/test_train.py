"""`mage train` end to end on the embedded tiny model: resume is exact.

An interrupted-and-resumed run (in-process stop, and a real SIGKILL of the
CLI) must end with bit-identical parameters to an uninterrupted run with the
same seed; a corrupt checkpoint must stop the resume with a clear error.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

from mage_core.config import parse_config
from mage_core.stages.train import train
from mage_core.trainers.checkpoint import CheckpointError, CheckpointManager

pytestmark = pytest.mark.integration

PARAMS = {
    "env": {"name": "kuhn_poker"},
    "train": {"iterations": 4, "groups_per_iteration": 3, "eval_every": 2, "checkpoint_every": 1},
    "algorithm": {"group_size": 4},
    "evaluation": {"meta_episodes_per_opponent_seat": 4},
    "tournament": {"matches": []},
}


def final_weights(out: Path) -> dict:
    latest = CheckpointManager(out / "checkpoints").latest()
    assert latest is not None
    return load_file(str(latest / "model.safetensors"))


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert (a[key] == b[key]).all(), key


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """(summary, output folder) of one uninterrupted run of PARAMS: the reference that the
    interrupted-and-resumed runs of this module end at (trained once, not once a test)."""
    out = tmp_path_factory.mktemp("straight") / "straight"
    return train(parse_config(PARAMS), out), out


def test_resume_in_process_is_bit_identical(tmp_path: Path, straight: tuple[dict, Path]) -> None:
    cfg = parse_config(PARAMS)
    straight_summary, straight_out = straight
    first = train(cfg, tmp_path / "split", stop_after=2)
    assert first["interrupted"] and first["iteration"] == 2
    resumed = train(cfg, tmp_path / "split", resume=True)
    assert resumed["iterations"] == straight_summary["iterations"] == 4
    assert_same(final_weights(straight_out), final_weights(tmp_path / "split"))
    assert resumed["final_eval"] == straight_summary["final_eval"]
    # The resumed log reads like the uninterrupted one.
    log_a = (straight_out / "metrics.jsonl").read_text().splitlines()
    log_b = (tmp_path / "split" / "metrics.jsonl").read_text().splitlines()
    assert len(log_a) == len(log_b)


def test_sigkill_then_resume_matches(tmp_path: Path, project_root: Path) -> None:
    params = tmp_path / "params.yaml"
    slow = {**PARAMS, "train": {**PARAMS["train"], "iterations": 6}}
    params.write_text(yaml.safe_dump(slow))
    cmd = [sys.executable, "-m", "mage_core", "train", "--params", str(params)]
    env = {**os.environ, "COLUMNS": "120"}
    subprocess.run([*cmd, "--out", str(tmp_path / "straight")], check=True, capture_output=True, env=env,
                   timeout=600)
    proc = subprocess.Popen([*cmd, "--out", str(tmp_path / "killed")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    manager = CheckpointManager(tmp_path / "killed" / "checkpoints")
    deadline = time.monotonic() + 300
    while manager.latest() is None or manager.latest().name < "step-000002":
        assert proc.poll() is None, "training ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    out = subprocess.run([*cmd, "--out", str(tmp_path / "killed"), "--resume"], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "resumed from" in out.stdout
    assert_same(final_weights(tmp_path / "straight"), final_weights(tmp_path / "killed"))


def test_corrupt_checkpoint_is_reported_and_kept(tmp_path: Path) -> None:
    cfg = parse_config(PARAMS)
    train(cfg, tmp_path / "run", stop_after=2)
    latest = CheckpointManager(tmp_path / "run" / "checkpoints").latest()
    weights = latest / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="model.safetensors"):
        train(cfg, tmp_path / "run", resume=True)
    assert weights.read_bytes() == data[: len(data) // 2]  # nothing was overwritten
    # Without --resume an existing run is never silently overwritten.
    with pytest.raises(Exception, match="--resume"):
        train(cfg, tmp_path / "run")


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_changed_config_refuses_to_resume_naming_the_keys(tmp_path: Path, project_root: Path) -> None:
    # Issue 25: `--resume` names the differing keys with both values, exits 2 and changes nothing.
    out = tmp_path / "run"
    train(parse_config(PARAMS), out, stop_after=1)
    before = _files(out / "checkpoints")
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({**PARAMS, "train": {**PARAMS["train"], "learning_rate": 0.5}}))
    done = subprocess.run([sys.executable, "-m", "mage_core", "train", "--params", str(params), "--out", str(out),
                           "--resume"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"},
                          timeout=600)
    assert done.returncode == 2, done.stderr
    message = " ".join(done.stderr.split())
    assert "train.learning_rate: 0.001 in the checkpoint, 0.5 now" in message, message
    assert "--resume auto" in message
    assert _files(out / "checkpoints") == before and not (out / "superseded").exists()


def test_a_checkpoint_without_its_config_says_it_predates_the_key_listing(tmp_path: Path) -> None:
    import hashlib

    from mage_core.config import ConfigError
    from mage_core.trainers.checkpoint import _canonical

    out = tmp_path / "run"
    train(parse_config(PARAMS), out, stop_after=1)
    meta_path = CheckpointManager(out / "checkpoints").latest() / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["meta_sha256"], meta["metadata"]["config"]  # as the checkpoints of earlier code
    meta["meta_sha256"] = hashlib.sha256(_canonical(meta).encode()).hexdigest()
    meta_path.write_text(json.dumps(meta))
    changed = parse_config({**PARAMS, "train": {**PARAMS["train"], "learning_rate": 0.5}})
    with pytest.raises(ConfigError, match="config digest differs.*predates the listing of the differing keys"):
        train(changed, out, resume=True)


def test_resume_auto_continues_after_a_tracking_only_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          straight: tuple[dict, Path]) -> None:
    # Issue 25: turning MLflow on is no reason to retrain (it used to delete the checkpoints).
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    train(parse_config(PARAMS), out, stop_after=2)
    tracked = parse_config({**PARAMS, "tracking": {"mlflow": True, "experiment": "resumed",
                                                   "system_metrics": False, "register_models": False}})
    resumed = train(tracked, out, resume="auto")
    straight_summary, straight_out = straight
    assert not (out / "superseded").exists()
    assert_same(final_weights(out), final_weights(straight_out))
    assert resumed["final_eval"] == straight_summary["final_eval"]


def test_paper_way_free_text_with_generated_reflections_trains(tmp_path: Path) -> None:
    # The paper's path on the tiny model: paper prompts, sampled text parsed from
    # <action> tags, reflect turns generated by the policy and trained on.
    cfg = parse_config({
        "env": {"name": "tic_tac_toe"},
        # one opponent and seat: the evaluation plays 1 meta-episode, not one per pair of the
        # balanced population's 16 (most of this test's time went there)
        "population": {"tic_tac_toe": [{"opponent": "pattern-corners", "seat": "first"}]},
        "policy": {"action_mode": "free", "prompt_style": "paper", "reflections": "generated",
                   "memory": "history_and_reflection", "max_new_tokens": 12},
        # one optimizer step an iteration: the paper-style prompts are long and the backward passes
        # were most of the time (8 steps, 31 s of 54 s)
        "train": {"iterations": 2, "groups_per_iteration": 2, "eval_every": 0, "checkpoint_every": 1,
                  "ppo_epochs": 1, "mini_batches_per_epoch": 1},
        "algorithm": {"group_size": 2},
        "evaluation": {"meta_episodes_per_opponent_seat": 1},
        "tournament": {"matches": []},
    })
    summary = train(cfg, tmp_path / "run")
    assert summary["iterations"] == 2
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if r.get("step") == 1 and "train/batch/num_samples" in r]
    assert steps and steps[0]["train/batch/num_samples"] > 0
    # An untrained model writes no valid tags: every play turn is invalid and penalized.
    assert steps[0]["train/rollout/all/invalid_rate"] > 0.5
    assert summary["final_eval"]["eval/all/num_meta_episodes"] > 0


def test_time_budget_stop_on_a_checkpoint_iteration_saves_once(tmp_path: Path) -> None:
    # A budget that is over after the first iteration, which is also a checkpoint
    # iteration: the stop saves that checkpoint once (it used to save it twice and
    # fail with "refusing to overwrite it in place").
    data = {**PARAMS, "train": {**PARAMS["train"], "time_budget_minutes": 1e-9}}
    summary = train(parse_config(data), tmp_path / "run")
    assert summary["iterations"] == 1
    latest = CheckpointManager(tmp_path / "run" / "checkpoints").latest()
    assert latest is not None and latest.name == "step-000001"


def test_resume_auto_continues_a_matching_run_and_restarts_a_changed_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], straight: tuple[dict, Path]) -> None:
    from mage_core.config import ConfigError

    cfg = parse_config(PARAMS)
    out = tmp_path / "run"
    train(cfg, out, stop_after=2)
    resumed = train(cfg, out, resume="auto")  # same configuration: continues at iteration 2
    straight_summary, straight_out = straight
    assert resumed["iterations"] == 4
    assert_same(final_weights(out), final_weights(straight_out))
    assert resumed["final_eval"] == straight_summary["final_eval"]
    # params changed (as after `dvc exp run -S ...`): the old checkpoints are not continued
    changed = parse_config({**PARAMS, "train": {**PARAMS["train"], "learning_rate": 1e-4}})
    with pytest.raises(ConfigError, match="train.learning_rate: 0.001 in the checkpoint, 0.0001 now"):
        train(changed, out, resume=True)
    old_run = _files(out)
    fresh = train(changed, out, resume="auto")
    assert fresh["iterations"] == 4 and fresh["config_digest"] != straight_summary["config_digest"]
    assert ("the configuration of step-000004 differs at train.learning_rate: 0.001 in the checkpoint, "
            "0.0001 now; moved the old run to") in " ".join(capsys.readouterr().out.split())
    # ... but kept, moved aside whole: never deleted without being asked
    [aside] = (out / "superseded").iterdir()
    assert _files(aside) == old_run
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert metrics[0]["params"]["train.learning_rate"] == 1e-4  # a new log, not an appended one
    assert [m["step"] for m in metrics[1:] if "final/eval/all/chips_ep3" not in m] == [1, 2, 3, 4]


def test_resume_auto_keeps_a_finished_run_and_restarts_one_written_by_other_code(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        straight: tuple[dict, Path]) -> None:
    import mage_core.stages.train as train_stage

    cfg = parse_config(PARAMS)
    out = tmp_path / "run"
    train(cfg, out, stop_after=2)
    # Other code (mage_core changed, so DVC re-runs the stage): the unfinished run is not continued.
    monkeypatch.setattr(train_stage, "code_digest", lambda: "another-version")
    again = train(cfg, out, resume="auto")
    assert "written by other code (mage_core changed); moved the old run to" in capsys.readouterr().out
    steps = [json.loads(line).get("step") for line in (out / "metrics.jsonl").read_text().splitlines()[1:]]
    assert again["iterations"] == 4 and sorted(set(steps)) == [1, 2, 3, 4]  # trained from iteration 1
    # Issue 39: the same code, params and inputs, the run finished and its outputs as it wrote them
    # (DVC re-runs the stage, e.g. its dvc repro was killed before recording it): kept, byte for byte,
    # nothing trained again (it used to be moved aside and trained afresh, to the same bytes).
    before = _files(out)
    kept = train(cfg, out, resume="auto")
    assert "the run it holds finished with these params, code and input files" in " ".join(
        capsys.readouterr().out.split())
    assert kept["kept"] and kept["final_eval"] == again["final_eval"] and kept["minutes"] == 0
    assert _files(out) == before and len(list((out / "superseded").iterdir())) == 1
    # An output changed since (DVC re-runs the stage for it): the run is moved aside and trained afresh.
    summary = out / "summary.json"
    summary.write_text(summary.read_text().replace('"iterations": 4', '"iterations": 5'))
    finished = train(cfg, out, resume="auto")
    assert ("the run it holds is finished (4 iterations) but its outputs changed since it wrote them "
            "(summary.json); moved the old run to") in " ".join(capsys.readouterr().out.split())
    assert len(list((out / "superseded").iterdir())) == 2  # both old runs kept, each in a folder of its own
    straight_summary, straight_out = straight
    assert_same(final_weights(out), final_weights(straight_out))
    assert finished["final_eval"] == again["final_eval"] == straight_summary["final_eval"]
    assert (out / "summary.json").read_bytes() == (straight_out / "summary.json").read_bytes()


def test_a_run_without_checkpoints_never_reads_an_earlier_runs_policy_init(tmp_path: Path) -> None:
    """A baseline writes no checkpoint; rerun into the same folder it must build its own
    policy-init/, not load the one an earlier run (another seed here: other weights) left."""
    react = {**PARAMS, "algorithm": {"preset": "react"}}
    fresh, reused = tmp_path / "fresh", tmp_path / "reused"
    train(parse_config(react), fresh)
    train(parse_config({**react, "seed": 1}), reused)
    stale = _files(reused / "policy-init")
    assert stale != _files(fresh / "policy-init")
    train(parse_config(react), reused, resume="auto")
    assert _files(reused / "policy-init") == _files(fresh / "policy-init")
    [aside] = (reused / "superseded").iterdir()
    assert _files(aside / "policy-init") == stale  # moved aside whole, never deleted


def test_select_on_exact_greedy_keeps_the_policy_with_the_best_exact_value(tmp_path: Path) -> None:
    # Kuhn against the paper's deterministic archetypes: every evaluation also reports the
    # exact greedy chips, and best/ is the evaluation with the highest of them.
    cfg = parse_config({**PARAMS, "train": {**PARAMS["train"], "select_on": "exact_greedy"}})
    summary = train(cfg, tmp_path / "run")
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = {rec["step"]: rec["eval/all/chips_exact_ep3"] for rec in lines if "eval/all/chips_exact_ep3" in rec}
    assert sorted(evals) == [2, 4]
    best_step = max(evals, key=lambda s: (evals[s], s))  # ties: the later policy
    assert summary["best_score"] == evals[best_step] and summary["best_iteration"] == best_step
    # A game without an exact sum is refused before anything is written.
    ttt = parse_config({**PARAMS, "env": {"name": "tic_tac_toe"}, "train": {**PARAMS["train"], "select_on": "exact_greedy"}})
    with pytest.raises(Exception, match="select_on: exact_greedy"):
        train(ttt, tmp_path / "ttt")
    assert not (tmp_path / "ttt").exists()


def test_two_identical_trainings_write_byte_identical_cached_outputs(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # metrics.jsonl and summary.json are DVC-cached outputs (dvc.yaml): a wall-clock time in
    # them would change their hash on every run of the same seeded training. The timings are
    # still measured and go to MLflow (a real sqlite store here), just not into these files.
    from mlflow.tracking import MlflowClient

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.chdir(tmp_path)
    cfg = parse_config({**PARAMS, "train": {"iterations": 2, "groups_per_iteration": 2, "eval_every": 0},
                        "tracking": {"mlflow": True, "experiment": "bytes"}})
    first, second = train(cfg, tmp_path / "a"), train(cfg, tmp_path / "b")
    for name in ("metrics.jsonl", "summary.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert first["minutes"] > 0 and second["minutes"] > 0  # measured, returned, not written
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert "minutes" not in summary and summary["iterations"] == 2
    records = [json.loads(line) for line in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "step" in r] == [1, 2, 2]  # two iterations, then the final evaluation
    assert not any("/time/" in key for r in records for key in r)
    client = MlflowClient(store)
    experiment = client.get_experiment_by_name("bytes")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 2
    for run in runs:
        timed = {key for key in run.data.metrics if key.startswith("train/time/")}
        assert {"train/time/iteration_s", "train/time/rollout_s", "train/time/total_s"} <= timed
        assert [m.step for m in client.get_metric_history(run.info.run_id, "train/time/iteration_s")] == [1, 2]


def test_an_unwritable_out_is_one_line_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 25: a --out that cannot be written is one line naming the folder and the fix,
    exit 2, nothing written (tests run as root, which ignores permissions: a parent that
    is a file stands in for a read-only one)."""
    from mage_core.cli import main
    from mage_core.stages import train as stage

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("the policy was built before --out was checked")

    monkeypatch.setattr(stage, "build_policy", no_work)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump(PARAMS))
    capsys.readouterr()
    assert main(["train", "--params", str(params), "--out", str(blocker / "run")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert f"--out: {blocker / 'run'}: cannot write there (" in err
    assert "choose another --out or fix its permissions" in err
    assert blocker.read_text() == "not a folder" and sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "p.yaml"]


def test_a_full_disk_is_one_line_and_a_rerun_finishes(tmp_path: Path, project_root: Path) -> None:
    """Issue 25: a disk that fills during training (here `ulimit -f`: every file over 400 kB fails,
    as on a full disk) ended in a traceback from safetensors' writer. One line names what could not
    be written and what is kept; the same command with room to write finishes the run."""
    import resource
    import subprocess
    import sys

    (tmp_path / "params.yaml").write_text((project_root / "params.yaml").read_text())
    cmd = [sys.executable, "-m", "mage_core", "train", "--out", "run", "--iterations", "3", "--resume", "auto",
           "--set", "train.groups_per_iteration=3", "--set", "train.eval_every=0", "--set", "tracking.mlflow=false",
           "--set", "evaluation.meta_episodes_per_opponent_seat=2", "--set", "train.checkpoint_every=1"]

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (400_000, 400_000))

    full = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, preexec_fn=small_files, timeout=300)
    assert full.returncode == 1, full.stderr[-2000:]
    assert "Traceback" not in full.stderr
    line = [x for x in full.stderr.splitlines() if x.strip()][-1]
    assert line.startswith("file size limit reached: File too large writing run/checkpoints/step-000001. ")
    assert "the last whole checkpoint are kept" in line
    assert "`mage train` stopped" in line and line.endswith("rerun `mage train` with --resume auto, which continues "
                                                             "from that checkpoint")
    assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == []  # no half-written checkpoint
    again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["iterations"] == 3


def test_a_resume_with_tracking_toggled_records_the_change_in_metrics_jsonl(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39: tracking keys are resume-independent (RESUME_INDEPENDENT_KEYS), and after a resume
    with tracking.mlflow true -> false the first line of metrics.jsonl (the run's params) still said
    true for the whole run. Now a params record after the resume's step says false from there."""
    from mage_core.evaluation.run_tables import read_jsonl

    monkeypatch.chdir(tmp_path)  # the MLflow store of the first part: ./mlflow.db
    short = {**PARAMS, "train": {**PARAMS["train"], "iterations": 2, "eval_every": 0}}
    train(parse_config({**short, "tracking": {"mlflow": True}}), tmp_path / "run", stop_after=1)
    train(parse_config({**short, "tracking": {"mlflow": False}}), tmp_path / "run", resume=True)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    params = [(i, r) for i, r in enumerate(records) if "params" in r]
    assert [i for i, _ in params] == [0, [i for i, r in enumerate(records) if r.get("step") == 2][0] - 1]
    (_, first), (_, resumed) = params
    assert first["params"]["tracking.mlflow"] is True and "resumed_after_step" not in first
    assert resumed["params"]["tracking.mlflow"] is False and resumed["resumed_after_step"] == 1
    assert {k for k in first["params"] if first["params"][k] != resumed["params"][k]} == {"tracking.mlflow"}
    assert read_jsonl(tmp_path / "run" / "metrics.jsonl")[0]["tracking.mlflow"] is False  # the end's settings
