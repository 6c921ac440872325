"""dvc.runs.yaml: each run's stages depend on its own task's data and on no other's."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

from mage_core.config import ConfigError, parse_config, warm_start_data
from mage_core.envs.registry import task
from mage_core.stages import code_deps, dvc_runs
from mage_core.stages.validate import run as validate

ROOT = Path(__file__).resolve().parents[2]


def _params() -> dict:
    """The project's params without its ablation grids: these tests set their own runs."""
    data = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    data["reproduce"]["ablations"] = []
    return data


def test_the_committed_file_is_the_one_params_yaml_gives() -> None:
    assert dvc_runs.stale(ROOT) is None, "run `mage validate --sync-dvc` and commit dvc.runs.yaml"


def test_dvc_reads_each_runs_own_task_data_and_no_other() -> None:
    """DVC's own view of the committed dvc.yaml: a run of a task with data files depends on
    that folder only; any other run on no data folder (the Kuhn runs read no ALFWorld data)."""
    from dvc.repo import Repo

    runs = _params()["reproduce"]["runs"]
    with Repo(str(ROOT)) as repo:
        deps = {stage.name: {str(d.def_path) for d in stage.deps} for stage in repo.index.stages}
    for name, spec in runs.items():
        env = spec["env"]
        own = {f"data/{env}"} if task(env).data is not None else set()
        for kind in ("train", "evaluate"):
            stage = f"{kind}@{name}"
            data = {path for path in deps[stage] if path.startswith("data/")}
            assert data == own, (stage, deps[stage])
            # the manifest of the code its command can load (stages/code_deps.py), never the whole package
            code = {path for path in deps[stage] if path.startswith(code_deps.MANIFEST_DIR)}
            assert code == {code_deps.manifest_path(kind, env)} and "mage_core" not in deps[stage], (stage, deps[stage])
    assert {"data/webshop", "data/alfworld"}.isdisjoint(deps["train@kuhn_poker-mage"])
    # the one stage that reads the whole package: it writes the manifests (and, from the recorded ablation
    # verdicts, records.txt: the md5 of the manifests they name)
    assert deps["code"] == {"mage_core", "reports/profiles"}
    assert code_deps.manifest_path("report", None) in deps["report"]
    assert "mage_core/stages/report.py" in code_deps.stage_files(ROOT, "report", None)
    assert "mage_core/stages/report.py" not in code_deps.stage_files(ROOT, "train", "kuhn_poker")


