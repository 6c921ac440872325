"""The smoke reproduction end to end: real Prefect (its test harness), real DVC in a
temp git repository, a real MLflow sqlite store. The flow runs every stage of
dvc.yaml once; a second run does nothing; a flow killed mid-stage resumes
without redoing the stages it had finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
import yaml

from flows.dvc_stages import stage_graph

pytestmark = pytest.mark.integration

SMOKE_RUNS = ["kuhn_poker-mage", "tic_tac_toe-gigpo", "webshop-reflexion", "alfworld-react", "kuhn_poker-a_mem",
              "sokoban-memento",
              # the smoke_ablation grid's points (its mage-0 is kuhn_poker-mage, trained once)
              "smoke_ablation-mage-1", "smoke_ablation-ablation_cumulative-0", "smoke_ablation-ablation_cumulative-1"]
#: The smoke profile's stages in the flow's order: the code manifests and data first, then training,
#: evaluation, the ablations' summary, the report.
SMOKE_STAGES = (["code", "data@webshop", "data@alfworld", "sft@sokoban"] + [f"train@{r}" for r in SMOKE_RUNS]
                + [f"evaluate@{r}" for r in SMOKE_RUNS] + ["ablations", "report"])


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, copy_project: Callable[[Path], Path]) -> Path:
    from mage_core.stages.reproduce import prepare_workspace

    return prepare_workspace(copy_project(tmp_path_factory.mktemp("reproduce")), "smoke")


def _child_runs(store: str) -> dict[str, object]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store)
    experiment = client.get_experiment_by_name("mage")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.info.run_name == "reproduce"]
    return {"client": client, "parents": parents, "runs": runs}


def test_smoke_flow_runs_every_stage_then_nothing(workspace: Path, harness: None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.reproduce import reproduce

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(workspace)
    first = reproduce(str(workspace))
    assert [r["stage"] for r in first] == SMOKE_STAGES
    assert not any(r["skipped"] for r in first)
    for name in ("report.md", "table1.md", "metrics.json", "adaptation.png"):
        assert (workspace / "reports" / name).stat().st_size > 0, name
    lock = yaml.safe_load((workspace / "dvc.lock").read_text())["stages"]
    assert set(lock) == set(SMOKE_STAGES)
    # What each stage cost, per section (not a DVC output): every stage, with the seconds the flow measured.
    import csv

    with (workspace / "reports" / "cost.csv").open(newline="") as handle:
        costs = {r["stage"]: r for r in csv.DictReader(handle)}
    assert list(costs) == list(stage_graph(workspace)) and sorted(costs) == sorted(SMOKE_STAGES)
    assert float(costs["train@kuhn_poker-mage"]["seconds"]) == pytest.approx(
        next(r["seconds"] for r in first if r["stage"] == "train@kuhn_poker-mage"), abs=0.05)
    assert costs["train@smoke_ablation-mage-1"]["section"] == "ablation: smoke_ablation"
    assert costs["evaluate@kuhn_poker-mage"]["section"] == "Table 1: kuhn_poker"
    cost_md = (workspace / "reports" / "cost.md").read_text()
    assert {o["path"] for o in lock["evaluate@kuhn_poker-mage"]["outs"]} == {"artifacts/eval/kuhn_poker-mage"}

    # MLflow: one parent, one child run per stage, tagged with the hashes dvc.lock recorded.
    found = _child_runs(f"sqlite:///{workspace / 'mlflow.db'}")
    assert len(found["parents"]) == 1
    parent = found["parents"][0]
    children = {r.data.tags["dvc.stage"]: r for r in found["runs"]
                if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert set(children) == set(SMOKE_STAGES)
    train_run = children["train@kuhn_poker-mage"]
    assert train_run.info.status == "FINISHED"
    # Named and tagged by what they ran (the UI groups by these tags).
    assert train_run.info.run_name == "train kuhn_poker mage seed0"
    assert children["evaluate@tic_tac_toe-gigpo"].info.run_name == "evaluate tic_tac_toe gigpo seed0"
    assert {k: children["evaluate@webshop-reflexion"].data.tags[k] for k in ("stage", "env", "method", "seed")} == {
        "stage": "evaluate", "env": "webshop", "method": "reflexion", "seed": "0"}
    assert children["data@webshop"].data.tags["stage"] == "data" and parent.data.tags["stage"] == "reproduce"
    assert train_run.data.params["env.name"] == "kuhn_poker" and train_run.data.params["train.iterations"] == "2"
    assert "train/rollout/all/chips_ep3" in train_run.data.metrics
    best = next(o for o in lock["train@kuhn_poker-mage"]["outs"] if o["path"].endswith("/best"))
    assert train_run.data.tags["dvc.out.artifacts/train/kuhn_poker-mage/best"] == best["md5"]
    # The trained run's best/ is a registered version, with the hash DVC recorded for it; a baseline's is not.
    client = found["client"]
    version = client.get_model_version("mage-kuhn_poker-mage", "1")
    assert version.run_id == train_run.info.run_id
    assert version.tags["dvc.out.artifacts/train/kuhn_poker-mage/best"] == best["md5"]
    assert version.tags["git.commit"] == train_run.data.tags["git.commit"]
    assert client.search_model_versions("name = 'mage-kuhn_poker-a_mem'") == []
    assert "eval/in_domain/all/chips_ep3" in children["evaluate@kuhn_poker-mage"].data.metrics
    assert parent.data.metrics["flow/stages/executed"] == len(SMOKE_STAGES)
    # The grid's saved view: every point's evaluate run, the Table 1 run its mage-0 is included,
    # tagged with its setting by the ablations stage, grouped by that tag.
    from mage_core.tracking.views import VIEW_TAG_PREFIX, ablation_view_id, read_envelope, read_state

    experiment = client.get_experiment(train_run.info.experiment_id)
    view = read_envelope(experiment.tags[VIEW_TAG_PREFIX + ablation_view_id("smoke_ablation")])
    assert view is not None and view["name"] == "Ablation smoke_ablation: by setting"
    in_view = client.search_runs([experiment.experiment_id], read_state(view)["searchFilter"])
    assert sorted((r.data.tags["mage.run"], r.data.tags["ablation.smoke_ablation"]) for r in in_view) == [
        ("kuhn_poker-mage", "algorithm.preset=mage"),
        ("smoke_ablation-ablation_cumulative-0", "algorithm.preset=ablation_cumulative"),
        ("smoke_ablation-ablation_cumulative-1", "algorithm.preset=ablation_cumulative"),
        ("smoke_ablation-mage-1", "algorithm.preset=mage")]

    # A second run finds everything up to date: nothing runs, no new stage runs.
    second = reproduce(str(workspace))
    assert all(r["skipped"] for r in second)
    assert (workspace / "reports" / "cost.md").read_text() == cost_md  # nothing ran: nothing priced anew
    again = _child_runs(f"sqlite:///{workspace / 'mlflow.db'}")
    assert len(again["runs"]) == len(found["runs"]) + 1  # only the second flow's own run

    # Issue 40: an edit makes stale only the stages whose command can load the edited file: DVC sees
    # it in the code stage's folder, and once that stage rewrote the manifests, in exactly those stages.
    for edited, stale in (("mage_core/stages/report.py", {"report"}),
                          ("mage_core/envs/sokoban/level.py",
                           {"sft@sokoban", "train@sokoban-memento", "evaluate@sokoban-memento"}),
                          ("mage_core/envs/minesweeper/board.py", set())):  # no MineSweeper run in the smoke graph
        assert _stale_after_edit(workspace, edited) == stale, edited
    assert _dvc_status(workspace) == set()


def _dvc_status(workspace: Path) -> set[str]:
    done = subprocess.run([sys.executable, "-m", "dvc", "status", "--json"], cwd=workspace, capture_output=True,
                          text=True, check=True)
    return set(json.loads(done.stdout or "{}"))


def _repro_code(workspace: Path) -> None:
    from flows.dvc_stages import stage_env  # this interpreter's `mage` first on PATH, as the flow runs it

    done = subprocess.run([sys.executable, "-m", "dvc", "repro", "--single-item", "code"], cwd=workspace,
                          env=stage_env(), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _stale_after_edit(workspace: Path, relative: str) -> set[str]:
    """The stages `dvc status` lists after a comment is appended to ``relative`` and the code stage
    reran (then both restored); `mage lineage` names the same ones before the code stage reruns."""
    from mage_core.stages.lineage import code_changes

    path = workspace / relative
    before = path.read_bytes()
    try:
        path.write_bytes(before + b"\n# an edit\n")
        # DVC sees the edit in the code stage's folder (and in a task's own folder, its stages' input)
        before_code = _dvc_status(workspace)
        predicted = set(code_changes(workspace, workspace / "dvc.lock"))  # what `mage lineage` names
        _repro_code(workspace)  # the manifests, its outputs, name the stages whose code changed
        stale = _dvc_status(workspace)
        assert "code" in before_code and before_code - {"code"} <= stale == predicted, relative
        return stale
    finally:
        path.write_bytes(before)
        _repro_code(workspace)


def test_kill_9_of_mage_reproduce_takes_its_flow_along_and_a_rerun_finishes(workspace: Path, harness: None) -> None:
    # Issue 25: `kill -9` of `mage reproduce` used to leave its flow, the flow's Prefect server and
    # `dvc repro` running. Now every process below it dies with it (mage_core/io/lifeline.py), the
    # workspace lock is free, and the same command finishes the work.
    import psutil

    project = workspace.parents[2]  # <project>/artifacts/profiles/smoke
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "PREFECT_API_URL")}
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", DVC_NO_ANALYTICS="1")
    cmd = [sys.executable, "-m", "mage_core", "reproduce", "--profile", "smoke", "--params", str(project / "params.yaml")]
    before = _locked(workspace)
    with (workspace / "killed-reproduce.log").open("w") as log:
        proc = subprocess.Popen(cmd, cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    tree: list = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            tree = psutil.Process(proc.pid).children(recursive=True)
            if len(tree) >= 2:  # the flow and its temporary Prefect server
                break
            time.sleep(0.2)
        assert len(tree) >= 2, (workspace / "killed-reproduce.log").read_text()
        os.kill(proc.pid, signal.SIGKILL)  # mage reproduce alone, not its process group
        proc.wait()
        _, alive = psutil.wait_procs(tree, timeout=60)
        assert not alive, f"still running after kill -9 of mage reproduce: {alive}"
    finally:
        for child in tree:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
    rerun = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert _locked(workspace) == before  # everything was up to date: nothing redone, nothing recorded anew


@pytest.mark.slow  # 2-2.5 min on 2 cores (docs/testing.md); the fast tier keeps the flows above and below
def test_a_killed_flow_resumes_without_redoing_finished_stages(workspace: Path, harness: None,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.reproduce import reproduce

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(workspace)
    if "report" not in _locked(workspace):  # `pytest -m slow`: the first flow test did not run
        reproduce(str(workspace))
    # Change the evaluation size: every evaluate stage and the report are out of date again.
    params = yaml.safe_load((workspace / "params.yaml").read_text())
    params["reproduce"]["eval_per_pair"] = 3
    (workspace / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DVC_NO_ANALYTICS": "1"}
    log = (workspace / "killed-flow.log").open("w")
    # `mage reproduce` on the workspace as a project of its own (its params as changed above)
    proc = subprocess.Popen([sys.executable, "-m", "mage_core", "reproduce", "--params", str(workspace / "params.yaml")],
                            cwd=workspace, env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 240
    recorded = False
    while time.monotonic() < deadline and proc.poll() is None:
        entry = _locked(workspace).get("evaluate@kuhn_poker-mage", {})
        recorded = entry.get("params", {}).get("params.yaml", {}).get("reproduce.eval_per_pair") == 3
        if recorded:
            break
        time.sleep(0.2)
    assert proc.poll() is None, f"the flow ended before it was killed:\n{(workspace / 'killed-flow.log').read_text()}"
    import psutil

    tree: list = []
    for _ in range(300):  # until the next stage runs: the flow, its dvc repro, the stage command
        tree = psutil.Process(proc.pid).children(recursive=True)
        if any("dvc" in " ".join(p.cmdline()) for p in tree):
            break
        time.sleep(0.1)
    assert any("dvc" in " ".join(p.cmdline()) for p in tree), "no stage was running when the flow was killed"
    os.kill(proc.pid, signal.SIGKILL)  # mage reproduce alone, mid-way through the next stage: all below follow
    proc.wait()
    # DVC frees the locks of a killed `dvc repro` once its PID is gone: wait until init has
    # reaped the orphans (in this sandbox PID 1 reaps them with a delay; a zombie's PID exists).
    _, alive = psutil.wait_procs(tree, timeout=60)
    assert not alive, f"killed processes still present: {alive}"
    log.close()
    assert recorded, "the first evaluate stage never finished"
    resumed = reproduce(str(workspace))
    by_stage = {r["stage"]: r["skipped"] for r in resumed}
    assert by_stage["evaluate@kuhn_poker-mage"] is True  # finished before the kill: not redone
    assert by_stage["train@kuhn_poker-mage"] is True and by_stage["train@tic_tac_toe-gigpo"] is True
    assert by_stage["report"] is False
    assert _eval_size(workspace) == 3


def test_the_evaluate_flow_reevaluates_without_training(workspace: Path, harness: None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.reproduce import evaluate

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(workspace)
    trained = {k: v for k, v in _locked(workspace).items() if k.startswith("train@")}
    params = yaml.safe_load((workspace / "params.yaml").read_text())
    params["reproduce"]["eval_per_pair"] = 1  # another evaluation size than the smoke profile's 3
    (workspace / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    results = evaluate(str(workspace))
    assert [(r["stage"], r["skipped"]) for r in results] == [("code", True)] + [
        (f"evaluate@{r}", False) for r in SMOKE_RUNS] + [("ablations", False), ("report", False)]
    assert _eval_size(workspace) == 1
    assert {k: v for k, v in _locked(workspace).items() if k.startswith("train@")} == trained


def test_the_evaluate_flow_needs_trained_checkpoints(tmp_path: Path, harness: None,
                                                    copy_project: Callable[[Path], Path]) -> None:
    from flows.reproduce import evaluate
    from mage_core.stages.reproduce import prepare_workspace

    fresh = prepare_workspace(copy_project(tmp_path), "smoke")
    with pytest.raises(RuntimeError, match="not run yet: data@webshop, data@alfworld, sft@sokoban, train@kuhn_poker-mage, "
                                           "train@tic_tac_toe-gigpo"):
        evaluate(str(fresh))
    assert not (fresh / "artifacts").exists()


def _eval_size(workspace: Path) -> int | None:
    """Meta-episodes per pair of the recorded kuhn evaluation (from its trial table size)."""
    path = workspace / "artifacts" / "eval" / "kuhn_poker-mage" / "metrics.json"
    if not path.exists():
        return None
    metrics = json.loads(path.read_text())["metrics"]
    return int(metrics["eval/in_domain/aggressive/first/num_meta_episodes"])


def _locked(workspace: Path) -> dict:
    """dvc.lock's stages; {} while it is missing or being rewritten (DVC writes it in place)."""
    try:
        data = yaml.safe_load((workspace / "dvc.lock").read_text())
    except (FileNotFoundError, yaml.YAMLError):
        return {}
    return (data or {}).get("stages") or {}
