"""`mage evaluate` end to end on the embedded tiny model: fixed suites, a valid
trial table, metrics that agree with the table, identical on every run."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mage_core.config import ConfigError, parse_config
from mage_core.evaluation.stats import MIN_RATIO_CEILING
from mage_core.stages.evaluate import evaluate
from mage_core.stages.train import build_policy

pytestmark = pytest.mark.integration

PARAMS = {"env": {"name": "kuhn_poker"}, "tournament": {"matches": []}}


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("train")
    build_policy(parse_config(PARAMS), out)  # the untrained embedded policy, saved to policy-init/
    return out / "policy-init"


def test_kuhn_suites_trials_and_metrics(policy: Path, tmp_path: Path) -> None:
    cfg = parse_config(PARAMS)
    metrics = evaluate(cfg, policy, tmp_path / "a", "all", per_opponent_seat=3)
    trials = pd.read_parquet(tmp_path / "a" / "trials.parquet")
    # in-domain: 3 archetypes x 2 seats; ood_cfr and ood_cfr_argmax: 1 opponent x 2 seats; 3 each, K = 3 hands
    assert trials.groupby("suite").size().to_dict() == {"in_domain": 6 * 3 * 3, "ood_cfr": 2 * 3 * 3,
                                                        "ood_cfr_argmax": 2 * 3 * 3}
    assert set(trials.loc[trials.suite == "ood_cfr_argmax", "opponent"]) == {"cfr_argmax"}
    # The metrics are the table's: chips of aggressive/first in hand 3.
    rows = trials[(trials.suite == "in_domain") & (trials.opponent == "aggressive") & (trials.seat == "first")]
    assert metrics["eval/in_domain/aggressive/first/chips_ep3"] == pytest.approx(rows[rows.episode == 3].score.mean())
    assert rows.reward.tolist() == pytest.approx((rows.score * 5).tolist())
    # Exploitation ratio = final-hand chips / exact best-response value (1/3 vs aggressive as P0).
    assert metrics["eval/in_domain/aggressive/first/best_response_value"] == pytest.approx(1 / 3)
    assert metrics["eval/in_domain/aggressive/first/exploitation_ratio"] == pytest.approx(
        rows[rows.episode == 3].score.mean() * 3)
    # The greedy policy's exact chips where the suite's opponents are deterministic (the
    # archetypes, CFR's argmax), none against the sampled CFR strategy; values are chips.
    assert {"eval/in_domain/all/chips_exact_ep3", "eval/ood_cfr_argmax/all/chips_exact_ep3"} <= set(metrics)
    assert not any(key.startswith("eval/ood_cfr/") and "_exact_" in key for key in metrics)
    assert all(-2 <= v <= 2 for key, v in metrics.items() if "chips_exact_ep" in key)
    low, mid, high = (metrics[f"eval/ood_cfr/all/pass_at_3{s}"] for s in ("_low", "", "_high"))
    assert low <= mid <= high
    saved = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert saved["metrics"] == metrics and saved["episodes_per_meta_episode"] == 3
    # Fixed suites: a second run writes the same table.
    evaluate(cfg, policy, tmp_path / "b", "all", per_opponent_seat=3)
    pd.testing.assert_frame_equal(trials, pd.read_parquet(tmp_path / "b" / "trials.parquet"))
    only = evaluate(cfg, policy, tmp_path / "c", "in_domain", per_opponent_seat=3)
    assert only == {k: v for k, v in metrics.items() if k.startswith("eval/in_domain/")}
    # The report set is named in the file, and it is not the training-time selection set.
    assert saved["report_set"] == {"seed": cfg.evaluation.seed, "meta_episodes_per_opponent_seat": 3}
    assert cfg.evaluation.selection_seed != cfg.evaluation.seed
    assert saved["protocol"] == {"restart": cfg.rollout.restart, "early_stop": False}
    # Sampled CFR is an equilibrium: the opponent-known ceiling of its suite is its residual
    # exploitability, seat-averaged (near 0); no ratio is written against it, nor against
    # CFR as first player (negative), nor as second player (issue 39): there the ceiling is the
    # game's value 1/18 plus ~1e-4, nothing an exploiter adds to what an equilibrium secures.
    cfr_known = metrics["eval/ood_cfr/all/ceiling_known"]
    assert 0 <= cfr_known < MIN_RATIO_CEILING
    assert cfr_known == pytest.approx((metrics["eval/ood_cfr/cfr/first/ceiling_known"]
                                       + metrics["eval/ood_cfr/cfr/second/ceiling_known"]) / 2)
    assert "eval/ood_cfr/all/exploitation_ratio" not in metrics
    assert "eval/ood_cfr/cfr/first/exploitation_ratio" not in metrics
    assert metrics["eval/ood_cfr/cfr/second/ceiling_known"] == pytest.approx(1 / 18, abs=1e-3)
    assert "eval/ood_cfr/cfr/second/exploitation_ratio" not in metrics
    # an exploitable opponent keeps its ratio in either seat (aggressive: best response 1/3 as
    # either player, docs/method.md section 11)
    assert metrics["eval/in_domain/aggressive/second/exploitation_ratio"] == pytest.approx(
        metrics["eval/in_domain/aggressive/second/chips_ep3"] / metrics["eval/in_domain/aggressive/second/ceiling_known"])
    assert metrics["eval/in_domain/all/exploitation_ratio"] == pytest.approx(
        metrics["eval/in_domain/all/chips_ep3"] / metrics["eval/in_domain/all/ceiling_known"])


def test_early_stop_evaluation_carries_ceilings_of_a_stopping_agent(policy: Path, tmp_path: Path) -> None:
    """Under early stop the final hand is the last hand played: the suite's ceilings are
    the stopping agent's (Bayes-optimal 7/6 for the paper population, K = 3, fresh
    deals: tests/unit/test_kuhn_analysis.py), best fixed and play-fixed-then-respond are
    not computed, and the per-opponent ceilings are a stopping agent's too."""
    cfg = parse_config({**PARAMS, "rollout": {"early_stop": True}})
    metrics = evaluate(cfg, policy, tmp_path / "a", "in_domain", per_opponent_seat=3)
    assert metrics["eval/in_domain/all/ceiling_adaptive"] == pytest.approx(7 / 6)
    assert not {"eval/in_domain/all/ceiling_best_fixed", "eval/in_domain/all/ceiling_passive"} & set(metrics)
    assert metrics["eval/in_domain/all/ceiling_known"] >= metrics["eval/in_domain/all/ceiling_adaptive"]
    # One hand's best response is still the opponent's property; the final hand's ceiling is above it.
    assert metrics["eval/in_domain/aggressive/first/best_response_value"] == pytest.approx(1 / 3)
    assert metrics["eval/in_domain/aggressive/first/ceiling_known"] > 1 / 3
    saved = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert saved["protocol"] == {"restart": "fresh", "early_stop": True}