def test_the_manifests_are_md5sum_lines_of_each_closure(tmp_path: Path) -> None:
    """`mage code-deps`: one manifest per (kind, task), each file of the closure with its md5,
    exactly the files that `stage_files` names; a stale file in the folder is removed."""
    import hashlib
    import subprocess
    import sys

    (tmp_path / "old.md5").write_text("stale")
    done = subprocess.run([sys.executable, "-m", "mage_core", "code-deps", "--out", str(tmp_path), "--project", str(ROOT)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    written = {p.name for p in tmp_path.iterdir()}
    # ... and records.txt, the manifests the recorded ablation verdicts name (tests/unit/test_ablation_records.py)
    assert written == {code_deps.manifest_path(k, g).rpartition("/")[2] for k, g in code_deps.manifest_specs()} | {
        "records.txt"}
    assert {"train-kuhn_poker.md5", "data-webshop.md5", "report.md5"} <= written and "data-kuhn_poker.md5" not in written
    lines = (tmp_path / "train-minesweeper.md5").read_text().splitlines()
    paths = [line.split("  ", 1)[1] for line in lines]
    assert paths == code_deps.stage_files(ROOT, "train", "minesweeper")
    assert "mage_core/envs/minesweeper/board.py" in paths and "mage_core/stages/train.py" in paths
    for line in lines:
        digest, path = line.split("  ", 1)
        assert digest == hashlib.md5((ROOT / path).read_bytes()).hexdigest(), path
    bad = subprocess.run([sys.executable, "-m", "mage_core", "code-deps", "--out", str(tmp_path / "x"),
                          "--project", str(tmp_path)], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "holds no mage_core folder" in bad.stdout + bad.stderr
    assert not (tmp_path / "x").exists()


def test_a_runs_own_data_path_is_its_input() -> None:
    data = _params()
    data["warm_start"]["tasks"] = {}  # no warm start: init is the inputs again
    data["reproduce"]["runs"] = {
        "shop": {"env": "webshop", "method": "grpo", "set": {"env.webshop.data_path": "data/shop_small"}},
        "poker": {"env": "kuhn_poker", "method": "mage"},
    }
    assert dvc_runs.run_inputs(data) == {
        "shop": {"env": "webshop", "inputs": "data/shop_small", "init": "data/shop_small", "spec": "reproduce.runs.shop"},
        "poker": {"env": "kuhn_poker", "inputs": "mage_core/envs/kuhn_poker", "init": "mage_core/envs/kuhn_poker",
                  "spec": "reproduce.runs.poker"}}


def test_a_warm_started_task_gets_its_sft_stage_and_its_runs_depend_on_it() -> None:
    data = _params()
    data["warm_start"]["tasks"] = ["webshop"]
    data["reproduce"]["runs"] = {"shop": {"env": "webshop", "method": "react"},
                                 "poker": {"env": "kuhn_poker", "method": "mage"}}
    assert dvc_runs.warm_starts(data) == {"webshop": {"inputs": "data/webshop", "out": "artifacts/sft/webshop"}}
    runs = dvc_runs.run_inputs(data)
    assert runs["shop"]["init"] == "artifacts/sft/webshop" and runs["shop"]["inputs"] == "data/webshop"
    assert runs["poker"]["init"] == "mage_core/envs/kuhn_poker"  # no warm start: its inputs again


def test_a_warm_start_entry_sets_its_own_keys() -> None:
    data = _params()
    data["warm_start"]["tasks"] = {"webshop": {"env.webshop.data_path": "data/shop_small", "warm_start.epochs": 7}}
    data["reproduce"]["runs"] = {"shop": {"env": "webshop", "method": "react"}}
    # the sft stage reads the data folder its entry names, and its out stays the task's
    assert dvc_runs.warm_starts(data) == {"webshop": {"inputs": "data/shop_small", "out": "artifacts/sft/webshop"}}
    cfg = parse_config(warm_start_data(data, "webshop", "params.yaml"))
    assert cfg.env.name == "webshop" and cfg.warm_start.epochs == 7
    with pytest.raises(ConfigError, match=r"--task: 'sokoban' is not one of warm_start.tasks \(webshop\)"):
        warm_start_data(data, "sokoban", "params.yaml")
    data["warm_start"]["tasks"] = {"webshop": {"env.name": "sokoban"}}
    with pytest.raises(ConfigError, match="webshop: env.name is fixed by the task's entry itself"):
        parse_config(data)
    data["warm_start"]["tasks"] = {"webshop": {"warm_start.epoch": 7}}
    with pytest.raises(ConfigError) as err:
        dvc_runs.render(data)
    assert "as the warm start of webshop" in str(err.value) and "epoch" in str(err.value)


def test_a_bad_run_is_a_config_error_naming_it() -> None:
    data = _params()
    data["reproduce"]["runs"] = {"x": {"env": "webshop", "method": "grpo", "set": {"env.webshop.max_turns": -1}}}
    with pytest.raises(ConfigError) as err:
        dvc_runs.render(data)
    assert "as run x" in str(err.value) and "max_turns" in str(err.value)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in ("params.yaml", "dvc.yaml", "dvc.runs.yaml"):
        shutil.copy2(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "mage_core", tmp_path / "mage_core", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_validate_names_a_stale_file_then_rewrites_it(project: Path, capsys: pytest.CaptureFixture) -> None:
    data = _params()
    edited = copy.deepcopy(data)
    edited["reproduce"]["runs"] = {"kuhn_poker-mage": data["reproduce"]["runs"]["kuhn_poker-mage"]}
    (project / "params.yaml").write_text(yaml.safe_dump(edited, sort_keys=False), encoding="utf-8")
    before = (project / "dvc.runs.yaml").read_text()

    assert validate(str(project / "params.yaml")) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "dvc.runs.yaml: does not match reproduce.runs, warm_start.tasks and data" in out
    assert "mage validate --sync-dvc" in out
    assert (project / "dvc.runs.yaml").read_text() == before  # a check writes nothing

    assert validate(str(project / "params.yaml"), sync_dvc=True) == 0
    assert dvc_runs.stale(project) is None
    listed = yaml.safe_load((project / "dvc.runs.yaml").read_text())[dvc_runs.KEY]
    assert list(listed) == ["kuhn_poker-mage"]
    assert listed["kuhn_poker-mage"] == {"spec": "reproduce.runs.kuhn_poker-mage",
        "env": "kuhn_poker", "inputs": "mage_core/envs/kuhn_poker", "init": "mage_core/envs/kuhn_poker",
        "train_code": "artifacts/code/train-kuhn_poker.md5", "evaluate_code": "artifacts/code/evaluate-kuhn_poker.md5"}
    assert validate(str(project / "params.yaml")) == 0
    # an import added to the code changes the manifest the code stage writes, not this file
    train = project / "mage_core" / "stages" / "train.py"
    train.write_text(train.read_text() + "\n\ndef _later() -> None:\n    from mage_core.stages import report  # noqa\n")
    assert validate(str(project / "params.yaml")) == 0
    assert "mage_core/stages/report.py" in code_deps.stage_files(project, "train", "kuhn_poker")


def test_validate_of_a_params_file_outside_a_project_checks_no_stage_file(tmp_path: Path) -> None:
    shutil.copy2(ROOT / "params.yaml", tmp_path / "params.yaml")  # no dvc.yaml beside it
    assert validate(str(tmp_path / "params.yaml")) == 0
    assert not (tmp_path / "dvc.runs.yaml").exists()


def test_a_warm_start_no_run_starts_from_is_no_stage() -> None:
    data = _params()
    data["reproduce"]["runs"] = {"poker": {"env": "kuhn_poker", "method": "mage"}}
    assert "webshop" in data["warm_start"]["tasks"]  # listed, yet no run trains on webshop
    assert dvc_runs.warm_starts(data) == {}
    data["reproduce"]["runs"]["shop"] = {"env": "webshop", "method": "react"}
    assert list(dvc_runs.warm_starts(data)) == ["webshop"]
