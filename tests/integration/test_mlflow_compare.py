"""Runs compare in one click in the MLflow UI: the real train and evaluate stages on a tiny
Kuhn config, into a real sqlite store (no mocks).

Two runs of different K (MAGE trained with K = 2, the ReAct baseline evaluated with K = 3)
must share the Table 1 keys, with the values of their metrics.json; every stage run is
named and tagged by stage, env, method and seed and carries system metrics; the trained
best/ is a registered model version with its lineage (the baseline registers nothing); the
saved view of the environment selects exactly the evaluate runs, grouped by method.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from mage_core.config import parse_config
from mage_core.stages.evaluate import evaluate
from mage_core.stages.train import train
from mage_core.tracking.mlflow_tracker import MlflowTracker
from mage_core.tracking.registry import DIGEST_TAG, folder_digest
from mage_core.tracking.views import VIEW_TAG_PREFIX, ensure_table1_views, read_envelope, read_state, view_id

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("mlflow_compare")]  # one store for all

EXPERIMENT = "compare"
PARAMS = {
    "env": {"name": "kuhn_poker"},
    "train": {"iterations": 2, "groups_per_iteration": 2, "eval_every": 2, "checkpoint_every": 2},
    # K = 2 for MAGE (evaluated with its own K); the ReAct baseline is evaluated over 3 attempts.
    "algorithm": {"group_size": 2, "episodes_per_meta_episode": 2},
    "evaluation": {"meta_episodes_per_opponent_seat": 2},
    "tournament": {"matches": []},
    "tracking": {"mlflow": True, "experiment": EXPERIMENT},
}
REACT = {**PARAMS, "algorithm": {"preset": "react"}}


@pytest.fixture(scope="session")  # not module: under xdist another module's tests may come in between
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Train MAGE, evaluate it; "train" (select) and evaluate the ReAct baseline: four stage runs."""
    from mlflow.tracking import MlflowClient

    tmp = tmp_path_factory.mktemp("compare")
    store = f"sqlite:///{tmp / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", store)
        patch.chdir(tmp)
        mage, react = parse_config(PARAMS), parse_config(REACT)
        train(mage, tmp / "train" / "mage", run_name="kuhn_poker-mage")
        evaluate(mage, tmp / "train" / "mage" / "best", tmp / "eval" / "mage", "in_domain", per_opponent_seat=2,
                 run_name="kuhn_poker-mage")
        train(react, tmp / "train" / "react", run_name="kuhn_poker-react")
        evaluate(react, tmp / "train" / "react" / "best", tmp / "eval" / "react", "in_domain", per_opponent_seat=2,
                 run_name="kuhn_poker-react")
    client = MlflowClient(store)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    by_name = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    return {"client": client, "store": store, "tmp": tmp, "experiment": experiment, "runs": by_name}


def test_every_stage_run_is_named_and_tagged_by_stage_env_method_and_seed(runs: dict[str, Any]) -> None:
    assert set(runs["runs"]) == {"train kuhn_poker mage seed0", "evaluate kuhn_poker mage seed0",
                                 "train kuhn_poker react seed0", "evaluate kuhn_poker react seed0"}
    for name, run in runs["runs"].items():
        stage, env, method, _ = name.split()
        assert {k: run.data.tags[k] for k in ("stage", "env", "method", "seed", "mage.run", "dvc.stage")} == {
            "stage": stage, "env": env, "method": method, "seed": "0", "mage.run": f"kuhn_poker-{method}",
            "dvc.stage": f"{stage}@kuhn_poker-{method}"}
        assert run.info.status == "FINISHED"


def test_table1_keys_are_shared_across_k_with_the_values_of_metrics_json(runs: dict[str, Any]) -> None:
    client = runs["client"]
    for method, k in (("mage", 2), ("react", 3)):
        run = runs["runs"][f"evaluate kuhn_poker {method} seed0"]
        saved = json.loads((runs["tmp"] / "eval" / method / "metrics.json").read_text())["metrics"]
        assert saved[f"eval/in_domain/all/chips_ep{k}"] is not None and f"eval/in_domain/all/chips_ep{k + 1}" not in saved
        source = "eval/in_domain/all/"
        expected = {"success_final": saved[f"{source}success_ep{k}"], "pass_at_k": saved[f"{source}pass_at_{k}"],
                    "chips_final": saved[f"{source}chips_ep{k}"], "chips_final_low": saved[f"{source}chips_ep{k}_low"],
                    "chips_exact_final": saved[f"{source}chips_exact_ep{k}"], "k": float(k)}
        logged = {key.removeprefix("table1/in_domain/"): value for key, value in run.data.metrics.items()
                  if key.startswith("table1/in_domain/")}
        assert {name: logged[name] for name in expected} == expected
        # The adaptation curve: one point per episode index, the step.
        history = client.get_metric_history(run.info.run_id, "adaptation/in_domain/chips")
        assert sorted((m.step, m.value) for m in history) == [(i, saved[f"{source}chips_ep{i}"]) for i in range(1, k + 1)]


def test_stage_runs_carry_system_metrics_and_leave_no_thread(runs: dict[str, Any]) -> None:
    for run in runs["runs"].values():
        metrics = run.data.metrics
        assert 0 < metrics["system/system_memory_usage_megabytes"] < 10**7
        assert 0 <= metrics["system/cpu_utilization_percentage"] <= 100
    assert not [t.name for t in threading.enumerate() if t.name == "SystemMetricsMonitor"]