def test_sokoban_ood_suites_change_the_number_of_boxes(policy: Path, tmp_path: Path) -> None:
    cfg = parse_config({**PARAMS, "env": {"name": "sokoban"}})
    evaluate(cfg, policy, tmp_path, "ood", per_opponent_seat=2)
    trials = pd.read_parquet(tmp_path / "trials.parquet")
    assert sorted(set(trials.suite)) == ["ood_one_box", "ood_three_boxes"]
    assert set(trials.opponent) == {"none"}


def test_an_ood_suite_with_more_mines_than_the_board_holds_is_one_line_before_any_work(
        policy: Path, tmp_path: Path, project_root: Path, mage_cmd: list[str]) -> None:
    """Issue 39: an OOD suite of 36 mines on a 6 x 6 board ended in a ValueError traceback."""
    import subprocess

    out = subprocess.run([*mage_cmd, "evaluate", "--params", str(project_root / "params.yaml"), "--policy",
                          str(policy), "--out", str(tmp_path / "out"), "--suites", "ood", "--per-pair", "1",
                          "--set", "env.name=minesweeper", "--set", "evaluation.ood.minesweeper.many.num_mines=36"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    assert "evaluation.ood.minesweeper.many.num_mines: at most 34 on a 6 x 6 board" in out.stderr
    assert "Traceback" not in out.stderr and list(tmp_path.iterdir()) == []


def test_a_missing_policy_is_a_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="holds no model"):
        evaluate(parse_config(PARAMS), tmp_path / "nowhere", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_corrupted_policy_stops_before_any_work_and_writes_nothing(policy: Path, tmp_path: Path) -> None:
    """Issue 25: a bit-flipped best/model.safetensors was evaluated (other chips, exit 0)."""
    import shutil

    from mage_core.policy.model import MANIFEST

    copy = tmp_path / "best"
    shutil.copytree(policy, copy)
    assert (copy / MANIFEST).is_file()
    data = bytearray((copy / "model.safetensors").read_bytes())
    data[-7] ^= 0x01
    (copy / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ConfigError) as raised:
        evaluate(parse_config(PARAMS), copy, tmp_path / "out")
    assert any("--policy:" in p and "model.safetensors changed since it was saved" in p for p in raised.value.problems)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("damage", ["manifest deleted", "a file added"])
def test_a_saved_policy_without_its_manifest_or_with_an_extra_file_is_one_line_before_any_work(
        policy: Path, tmp_path: Path, project_root: Path, mage_cmd: list[str], damage: str) -> None:
    """Issue 39: best/ with a bit flipped and its mage-policy.json deleted was evaluated (exit 0), and
    a file the manifest does not list was accepted."""
    import shutil
    import subprocess

    from mage_core.policy.model import MANIFEST

    copy = tmp_path / "best"
    shutil.copytree(policy, copy)
    data = bytearray((copy / "model.safetensors").read_bytes())
    data[-7] ^= 0x01
    if damage == "manifest deleted":
        (copy / "model.safetensors").write_bytes(bytes(data))
        (copy / MANIFEST).unlink()
        expected = f"--policy: {copy / MANIFEST} is missing, yet {copy / 'config.json'} says this project saved the"
    else:
        (copy / "model-00002.safetensors").write_bytes(bytes(data))
        expected = f"--policy: {copy / 'model-00002.safetensors'} was not saved with the policy ({MANIFEST} does not"
    out = subprocess.run([*mage_cmd, "evaluate", "--params", str(project_root / "params.yaml"), "--policy", str(copy),
                          "--out", str(tmp_path / "out"), "--set", "env.name=kuhn_poker", "--set",
                          "tracking.mlflow=false"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    (problem,) = [line for line in out.stderr.splitlines() if line.startswith("  - ")]
    assert problem.startswith(f"  - {expected}"), problem
    assert "Traceback" not in out.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("damage", ["truncated", "empty", "no weights"])
def test_a_damaged_policy_without_a_manifest_is_one_line_before_any_work(policy: Path, tmp_path: Path,
                                                                         damage: str) -> None:
    """Issue 25: a downloaded model folder (no mage-policy.json to check it against) that is truncated,
    empty or missing its weights used to end in a traceback."""
    import shutil

    from mage_core.policy.model import MANIFEST, SAVED_KEY

    copy = tmp_path / "downloaded"
    shutil.copytree(policy, copy)
    (copy / MANIFEST).unlink()
    config = json.loads((copy / "config.json").read_text())
    del config[SAVED_KEY]  # a downloaded model: nothing says this project saved it
    (copy / "config.json").write_text(json.dumps(config))
    weights = copy / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif damage == "empty":
        weights.write_bytes(b"")
    else:
        weights.unlink()
    with pytest.raises(ConfigError) as raised:
        evaluate(parse_config(PARAMS), copy, tmp_path / "out")
    (problem,) = raised.value.problems
    expected = "holds no weights" if damage == "no weights" else "cannot load the model in"
    assert problem.startswith("--policy: ") and expected in problem and str(copy) in problem and "\n" not in problem
    assert not (tmp_path / "out").exists()


def test_exploration_suite_has_its_exact_ceilings_and_opening_bets(policy: Path, tmp_path: Path) -> None:
    """Preset ``probe``: the agent first to act against the tight caller or the calling
    station (tests/unit/test_kuhn_analysis.py derives 1/6 and 1/3 by hand)."""
    cfg = parse_config({**PARAMS, "population": {"kuhn_poker": "probe"}})
    metrics = evaluate(cfg, policy, tmp_path / "t1", "in_domain", per_opponent_seat=2)
    p = "eval/in_domain/all/"
    assert [metrics[p + f"ceiling_{name}"] for name in ("best_fixed", "passive", "adaptive", "known")] == [
        1 / 6, 7 / 27, 17 / 54, 1 / 3]
    assert set(pd.read_parquet(tmp_path / "t1" / "trials.parquet").seat) == {"first"}
    sampled = [metrics[p + f"opening_bet_{card}_ep1"] for card in "JQK"]
    assert all(0 < q < 1 for q in sampled), sampled  # temperature 1: the policy's probabilities
    greedy_cfg = parse_config({**PARAMS, "population": {"kuhn_poker": "probe"}, "evaluation": {"temperature": 0}})
    greedy = evaluate(greedy_cfg, policy, tmp_path / "t0", "in_domain", per_opponent_seat=2)
    # Temperature 0 bets exactly where betting is the more likely move.
    assert [greedy[p + f"opening_bet_{card}_ep1"] for card in "JQK"] == [float(q > 0.5) for q in sampled]
    # The paper population: opening bets where the agent is first (half of its pairs).
    paper = evaluate(cfg.model_copy(update={"population": parse_config(PARAMS).population}), policy,
                     tmp_path / "paper", "in_domain", per_opponent_seat=1)
    assert {f"opening_bet_{card}_ep1" for card in "JQK"} <= {key.split("/")[-1] for key in paper}


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_an_unwritable_out_stops_before_any_work(policy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 25: `evaluate` found it could not write --out only after the whole evaluation.
    (Root ignores permissions: a parent that is a file stands in for a read-only one.)"""
    import os

    import yaml

    from mage_core.cli import main
    from mage_core.trainers.meta_rl import MetaRLTrainer

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("the evaluation ran before --out was checked")

    monkeypatch.setattr(MetaRLTrainer, "run_suite", no_work)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = blocker / "eval"
    with pytest.raises(ConfigError) as raised:
        evaluate(parse_config(PARAMS), policy, out, "in_domain", per_opponent_seat=1)
    assert raised.value.problems == [raised.value.problems[0]]
    assert raised.value.problems[0].startswith(f"--out: {out}: cannot write there (")
    assert "choose another --out or fix its permissions" in raised.value.problems[0]
    # The CLI: the error's one line, exit 2, nothing written.
    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump(PARAMS))
    capsys.readouterr()
    assert main(["evaluate", "--params", str(params), "--policy", str(policy), "--out", str(out),
                 "--suites", "in_domain", "--per-pair", "1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--out:" in err and "cannot write there" in err
    assert blocker.read_text() == "not a folder" and sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "p.yaml"]
    if os.geteuid() != 0:  # a read-only parent, where permissions hold
        (tmp_path / "ro").mkdir(mode=0o500)
        with pytest.raises(ConfigError, match="cannot write there .Permission denied"):
            evaluate(parse_config(PARAMS), policy, tmp_path / "ro" / "eval", "in_domain", per_opponent_seat=1)
        assert not any((tmp_path / "ro").iterdir())
        (tmp_path / "ro").chmod(0o700)
    # --out a file, or a folder holding files evaluate does not write (it replaces the folder whole).
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        evaluate(parse_config(PARAMS), policy, blocker, "in_domain", per_opponent_seat=1)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"holds files `mage evaluate` does not write \(notes.txt\)"):
        evaluate(parse_config(PARAMS), policy, tmp_path / "other", "in_domain", per_opponent_seat=1)
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


def test_a_full_disk_during_mage_evaluate_names_the_command_to_rerun(policy: Path, tmp_path: Path,
                                                                     project_root: Path, mage_cmd: list[str]) -> None:
    """Issue 39: a full disk during `mage evaluate` (here `ulimit -f`: every file over 4 kB fails, as on
    a full disk) advised `mage train --resume auto`. One line names the command that stopped and how
    to rerun it; the previous outputs are kept (a rerun that has room replaces them whole: the test
    below)."""
    import resource
    import subprocess

    out = tmp_path / "eval"
    evaluate(parse_config(PARAMS), policy, out, "in_domain", per_opponent_seat=1)
    before = _snapshot(out)
    cmd = [*mage_cmd, "evaluate", "--params", str(project_root / "params.yaml"), "--policy", str(policy), "--out",
           str(out), "--suites", "in_domain", "--per-pair", "2", "--set", "env.name=kuhn_poker", "--set",
           "tracking.mlflow=false"]

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    full = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, preexec_fn=small_files, timeout=300)
    assert full.returncode == 1, full.stderr[-2000:]
    assert "Traceback" not in full.stderr
    line = [x for x in full.stderr.splitlines() if x.strip()][-1]
    assert line.startswith("file size limit reached: ") and "`mage evaluate` stopped" in line, line
    assert line.endswith("the previous outputs are kept; free space (or fix the folder) and rerun the same "
                         "`mage evaluate` command"), line
    assert "mage train" not in line and "--resume" not in line
    # nothing new beside the outputs but the --out lock file (free again: the kernel dropped the lock)
    assert _snapshot(out) == before and sorted(p.name for p in tmp_path.iterdir()) == [".eval.mage.lock", "eval"]


def test_disk_full_midway_leaves_the_previous_outputs_whole(policy: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25: disk full while `evaluate` rewrote a folder left a new trials.parquet beside
    the old metrics.json. The outputs are built next to --out and swapped in whole."""
    import errno

    from mage_core.stages import evaluate as stage

    out = tmp_path / "eval"
    evaluate(parse_config(PARAMS), policy, out, "in_domain", per_opponent_seat=1)
    before = _snapshot(out)
    assert sorted(before) == ["metrics.json", "transcripts.txt", "trials.parquet"]

    def disk_full(path: Path, data: object) -> Path:  # metrics.json: after trials.parquet was written
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(stage, "write_json_atomic", disk_full)
    with pytest.raises(OSError, match="No space left on device"):
        evaluate(parse_config(PARAMS), policy, out, "in_domain", per_opponent_seat=2)
    assert _snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["eval"]  # no staging folder left
    # A failed swap puts the old folder back.
    monkeypatch.undo()
    import os

    real_replace = os.replace

    def replace(src: str | Path, dst: str | Path) -> None:
        if Path(dst) == out and Path(src).name.startswith(".eval.tmp-"):  # the new folder's swap, not the restore
            raise OSError(errno.EIO, "Input/output error", str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="Input/output error"):
        evaluate(parse_config(PARAMS), policy, out, "in_domain", per_opponent_seat=2)
    assert _snapshot(out) == before and [p.name for p in tmp_path.iterdir()] == ["eval"]
    monkeypatch.undo()
    # A complete run replaces the whole set.
    evaluate(parse_config(PARAMS), policy, out, "in_domain", per_opponent_seat=2)
    after = _snapshot(out)
    assert sorted(after) == sorted(before) and after["trials.parquet"] != before["trials.parquet"]
    assert json.loads(after["metrics.json"])["report_set"]["meta_episodes_per_opponent_seat"] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["eval"]
