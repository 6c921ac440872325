"""Aggregation of evaluation and training outputs, on tiny hand-made files:
every table cell is exactly the number written in metrics.json."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mage_core.evaluation.aggregate import (
    ablation_table,
    fmt_interval,
    flat_metrics,
    markdown_table,
    per_opponent,
    table1,
)
from mage_core.evaluation.run_tables import load_runs
from mage_core.evaluation.trials import TRIAL_COLUMNS

pytestmark = pytest.mark.unit


def bounded(key: str, value: float, low: float, high: float) -> dict[str, float]:
    return {key: value, f"{key}_low": low, f"{key}_high": high}


def kuhn_metrics() -> dict[str, float]:
    out: dict[str, float] = {}
    for k, chips in ((1, -0.05), (2, 0.10), (3, 0.20)):
        out |= bounded(f"eval/in_domain/all/chips_ep{k}", chips, chips - 0.1, chips + 0.1)
        out |= bounded(f"eval/in_domain/all/success_ep{k}", 0.4 + k / 10, 0.3 + k / 10, 0.5 + k / 10)
        out |= bounded(f"eval/in_domain/all/draw_ep{k}", 0.0, 0.0, 0.1)
        out |= bounded(f"eval/in_domain/all/pass_at_{k}", 0.5 + k / 10, 0.4 + k / 10, 0.6 + k / 10)
        out |= bounded(f"eval/in_domain/aggressive/first/chips_ep{k}", 0.25, 0.2, 0.3)
        out |= bounded(f"eval/in_domain/aggressive/first/success_ep{k}", 0.5, 0.4, 0.6)
        out |= bounded(f"eval/in_domain/aggressive/first/pass_at_{k}", 0.5, 0.4, 0.6)
        out |= bounded(f"eval/ood_cfr/all/chips_ep{k}", -0.1, -0.2, 0.0)
    out |= {"eval/in_domain/all/num_meta_episodes": 20.0, "eval/in_domain/aggressive/first/num_meta_episodes": 4.0,
            "eval/in_domain/aggressive/first/best_response_value": 1 / 3,
            "eval/in_domain/aggressive/first/ceiling_known": 1 / 3,
            "eval/in_domain/aggressive/first/exploitation_ratio": 0.75, "eval/in_domain/all/invalid_rate": 0.0}
    return out


def ttt_metrics(k_max: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in range(1, k_max + 1):
        out |= bounded(f"eval/in_domain/all/success_ep{k}", 0.6, 0.5, 0.7)
        out |= bounded(f"eval/in_domain/all/pass_at_{k}", 0.8, 0.7, 0.9)
        out |= bounded(f"eval/in_domain/all/reward_ep{k}", 0.3, 0.1, 0.5)
    return out


def write_eval(root: Path, run: str, game: str, metrics: dict[str, float], k: int = 3,
               early_stop: bool = False) -> Path:
    folder = root / run
    folder.mkdir(parents=True)
    data = {"game": game, "episodes_per_meta_episode": k, "policy": f"/p/{run}", "metrics": metrics,
            "protocol": {"restart": "fresh", "early_stop": early_stop}}
    (folder / "metrics.json").write_text(json.dumps(data))
    row = {"suite": None, "opponent": "x", "seat": "first", "meta_episode": 0, "task_seed": 0, "episode": 1,
           "reward": 0.0, "score": 0.0, "success": False, "draw": False, "invalid": 0, "turns": 1, "tokens": 1}
    suites = sorted({key.split("/")[1] for key in metrics})
    pd.DataFrame([{**row, "suite": s} for s in suites], columns=list(TRIAL_COLUMNS)).to_parquet(
        folder / "trials.parquet")
    return folder


def write_train(root: Path, run: str, records: list[dict[str, Any]], population: str = "paper",
                select_on: str = "sampled") -> Path:
    folder = root / run
    folder.mkdir(parents=True)
    params = {"params": {"population.kuhn_poker": population, "rollout.restart": "fresh"}}
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [params, *records]))
    (folder / "summary.json").write_text(json.dumps(
        {"method": "mage", "game": "kuhn_poker", "iterations": 2, "minutes": 1.5, "headline": 0.2,
         "best_score": 0.21, "best_iteration": 2, "final_eval": {}, "config_digest": "x",
         "selection_set": {"seed": 7, "select_on": select_on, "meta_episodes_per_opponent_seat": 10}}))
    return folder


RUNS = {"kuhn-mage": ("kuhn_poker", "mage"), "ttt-gigpo": ("tic_tac_toe", "gigpo")}
RECORDS = [
    {"step": 1, "train/rollout/all/chips_ep1": 0.5, "train/rollout/all/chips_ep3": 0.1, "train/ppo/entropy": 0.6},
    {"step": 2, "train/rollout/all/chips_ep3": 0.15, "train/ppo/entropy": None},
    {"step": 2, "eval/all/chips_ep1": 0.0, "eval/all/chips_ep3": 0.18},  # same iteration, merged
    {"step": 2, "final/eval/all/chips_ep3": 9.0},  # the post-training evaluation: summary.json's, not a curve point
]


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    write_eval(tmp_path / "eval", "kuhn-mage", "kuhn_poker", kuhn_metrics())
    write_eval(tmp_path / "eval", "ttt-gigpo", "tic_tac_toe", ttt_metrics(3))
    write_train(tmp_path / "train", "kuhn-mage", RECORDS)
    return tmp_path / "eval", tmp_path / "train"


def test_episode_rows_hold_the_metrics_json_numbers(roots: tuple[Path, Path]) -> None:
    tables = load_runs(*roots, RUNS)
    e = tables.episodes
    row = e[(e.run == "kuhn-mage") & (e.suite == "in_domain") & (e.group == "all") & (e.episode == 3)].iloc[0]
    assert (row.score, row.score_low, row.score_high) == (0.20, 0.20 - 0.1, 0.20 + 0.1)
    assert (row.success, row.pass_at, row.unit, row.num_meta_episodes) == (0.4 + 3 / 10, 0.5 + 3 / 10, "chips", 20)
    pair = e[(e.group == "aggressive/first") & (e.episode == 2)].iloc[0]
    assert (pair.opponent, pair.seat, pair.exploitation_ratio) == ("aggressive", "first", 0.75)
    assert pair.best_response_value == pytest.approx(1 / 3)
    # 3 suites x groups x episodes: in_domain all + pair, ood_cfr all (Kuhn); in_domain all (TTT)
    assert len(e) == 3 * 4
    assert set(e[e.run == "ttt-gigpo"].unit) == {"reward"}


def test_training_curves_merge_an_iterations_records(roots: tuple[Path, Path]) -> None:
    curves = load_runs(*roots, RUNS).curves
    assert curves.step.tolist() == [1, 2]  # the training-less run has no curve
    assert curves.train_headline.tolist() == [0.1, 0.15]  # the LAST episode's chips, not hand 1's
    assert math.isnan(curves.eval_headline[0]) and curves.eval_headline[1] == 0.18
    assert curves.entropy[0] == 0.6 and math.isnan(curves.entropy[1])  # null in the log


def test_single_episode_training_reads_episode_one(tmp_path: Path) -> None:
    write_eval(tmp_path / "eval", "r", "kuhn_poker", kuhn_metrics())
    write_train(tmp_path / "train", "r", [{"step": 1, "train/rollout/all/chips_ep1": -0.3}])
    curves = load_runs(tmp_path / "eval", tmp_path / "train", {"r": ("kuhn_poker", "grpo")}).curves
    assert curves.train_headline.tolist() == [-0.3]


def test_overview_has_training_summary_and_settings(roots: tuple[Path, Path]) -> None:
    overview = load_runs(*roots, RUNS).overview.set_index("run")
    assert overview.loc["kuhn-mage", ["population", "restart", "early_stop", "iterations", "best_score",
                                      "select_on"]].tolist() == ["paper", "fresh", False, 2, 0.21, "sampled"]
    assert pd.isna(overview.loc["ttt-gigpo", "iterations"])
    assert load_runs(roots[0], None, RUNS).curves.empty


def test_table1_cells_read_metrics_json_and_mark_missing(roots: tuple[Path, Path]) -> None:
    numbers, md = table1(load_runs(*roots, RUNS).episodes)
    assert numbers.loc["mage", "kuhn_poker/chips"] == 0.20
    assert numbers.loc["mage", "kuhn_poker/success_high"] == 0.5 + 3 / 10
    assert math.isnan(numbers.loc["gigpo", "kuhn_poker/chips"])
    lines = md.splitlines()
    assert lines[0] == ("| method | Kuhn Poker chips, final hand | Kuhn Poker success, final episode "
                        "| Kuhn Poker Pass@3 | Tic-Tac-Toe success, final episode | Tic-Tac-Toe Pass@3 |")
    assert lines[2] == "| mage | +0.200 [+0.100, +0.300] | 0.700 [0.600, 0.800] | 0.800 [0.700, 0.900] | — | — |"
    assert lines[3] == "| gigpo | — | — | — | 0.600 [0.500, 0.700] | 0.800 [0.700, 0.900] |"


def test_table1_has_the_exact_greedy_column_when_an_evaluation_computed_it(tmp_path: Path) -> None:
    exact = {f"eval/in_domain/all/chips_exact_ep{k}": v for k, v in ((1, 0.125), (2, 0.175), (3, 0.2162))}
    write_eval(tmp_path, "with", "kuhn_poker", kuhn_metrics() | exact)
    write_eval(tmp_path, "without", "kuhn_poker", kuhn_metrics())
    tables = load_runs(tmp_path, None, {"with": ("kuhn_poker", "mage"), "without": ("kuhn_poker", "grpo")})
    numbers, md = table1(tables.episodes)
    assert numbers.loc["mage", "kuhn_poker/chips_exact"] == 0.2162
    assert math.isnan(numbers.loc["grpo", "kuhn_poker/chips_exact"])
    lines = md.splitlines()
    assert lines[0].startswith("| method | Kuhn Poker chips, final hand | Kuhn Poker greedy policy's exact chips, "
                               "final hand | Kuhn Poker success")
    assert lines[2].startswith("| mage | +0.200 [+0.100, +0.300] | +0.216 | 0.700")
    assert lines[3].startswith("| grpo | +0.200 [+0.100, +0.300] | — | 0.700")
    assert flat_metrics(tables)["report/kuhn_poker/mage/in_domain_chips_exact_ep3"] == 0.2162
    assert "report/kuhn_poker/grpo/in_domain_chips_exact_ep3" not in flat_metrics(tables)
    rows = per_opponent(tables.episodes)
    assert rows[(rows.run == "with") & (rows.group == "all") & (rows.suite == "in_domain")].iloc[0][
        "score_exact_ep2"] == 0.175


def test_table1_marks_the_cells_that_are_a_runs_selection_score(tmp_path: Path) -> None:
    exact = {f"eval/in_domain/all/chips_exact_ep{k}": v for k, v in ((1, 0.125), (2, 0.175), (3, 0.2162))}
    write_eval(tmp_path / "eval", "picked", "kuhn_poker", kuhn_metrics() | exact)
    write_eval(tmp_path / "eval", "sampled", "kuhn_poker", kuhn_metrics() | exact)
    write_train(tmp_path / "train", "picked", RECORDS, select_on="exact_greedy")
    write_train(tmp_path / "train", "sampled", RECORDS, select_on="sampled")
    tables = load_runs(tmp_path / "eval", tmp_path / "train",
                       {"picked": ("kuhn_poker", "mage"), "sampled": ("kuhn_poker", "lamer")})
    select_on = dict(zip(tables.overview.run, tables.overview.select_on))
    assert select_on == {"picked": "exact_greedy", "sampled": "sampled"}
    numbers, md = table1(tables.episodes, select_on=select_on)
    lines = md.splitlines()
    # Only the exact cell of the run that selected on it carries the mark; its sampled cells do not.
    assert lines[2].startswith("| mage | +0.200 [+0.100, +0.300] | +0.216 ‡ | 0.700")
    assert lines[3].startswith("| lamer | +0.200 [+0.100, +0.300] | +0.216 | 0.700")
    assert numbers["kuhn_poker/selected_on"].tolist() == ["chips_exact", ""]
    assert "‡" not in table1(tables.episodes)[1]  # nothing known about selection: nothing marked


def test_a_malformed_protocol_is_named(tmp_path: Path) -> None:
    folder = write_eval(tmp_path, "r", "kuhn_poker", kuhn_metrics())
    data = json.loads((folder / "metrics.json").read_text())
    data["protocol"] = {"restart": "fresh", "early_stop": "yes"}
    (folder / "metrics.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="'protocol' must hold restart .same/fresh. and early_stop"):
        load_runs(tmp_path, None, {"r": ("kuhn_poker", "mage")})


def test_table1_headers_say_k_when_methods_differ(tmp_path: Path) -> None:
    write_eval(tmp_path, "a", "tic_tac_toe", ttt_metrics(3))
    write_eval(tmp_path, "b", "tic_tac_toe", ttt_metrics(2), k=2)
    _, md = table1(load_runs(tmp_path, None, {"a": ("tic_tac_toe", "mage"), "b": ("tic_tac_toe", "lamer")}).episodes)
    assert "Tic-Tac-Toe Pass@K" in md.splitlines()[0]


def test_two_runs_in_one_cell_is_an_error(tmp_path: Path) -> None:
    write_eval(tmp_path, "s1", "tic_tac_toe", ttt_metrics(3))
    write_eval(tmp_path, "s2", "tic_tac_toe", ttt_metrics(3))
    tables = load_runs(tmp_path, None, {"s1": ("tic_tac_toe", "mage"), "s2": ("tic_tac_toe", "mage")})
    with pytest.raises(ValueError, match="tic_tac_toe/mage: s1, s2"):
        table1(tables.episodes)
    with pytest.raises(ValueError, match="more than one run"):
        flat_metrics(tables)


def test_per_opponent_puts_the_population_first(roots: tuple[Path, Path]) -> None:
    frame = per_opponent(load_runs(*roots, RUNS).episodes)
    kuhn = frame[frame.run == "kuhn-mage"]
    assert list(zip(kuhn.suite, kuhn.group)) == [("in_domain", "all"), ("in_domain", "aggressive/first"),
                                                 ("ood_cfr", "all")]
    assert kuhn.iloc[1][["score_ep3", "success_ep3", "pass_at_3", "ceiling_known", "exploitation_ratio"]].tolist() == [
        0.25, 0.5, 0.5, pytest.approx(1 / 3), 0.75]
    # Read as written: the population row has no ratio because metrics.json has none (none recomputed here).
    assert math.isnan(kuhn.iloc[0]["exploitation_ratio"]) and math.isnan(kuhn.iloc[2]["exploitation_ratio"])
    assert kuhn.iloc[0]["draw_ep2"] == 0.0 and math.isnan(kuhn.iloc[1]["draw_ep2"])  # not written for the pair
    assert frame.run.tolist()[-1] == "ttt-gigpo"


def test_flat_metrics_keys_and_values(roots: tuple[Path, Path]) -> None:
    metrics = flat_metrics(load_runs(*roots, RUNS))
    assert metrics["report/kuhn_poker/mage/in_domain_chips_ep3"] == 0.20
    assert metrics["report/kuhn_poker/mage/in_domain_pass_at_3_low"] == 0.4 + 3 / 10
    assert metrics["report/kuhn_poker/mage/ood_cfr_chips_ep3"] == -0.1
    assert metrics["report/tic_tac_toe/gigpo/in_domain_reward_ep3"] == 0.3
    assert metrics["report/kuhn_poker/mage/train_best_score"] == 0.21
    assert "report/kuhn_poker/mage/ood_cfr_success_ep3" not in metrics  # never written, never invented
    assert not any(k.startswith("report/tic_tac_toe/gigpo/train_") for k in metrics)


def test_formatting_helpers() -> None:
    assert fmt_interval(0.5, 0.25, 0.75) == "0.500 [0.250, 0.750]"
    assert fmt_interval(math.nan, 0.0, 1.0) == "—"
    assert fmt_interval(0.1, math.nan, math.nan, signed=True) == "+0.100"
    assert markdown_table(["a", "b"], [["x|y", "1"]]) == "| a | b |\n|---|---|\n| x\\|y | 1 |\n"


def corrupt_json(folder: Path) -> None:
    (folder / "metrics.json").write_text("{not json")


def drop_key(folder: Path) -> None:
    data = json.loads((folder / "metrics.json").read_text())
    del data["metrics"]
    (folder / "metrics.json").write_text(json.dumps(data))


def wrong_columns(folder: Path) -> None:
    pd.DataFrame({"suite": ["in_domain"]}).to_parquet(folder / "trials.parquet")


def other_suites(folder: Path) -> None:
    frame = pd.read_parquet(folder / "trials.parquet")
    frame.loc[:, "suite"] = "ood_cfr"
    frame.to_parquet(folder / "trials.parquet")


@pytest.mark.parametrize(("damage", "file", "message"), [
    (lambda f: (f / "metrics.json").unlink(), "metrics.json", "file missing"),
    (corrupt_json, "metrics.json", "not valid JSON"),
    (drop_key, "metrics.json", "malformed, missing key"),
    (lambda f: (f / "trials.parquet").unlink(), "trials.parquet", "file missing"),
    (lambda f: (f / "trials.parquet").write_bytes(b"PAR1 garbage"), "trials.parquet", "not a readable parquet"),
    (wrong_columns, "trials.parquet", "columns"),
    (other_suites, "trials.parquet", "suites"),
])
def test_a_bad_evaluation_file_is_named(tmp_path: Path, damage: Any, file: str, message: str) -> None:
    folder = write_eval(tmp_path, "r", "tic_tac_toe", ttt_metrics(3))
    damage(folder)
    with pytest.raises(ValueError, match=re.escape(f"{folder / file}: {message}")):
        load_runs(tmp_path, None, {"r": ("tic_tac_toe", "mage")})


def test_an_evaluation_of_another_game_is_refused(tmp_path: Path) -> None:
    write_eval(tmp_path, "r", "tic_tac_toe", ttt_metrics(3))
    with pytest.raises(ValueError, match="evaluates 'tic_tac_toe' but the run is listed under env 'kuhn_poker'"):
        load_runs(tmp_path, None, {"r": ("kuhn_poker", "mage")})


def test_a_bad_training_file_is_named(tmp_path: Path) -> None:
    write_eval(tmp_path / "eval", "r", "kuhn_poker", kuhn_metrics())
    train = write_train(tmp_path / "train", "r", RECORDS)
    runs = {"r": ("kuhn_poker", "mage")}
    with (train / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 3, "train/rollout/all/chi\n')  # a line cut by a crash
    with pytest.raises(ValueError, match=re.escape(f"{train / 'metrics.jsonl'}: line 6 is not valid JSON")):
        load_runs(tmp_path / "eval", tmp_path / "train", runs)
    (train / "metrics.jsonl").write_text('{"params": {}}\n')
    (train / "summary.json").unlink()
    with pytest.raises(ValueError, match=re.escape(f"{train / 'summary.json'}: file missing")):
        load_runs(tmp_path / "eval", tmp_path / "train", runs)


def test_ablation_table_reads_first_and_final_episode_per_point(roots: tuple[Path, Path]) -> None:
    tables = load_runs(*roots, RUNS)
    numbers, markdown = ablation_table(tables.episodes, {"kuhn-mage": {"lr": 0.001}, "ttt-gigpo": {"lr": 0.01}})
    kuhn = numbers.set_index("point").loc["kuhn-mage"]
    # Kuhn is read in chips: episode 1 is -0.05, episode 3 (K) is 0.20 (kuhn_metrics above).
    assert (kuhn.headline, kuhn.k) == ("chips", 3)
    assert (kuhn["first"], kuhn.first_low, kuhn.first_high) == pytest.approx((-0.05, -0.15, 0.05))
    assert (kuhn.final, kuhn.final_low, kuhn.final_high) == pytest.approx((0.20, 0.10, 0.30))
    assert (kuhn.success, kuhn.pass_at) == pytest.approx((0.7, 0.8))
    ttt = numbers.set_index("point").loc["ttt-gigpo"]
    assert (ttt.headline, ttt["first"], ttt.final) == ("success", pytest.approx(0.6), pytest.approx(0.6))
    lines = markdown.splitlines()
    assert lines[0] == ("| point | lr | env | method | measure | first episode | final episode | success, final "
                        "| Pass@K |")
    assert lines[2] == ("| kuhn-mage | 0.001 | Kuhn Poker | mage | chips | -0.050 [-0.150, +0.050] | "
                        "+0.200 [+0.100, +0.300] | 0.700 [0.600, 0.800] | 0.800 [0.700, 0.900] |")


def test_ablation_table_names_a_point_without_an_in_domain_evaluation(roots: tuple[Path, Path]) -> None:
    tables = load_runs(*roots, RUNS)
    with pytest.raises(ValueError, match="point nowhere: no in_domain population rows"):
        ablation_table(tables.episodes, {"kuhn-mage": {}, "nowhere": {}})


def test_the_later_attempt_verdict_follows_hand_written_intervals(tmp_path: Path) -> None:
    # The report's "Does a later attempt do better than the first?" verdicts on figures written
    # by hand (issue 40: the integration test derived them with the code's own rule): an
    # interval above 0 is "yes", below 0 "no", across 0 "not shown", whatever the mean.
    from mage_core.stages.report import gain_markdown

    gains = {"ttt-up": (0.2, 0.1, 0.3), "ttt-down": (-0.3, -0.4, -0.2), "ttt-across": (0.05, -0.1, 0.2)}
    for run, (gain, low, high) in gains.items():
        write_eval(tmp_path, run, "tic_tac_toe", ttt_metrics(3) | bounded("eval/in_domain/all/success_gain", gain, low, high))
    tables = load_runs(tmp_path, None, {run: ("tic_tac_toe", run.split("-")[1]) for run in gains})
    lines = gain_markdown(tables.episodes).splitlines()
    assert "| Tic-Tac-Toe | up | 0.600 | 0.600 | +0.200 [+0.100, +0.300] | yes | — |" in lines
    assert "| Tic-Tac-Toe | down | 0.600 | 0.600 | -0.300 [-0.400, -0.200] | no | — |" in lines
    assert "| Tic-Tac-Toe | across | 0.600 | 0.600 | +0.050 [-0.100, +0.200] | not shown | — |" in lines