def test_the_trained_best_policy_is_a_registered_version_with_its_lineage(runs: dict[str, Any]) -> None:
    client, tmp = runs["client"], runs["tmp"]
    trained = runs["runs"]["train kuhn_poker mage seed0"]
    versions = client.search_model_versions("name = 'mage-kuhn_poker-mage'")
    assert [str(v.version) for v in versions] == ["1"]
    version = versions[0]
    assert version.run_id == trained.info.run_id
    assert version.source == f"{trained.info.artifact_uri}/best"
    tags = version.tags
    for key in ("git.commit", "git.dirty", "mage.config_digest", "dvc.stage", "env", "method", "seed"):
        assert tags[key] == trained.data.tags[key], key
    assert tags["mage.config_digest"] == trained.data.params["config_digest"]
    summary = json.loads((tmp / "train" / "mage" / "summary.json").read_text())
    assert int(tags["mage.best_iteration"]) == summary["best_iteration"]
    # The registered files are best/'s, byte for byte (a copy: retraining cannot change them).
    best = tmp / "train" / "mage" / "best"
    stored = Path(version.source.removeprefix("file://"))
    assert tags[DIGEST_TAG] == folder_digest(best) == folder_digest(stored)
    assert stored != best and (stored / "config.json").is_file()
    assert trained.data.tags["mage.model_uri"] == "models:/mage-kuhn_poker-mage/1"
    # The evaluate run links the version it evaluated; the baseline registers nothing.
    evaluation = runs["runs"]["evaluate kuhn_poker mage seed0"]
    assert evaluation.data.tags["mage.model_uri"] == "models:/mage-kuhn_poker-mage/1"
    assert "#/models/mage-kuhn_poker-mage/versions/1" in evaluation.data.tags["mlflow.note.content"]
    assert client.search_model_versions("name = 'mage-kuhn_poker-react'") == []
    assert "mage.model_uri" not in runs["runs"]["evaluate kuhn_poker react seed0"].data.tags
    # Once DVC has recorded the stage, the flow adds its hashes to the version too.
    tracker = MlflowTracker.attach(runs["store"], trained.info.run_id)
    assert tracker.tag_model_versions({"dvc.out.artifacts/train/kuhn_poker-mage/best": "abc.dir"}) == [
        "mage-kuhn_poker-mage/1"]
    assert client.get_model_version("mage-kuhn_poker-mage", "1").tags[
        "dvc.out.artifacts/train/kuhn_poker-mage/best"] == "abc.dir"


def test_the_saved_view_selects_the_evaluate_runs_grouped_by_method(runs: dict[str, Any]) -> None:
    client, experiment = runs["client"], runs["experiment"]
    tags = client.get_experiment(experiment.experiment_id).tags
    envelope = read_envelope(tags[VIEW_TAG_PREFIX + view_id("kuhn_poker")])
    assert envelope["name"] == "Table 1: Kuhn Poker by method"
    state = read_state(envelope)
    assert state["groupBy"] == {"aggregateFunction": "average", "groupByKeys": [{"mode": "tag", "groupByData": "method"}]}
    selected = client.search_runs([experiment.experiment_id], state["searchFilter"])
    assert sorted(r.data.tags["method"] for r in selected) == ["mage", "react"]
    assert {r.data.tags["stage"] for r in selected} == {"evaluate"}
    # Every metric the view charts or shows is logged on every run it selects.
    charted = {c["metricKey"] for c in state["compareRunCharts"] if c["type"] == "BAR"}
    charted |= {k for c in state["compareRunCharts"] if c["type"] == "LINE" for k in c["selectedMetricKeys"]}
    columns = {c.removeprefix("metrics.`").removesuffix("`") for c in state["selectedColumns"]
               if c.startswith("metrics.")}
    assert len(charted) == 6 and len(columns) == 5
    for run in selected:
        assert charted | columns <= set(run.data.metrics), run.info.run_name
    every = read_state(read_envelope(tags[VIEW_TAG_PREFIX + view_id(None)]))
    assert [k["groupByData"] for k in every["groupBy"]["groupByKeys"]] == ["env", "method"]
    assert len(client.search_runs([experiment.experiment_id], every["searchFilter"])) == 2


def test_views_are_kept_current_but_a_view_changed_in_the_ui_is_left_alone(runs: dict[str, Any]) -> None:
    client, experiment_id = runs["client"], runs["experiment"].experiment_id
    key = VIEW_TAG_PREFIX + view_id("kuhn_poker")
    assert ensure_table1_views(client, experiment_id, ["kuhn_poker"], {"kuhn_poker": "Kuhn Poker"}) == []
    stored = read_envelope(client.get_experiment(experiment_id).tags[key])
    old = {**stored, "mage_view": 0, "state": json.dumps({"searchFilter": ""})}  # an older version's view
    client.set_experiment_tag(experiment_id, key, json.dumps(old))
    assert ensure_table1_views(client, experiment_id, ["kuhn_poker"], {"kuhn_poker": "Kuhn Poker"}) == [
        view_id("kuhn_poker")]
    rewritten = read_envelope(client.get_experiment(experiment_id).tags[key])
    assert rewritten["createdAt"] == stored["createdAt"] and read_state(rewritten) == read_state(stored)
    # "Overwrite view" in the UI writes the envelope without mage_view: that view is the person's.
    mine = {k: v for k, v in stored.items() if k != "mage_view"} | {"state": json.dumps({"searchFilter": "x"})}
    client.set_experiment_tag(experiment_id, key, json.dumps(mine))
    assert ensure_table1_views(client, experiment_id, ["kuhn_poker"]) == []
    assert json.loads(client.get_experiment(experiment_id).tags[key])["state"] == json.dumps({"searchFilter": "x"})
