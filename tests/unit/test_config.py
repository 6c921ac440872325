"""params.yaml validation: every problem reported, with its dotted key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mage_core.config import Config, ConfigError, load_config, parse_config

pytestmark = pytest.mark.unit

# (params text, a substring every report must contain per expected problem)
BROKEN: list[tuple[str, list[str]]] = [
    ("env: {name: chess}", ["env.name: 'chess' is not one of tic_tac_toe, kuhn_poker, sokoban"]),
    ("seed: -3", ["seed: Input should be greater than or equal to 0"]),
    ("sead: 1", ["sead: unknown key"]),
    ("env: {tic_tac_toe: {max_turns: 0}}", ["env.tic_tac_toe.max_turns: Input should be greater than 0"]),
    ("env: {kuhn_poker: {reward_per_chip: 'five'}}", ["env.kuhn_poker.reward_per_chip: Input should be a valid number"]),
    (
        "env: {sokoban: {num_boxes: 4, min_solution_moves: 9, max_solution_moves: 3}}",
        ["env.sokoban.num_boxes: Input should be less than or equal to 3",
         "env.sokoban.max_solution_moves: must be >= min_solution_moves (9), got 3"],
    ),
    ("opponents: {mcts_solver: maybe}", ["opponents.mcts_solver: Input should be a valid boolean"]),
    (
        "opponents: {kuhn_strategies: {b: {J: 1.5, Q: 1, K: 1, Jpb: 0, Qpb: 1, Kpb: 1, "
        "Jp: 0, Qp: 0, Kp: 1, Jb: 0, Qb: 0}}}",
        ["opponents.kuhn_strategies.b.J: Input should be less than or equal to 1",
         "opponents.kuhn_strategies.b.Kb: required key is missing"],
    ),
    (
        "opponents: {kuhn_strategies: {aggressive: {J: 1, Q: 1, K: 1, Jpb: 1, Qpb: 1, Kpb: 1, "
        "Jp: 1, Qp: 1, Kp: 1, Jb: 1, Qb: 1, Kb: 1}}}",
        ["opponents.kuhn_strategies: ['aggressive'] shadow built-in opponents"],
    ),
    (
        "population: {tic_tac_toe: [{opponent: mcts-x}, {opponent: pattern-zigzag, weight: 0}]}",
        ["population.tic_tac_toe[0].opponent: 'mcts-x' is not an opponent of tic_tac_toe",
         "population.tic_tac_toe[1].opponent: unknown pattern 'zigzag'",
         "population.tic_tac_toe[1].weight: Input should be greater than 0"],
    ),
    ("population: {kuhn_poker: weird}", ["population.kuhn_poker: unknown kuhn_poker population 'weird'; presets: paper"]),
    (
        "population: {kuhn_poker: [{opponent: equilibrium-1/2, seat: middle}]}",
        ["population.kuhn_poker[0].opponent: equilibrium alpha must lie in [0, 1/3], got 1/2",
         "population.kuhn_poker[0].seat: 'middle' is not one of first, second, mixed"],
    ),
    (
        "tournament: {matches: [{game: kuhn_poker, player_a: minimax, player_b: cfr, num_games: 0}]}",
        ["tournament.matches[0].player_a: 'minimax' is not an opponent of kuhn_poker",
         "tournament.matches[0].num_games: Input should be greater than 0"],
    ),
    ("- just\n- a list", ["<root>: expected a mapping of keys, got list"]),
    (
        "tracking: {system_metrics: maybe, register_models: 2}",
        ["tracking.system_metrics: Input should be a valid boolean",
         "tracking.register_models: Input should be a valid boolean"],
    ),
    # The first reveal is safe and one more safe cell must be left: at most board_size ** 2 - 2 mines.
    ("env: {minesweeper: {num_mines: 35}}", ["env.minesweeper.num_mines: at most 34 on a 6 x 6 board"]),
    (
        "env: {minesweeper: {board_size: 4}}\nevaluation: {ood: {minesweeper: {many: {num_mines: 15}}}}",
        ["evaluation.ood.minesweeper.many.num_mines: at most 14 on a 4 x 4 board"],
    ),
]


@pytest.mark.parametrize(("text", "expected"), BROKEN, ids=[b[0][:40] for b in BROKEN])
def test_broken_params_report_every_problem(tmp_path: Path, text: str, expected: list[str]) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    report = "\n".join(info.value.problems)
    for fragment in expected:
        assert fragment in report, f"missing {fragment!r} in:\n{report}"
    assert len(info.value.problems) == len(expected), report


def test_all_problems_of_one_file_come_together(tmp_path: Path) -> None:
    text = "\n".join(t for t, _ in BROKEN[:8] if not t.startswith("-"))
    # Merge the single-key documents by hand: YAML would reject duplicate top keys.
    merged: dict = {}
    for t, _ in BROKEN[:8]:
        for key, value in yaml.safe_load(t).items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
    with pytest.raises(ConfigError) as info:
        parse_config(merged)
    assert len(info.value.problems) >= 8, text


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("seed: 1\nenv: {name: kuhn_poker\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.problems[0].startswith("<yaml>: not valid YAML at line")


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config("/nonexistent/params.yaml")


def test_project_params_file_is_valid_and_fully_commented(project_root: Path) -> None:
    cfg = load_config(project_root / "params.yaml")
    assert isinstance(cfg, Config)
    # Every field (a `key: value` line) has a comment line right above it: the
    # file documents the schema. Section headers (`key:` alone) are exempt.
    lines = (project_root / "params.yaml").read_text().splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "- ")) or stripped.endswith(":"):
            continue
        assert lines[i - 1].strip().startswith("#"), f"params.yaml line {i + 1} has no comment above: {line}"


def test_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("")
    cfg = load_config(path)
    assert cfg.env.tic_tac_toe.max_turns == 8
    assert cfg.env.kuhn_poker.max_turns == 6
    assert cfg.env.sokoban.length_penalty_coef == 1.0
    assert cfg.population.kuhn_poker == "paper"


def test_set_overrides_apply_before_validation(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("train:\n  iterations: 5\n")
    cfg = load_config(path, ["train.iterations=7", "algorithm.preset=gigpo", "rollout.restart=same",
                             "evaluation.ood.kuhn_poker={argmax: [{opponent: cfr_argmax}]}"])
    assert cfg.train.iterations == 7
    assert cfg.algorithm.preset == "gigpo" and cfg.algorithm.group_size == 24  # the preset fills its keys
    assert cfg.rollout.restart == "same"
    assert list(cfg.evaluation.ood.kuhn_poker) == ["argmax"]
    assert path.read_text() == "train:\n  iterations: 5\n"  # the file is never touched
    # A bad value is reported like one in the file, naming the key and the --set items.
    with pytest.raises(ConfigError) as info:
        load_config(path, ["train.iterations=-1"])
    assert "--set train.iterations=-1" in info.value.source
    assert info.value.problems == ["train.iterations: Input should be greater than 0 (got -1)"]
    # Malformed items are all reported at once.
    with pytest.raises(ConfigError) as info:
        load_config(path, ["iterations", "train.=3", "train.iterations.x=1"])
    assert info.value.problems == [
        "--set 'iterations': expected KEY=VALUE with a dotted key, e.g. train.learning_rate=1e-3",
        "--set 'train.=3': expected KEY=VALUE with a dotted key, e.g. train.learning_rate=1e-3",
        "--set 'train.iterations.x=1': train.iterations is not a section",
    ]


def test_a_run_of_reproduce_is_the_file_with_the_runs_overrides(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"reproduce": {"iterations": 9, "runs": {
        "ttt-grpo": {"env": "tic_tac_toe", "method": "grpo", "set": {"train.groups_per_iteration": 3}},
        "bad": {"env": "kuhn_poker", "method": "mage", "set": {"train.groups_per_itration": 3}}}}}))
    cfg = load_config(path, run="ttt-grpo")
    assert (cfg.env.name, cfg.algorithm.preset, cfg.algorithm.group_size) == ("tic_tac_toe", "grpo", 24)
    assert (cfg.train.iterations, cfg.train.groups_per_iteration) == (9, 3)
    assert load_config(path, ["train.iterations=2"], run="ttt-grpo").train.iterations == 2  # --set wins
    with pytest.raises(ConfigError) as info:
        load_config(path, run="bad")
    assert info.value.problems == ["train.groups_per_itration: unknown key (check the spelling; see params.yaml "
                                   "for the allowed keys)"]
    with pytest.raises(ConfigError, match="'nope' is not one of reproduce.runs"):
        load_config(path, run="nope")


def test_a_served_model_needs_free_text_actions() -> None:
    # The completions route of an OpenAI-compatible server returns text; it scores no candidates.
    served = {"backend": {"generator": "openai", "openai": {"model": "m"}}}
    with pytest.raises(ConfigError) as err:
        parse_config(served)
    assert err.value.problems == ["backend.generator: openai answers in free text only (the completions route "
                                  "scores no candidates); set policy.action_mode: free"]
    assert parse_config({**served, "policy": {"action_mode": "free"}}).backend.generator == "openai"
