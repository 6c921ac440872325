"""Planning a sweep: grids from params.yaml and the command line, point names,
every point's params, and every problem reported before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from mage_core.config import ConfigError, load_config, parse_config
from mage_core.config.grids import point_names
from mage_core.stages.sweep import local_concurrency, parse_vary, plan

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "params.yaml"


def test_parse_vary_reads_yaml_lists_and_names_bad_items() -> None:
    assert parse_vary(["train.learning_rate=[0.001, 0.0003]", "algorithm.preset=[mage]"]) == {
        "train.learning_rate": [0.001, 0.0003], "algorithm.preset": ["mage"]}
    with pytest.raises(ConfigError) as caught:
        parse_vary(["train.learning_rate=0.001", "=[1]", "a..b=[1]", "x=[1", "k=[1]", "k=[2]"])
    problems = caught.value.problems
    assert len(problems) == 5
    assert problems[0].startswith("--vary 'train.learning_rate=0.001': expected KEY=[v1, v2]")
    assert problems[-1] == "--vary 'k=[2]': k is varied twice"


def test_point_names_use_the_values_that_differ_and_stay_unique() -> None:
    combos = [{"env.name": "kuhn_poker", "lr": 0.001}, {"env.name": "kuhn_poker", "lr": -0.5}]
    assert point_names(combos) == ["0_001", "m0_5"]
    assert point_names([{"a": "x-y"}, {"a": "x_y"}]) == ["xmy", "x_y"]
    assert point_names([{"a": "A.B"}, {"a": "a b"}]) == ["p0-a_b", "p1-a_b"]  # same slug: numbered
    assert point_names([{"a": 1}]) == ["point"]


def test_a_named_grid_gives_one_validated_run_per_point() -> None:
    sweep = plan(PARAMS, "population")
    assert [p.name for p in sweep.points] == [f"{population}-{seed}" for population in
                                              ("balanced", "fixed_mcts", "pattern_skewed") for seed in (0, 1, 2)]
    assert sweep.directory == ROOT / "artifacts" / "sweeps" / "population"
    assert sweep.report_dir == ROOT / "reports" / "ablations" / "population"
    point = sweep.points[4]
    assert (point.env, point.method, point.workspace) == ("tic_tac_toe", "mage", sweep.directory / "fixed_mcts-1")
    # The workspace's params: the project's, with reproduce.runs = this point's run only.
    assert point.params["reproduce"]["runs"] == {
        "fixed_mcts-1": {"env": "tic_tac_toe", "method": "mage",
                         "set": {"train.groups_per_iteration": 16, "evaluation.meta_episodes_per_opponent_seat": 100,
                                 "population.tic_tac_toe": "fixed_mcts", "seed": 1}}}
    assert point.params["train"] == yaml.safe_load(PARAMS.read_text())["train"]  # the rest is the project's
    assert sweep.iterations == load_config(PARAMS).reproduce.iterations


def test_vary_extends_a_named_grid_and_a_profile_moves_the_sweep(tmp_path: Path) -> None:
    sweep = plan(PARAMS, "anchor", vary=["train.learning_rate=[0.001,0.0003]"], profile="smoke",
                 max_concurrent=5)
    assert [p.name for p in sweep.points] == [f"{preset}-{seed}-{lr}" for preset in ("mage", "ablation_local_anchor")
                                              for seed in (0, 1, 2) for lr in ("0_001", "0_0003")]
    assert sweep.points[7].values == {"algorithm.preset": "ablation_local_anchor", "seed": 0,
                                      "train.learning_rate": 0.0003}
    assert sweep.directory == ROOT / "artifacts" / "sweeps" / "anchor-smoke"
    assert sweep.report_dir == sweep.directory / "report"  # a profile's sweep leaves reports/ alone
    assert sweep.iterations == 500 and sweep.max_concurrent == 5  # the grid sets Table 1's Kuhn budget
    assert local_concurrency(sweep) == min(5, os.cpu_count() or 1, 12)  # locally, the cores cap it


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"grid": "nope"}, "grid 'nope' is not one of sweep.grids (reward_design, reward_design_webshop, population, "
                       "grouping, strangers, anchor, opponent_population, exploration, episode_norm, diverse)"),
    ({}, "name a grid of sweep.grids"),
    ({"grid": "anchor", "vary": ["algorithm.preset=[mage]"]}, "--vary algorithm.preset: already varied by grid"),
    ({"grid": "anchor", "name": "Bad-Name"}, "--name 'Bad-Name': use lower-case letters, digits and _"),
    ({"grid": "anchor", "max_concurrent": 0}, "--max-concurrent 0: must be at least 1"),
    ({"grid": "anchor", "overrides": ["train.bogus=1"]}, "train.bogus: unknown key"),
])
def test_bad_requests_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        plan(PARAMS, **kwargs)
    assert any(message in problem for problem in caught.value.problems), caught.value.problems


def test_the_opponent_population_grid_trains_on_archetypes_or_a_family_and_tests_on_another() -> None:
    from mage_core.config import parse_config, run_data

    sweep = plan(PARAMS, "opponent_population")
    assert [p.name for p in sweep.points] == [f"{population}-{seed}" for population in ("paper", "generated")
                                              for seed in (1, 2, 3)]
    configs = [parse_config(run_data(p.params, p.name, p.name)) for p in sweep.points]
    assert [cfg.seed for cfg in configs] == [1, 2, 3, 1, 2, 3]
    trained_on = [[e.opponent for e in cfg.population.entries("kuhn_poker")] for cfg in configs[::3]]
    assert trained_on[0] == ["conservative", "aggressive", "intermediate"]
    assert trained_on[1] == [f"generated-{i}" for i in range(32)]
    for cfg in configs:  # the same held-out suite for both, no member of which was trained on
        held_out = [e.opponent for e in cfg.evaluation.ood.entries("kuhn_poker", "generated_held_out")]
        assert held_out == [f"generated_held_out-{i}" for i in range(32)]
        tables = cfg.opponents.settings().kuhn_strategies
        assert not {tuple(tables[n].values()) for n in held_out} & {tuple(tables[n].values()) for n in trained_on[1]}


def test_the_episode_norm_grid_trains_both_normalizations_from_three_seeds() -> None:
    from mage_core.config import parse_config, run_data

    sweep = plan(PARAMS, "episode_norm")
    configs = [parse_config(run_data(p.params, p.name, p.name)) for p in sweep.points]
    assert [(cfg.algorithm.episode_norm, cfg.seed) for cfg in configs] == [
        (norm, seed) for norm in ("mean_norm", "mean_std_norm") for seed in (1, 2, 3)]
    # Everything else as the main job's Kuhn MAGE run trains it.
    assert {(cfg.env.name, cfg.algorithm.preset, cfg.train.iterations, cfg.train.select_on) for cfg in configs} == {
        ("kuhn_poker", "mage", 500, "exact_greedy")}


def test_over_seeds_groups_the_points_of_one_setting() -> None:
    import pandas as pd

    from mage_core.stages.sweep import seeds_markdown

    sweep = plan(PARAMS, "opponent_population")
    finals = {"paper-1": 0.10, "paper-2": 0.20, "paper-3": 0.30, "generated-1": 0.40, "generated-2": 0.40,
              "generated-3": 0.46}
    ceilings = {"ceiling_best_fixed": 0.125, "ceiling_passive": 0.2356, "ceiling_adaptive": 0.238,
                "ceiling_known": 0.275}
    frame = pd.DataFrame([{"run": run, "suite": suite, "final": final + (0.01 if suite != "in_domain" else 0),
                           **ceilings} for run, final in finals.items() for suite in ("ood_cfr", "in_domain")])
    lines = seeds_markdown(sweep, frame).splitlines()
    assert lines[0].startswith("Each setting trained from 3 seeds (seed: 1, 2, 3)")
    assert lines[2] == ("| `population.kuhn_poker` | suite | seeds | final hand, mean | std over seeds | range | "
                        "best fixed | play fixed, then respond | Bayes-optimal | opponent known |")
    # In-domain first; std is the sample standard deviation across the three seeds (0.1 and ~0.0346).
    assert lines[4] == "| paper | in_domain | 3 | +0.200 | 0.100 | +0.100 .. +0.300 | +0.125 | +0.236 | +0.238 | +0.275 |"
    assert lines[5] == "| generated | in_domain | 3 | +0.420 | 0.035 | +0.400 .. +0.460 | +0.125 | +0.236 | +0.238 | +0.275 |"
    assert lines[6].startswith("| paper | ood_cfr | 3 | +0.210 | 0.100 |")


def test_the_sizes_a_grid_sets_are_the_sweeps() -> None:
    # exploration sets train.iterations 500 and reproduce.eval_per_pair 2000 for every point.
    sweep = plan(PARAMS, "exploration")
    assert (sweep.iterations, sweep.eval_per_pair) == (500, 2000)
    # Points that differ: the project's reproduce values are named, and the Points table has the rest.
    mixed = plan(PARAMS, "anchor", vary=["train.iterations=[3, 4]"])
    base = load_config(PARAMS).reproduce
    assert (mixed.iterations, mixed.eval_per_pair) == (base.iterations, base.eval_per_pair)


def test_the_diverse_grid_trains_on_the_styles_and_tests_on_suites_it_does_not_contain() -> None:
    from mage_core.config import parse_config, run_data

    sweep = plan(PARAMS, "diverse")
    configs = [parse_config(run_data(p.params, p.name, p.name)) for p in sweep.points]
    assert [cfg.seed for cfg in configs] == [1, 2, 3]
    cfg = configs[0]
    trained_on = {e.opponent for e in cfg.population.entries("kuhn_poker")}
    assert len(trained_on) == 38 and "maniac" in trained_on and "style_mixtures-31" in trained_on
    assert set(cfg.opponents.kuhn_families) == {"style_mixtures", "beta_held_out"}  # the grid's family is added
    tables = cfg.opponents.settings().kuhn_strategies
    suites = {name: [e.opponent for e in cfg.evaluation.ood.entries("kuhn_poker", name)]
              for name in ("paper", "cfr", "cfr_argmax", "beta_held_out")}
    assert suites["paper"] == ["conservative", "aggressive", "intermediate"]
    assert suites["cfr"] == ["cfr"] and suites["cfr_argmax"] == ["cfr_argmax"]
    assert suites["beta_held_out"] == [f"beta_held_out-{i}" for i in range(32)]
    assert not set().union(*suites.values()) & trained_on
    # No held-out family member plays exactly as a training member does.
    train_tables = {tuple(tables[n].values()) for n in trained_on if n in tables}
    assert not {tuple(tables[n].values()) for n in suites["beta_held_out"]} & train_tables


def test_the_summary_shows_hand_two_after_what_hand_one_revealed(tmp_path: Path) -> None:
    import dataclasses
    import json

    from mage_core.stages.sweep import second_hand_markdown

    sweep = plan(PARAMS, "exploration")
    points = [dataclasses.replace(p, workspace=tmp_path / p.name) for p in sweep.points]
    sweep = dataclasses.replace(sweep, points=points)
    assert second_hand_markdown(sweep) == ""  # nothing evaluated yet
    first = points[0]
    folder = first.workspace / "artifacts" / "eval" / first.name
    folder.mkdir(parents=True)
    metrics = {"eval/in_domain/all/bet_J_ep2_after_tight_caller": 0.9, "eval/in_domain/all/bet_K_ep2_after_tight_caller": 0.1,
               "eval/in_domain/all/bet_Q_ep2_after_tight_caller": 0.2, "eval/in_domain/all/bet_J_ep2_unrevealed": 0.5,
               "eval/in_domain/all/ep2_bayes_agreement": 0.75, "eval/in_domain/all/chips_ep3": 0.2}
    (folder / "metrics.json").write_text(json.dumps({"metrics": metrics}))
    lines = second_hand_markdown(sweep).splitlines()
    assert "#### Does hand 2 use what hand 1 showed?" in lines
    assert f"| {first.name} | in_domain | not revealed | 0.500 | — | — | 0.750 |" in lines
    assert f"| {first.name} | in_domain | tight_caller | 0.900 | 0.200 | 0.100 | 0.750 |" in lines


@pytest.mark.parametrize("grid", ["reward_design", "reward_design_webshop", "population", "grouping", "anchor"])
def test_mage_sweep_and_the_reproduction_train_every_point_alike(grid: str) -> None:
    """A paper grid's point, as `mage sweep GRID` writes its workspace and as `mage reproduce` runs it
    (reproduce.ablations): the same points (exclude honoured), the same resolved training and
    evaluation config (the digest a checkpoint resumes on), so the same results."""
    from mage_core.config import run_data
    from mage_core.config.ablations import ablation_runs
    from mage_core.stages.train_resume import config_digest

    sweep = plan(PARAMS, grid)
    data = yaml.safe_load(PARAMS.read_text())
    data["reproduce"]["ablations"] = [grid]
    flow = ablation_runs(data)
    assert [f"{grid}-{p.name}" for p in sweep.points] == list(flow)
    for point in sweep.points:
        swept = parse_config(run_data(point.params, point.name, "sweep"), "sweep")
        reproduced = parse_config(run_data(data, f"{grid}-{point.name}", "flow"), "flow")
        assert config_digest(swept) == config_digest(reproduced), point.name
        assert swept.evaluation == reproduced.evaluation and swept.reproduce.eval_per_pair == reproduced.reproduce.eval_per_pair
