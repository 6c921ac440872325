"""What report.md prints under Table 1: each run's model, budget and seeds, and the
settings that differ from its game's paper profile, on hand-built params whose
differences are written out by hand."""

from __future__ import annotations

from typing import Any

import pytest

from mage_core.config import ConfigError, parse_config
from mage_core.stages.report import table1_title
from mage_core.stages.run_settings import (
    Difference,
    compared_values,
    describe,
    differences,
    run_settings,
    settings_markdown,
)

pytestmark = pytest.mark.unit

#: A CPU-default-like file with two runs and a paper profile for Kuhn only.
DATA: dict[str, Any] = {
    "env": {"name": "kuhn_poker"},
    "algorithm": {"episode_norm": "mean_std_norm", "group_scope": "batch"},
    "train": {"iterations": 700, "groups_per_iteration": 4, "learning_rate": 0.001, "num_threads": 2},
    "evaluation": {"meta_episodes_per_opponent_seat": 7},
    "tournament": {"matches": []},
    "reproduce": {
        "runs": {
            "kuhn_poker-grpo": {"env": "kuhn_poker", "method": "grpo", "set": {"train.groups_per_iteration": 3}},
            "sokoban-mage": {"env": "sokoban", "method": "mage"},
        },
        "iterations": 5,
        "eval_per_pair": 11,
        "profiles": {
            "paper_kuhn_poker": {
                "reproduce.runs": {"kuhn_poker-mage": {"env": "kuhn_poker", "method": "mage"}},
                "reproduce.iterations": 150,
                "rollout.early_stop": True,
                "algorithm.episode_norm": "mean_norm",
                "algorithm.group_scope": "task",
                "train.learning_rate": 0.001,  # the run's own value: no difference
                "train.num_threads": 8,  # where work runs: not compared
                "evaluation.seed": 1,  # seeds are listed, not compared
            },
        },
    },
}


def test_a_run_is_compared_with_its_games_paper_profile_under_its_own_method() -> None:
    settings = run_settings(DATA, "hand-built")
    grpo = settings["kuhn_poker-grpo"]
    # The run: grpo (groups of 24), reproduce.iterations 5, then its own set (3 groups).
    # The paper: the profile's Kuhn run with grpo put in, 150 iterations, the file's 4 groups.
    assert grpo.differences == (
        Difference("rollout.early_stop", False, True),
        Difference("algorithm.episode_norm", "mean_std_norm", "mean_norm"),
        Difference("algorithm.group_scope", "batch", "task"),
        Difference("train.iterations", 5, 150),
        Difference("train.groups_per_iteration", 3, 4),
    )
    assert grpo.paper_profile == "paper_kuhn_poker"
    assert (grpo.iterations, grpo.groups_per_iteration, grpo.group_size) == (5, 3, 24)
    assert grpo.meta_episodes_per_iteration == 72
    assert (grpo.selection_per_pair, grpo.report_per_pair, grpo.eval_every) == (7, 11, 25)
    assert grpo.seeds == (("seed", 0), ("evaluation.seed", 20260303), ("evaluation.selection_seed", 20261124))
    assert grpo.model == "embedded tiny Qwen3 from scratch (2 layers, hidden 64, 4 heads, float32)"
    # No paper_sokoban profile: nothing is compared, and the report says so.
    sokoban = settings["sokoban-mage"]
    assert sokoban.paper_profile is None and sokoban.differences == () and sokoban.paper_values == {}
    assert (sokoban.group_size, sokoban.iterations) == (8, 5)


def test_keys_of_one_side_only_count_as_differences() -> None:
    run = parse_config({"env": {"name": "tic_tac_toe", "tic_tac_toe": {"max_turns": 9}},
                        "population": {"tic_tac_toe": "fixed_mcts"}, "model": {"source": "local", "path": "m"}})
    paper = parse_config({"env": {"name": "sokoban"}})
    found = {d.key: (d.run_value, d.paper_value) for d in differences(run, paper)}
    assert found["model.source"] == ("local", "embedded") and found["model.path"] == ("m", None)
    assert found["env.tic_tac_toe.max_turns"] == (9, None)
    assert found["env.sokoban.max_turns"] == (None, 7)
    assert found["population.tic_tac_toe"] == ("fixed_mcts", None)
    assert found["evaluation.ood.tic_tac_toe"] == ({"mcts_1000": "held_out"}, None)
    assert found["evaluation.ood.sokoban"] == (None, {"one_box": {"num_boxes": 1}, "three_boxes": {"num_boxes": 3}})
    # Sokoban's preset value (METHOD.md section 4) against the games' 0.6.
    assert found["algorithm.gamma_traj"] == (0.6, 0.9)
    assert len(found) == len(differences(run, paper))  # one entry per key
    assert "evaluation.ood.kuhn_poker" not in compared_values(run)  # other games' suites are not compared


def test_the_same_config_differs_in_nothing_and_the_title_says_so() -> None:
    cfg = parse_config({"env": {"name": "kuhn_poker"}, "seed": 3})
    paper = parse_config({"env": {"name": "kuhn_poker"}, "seed": 4, "train": {"output_dir": "elsewhere"},
                          "rollout": {"workers": 0}})
    same = describe(cfg, paper, "paper_kuhn_poker")
    assert same.differences == ()
    assert table1_title({"a": same}) == "Table 1 (the paper profiles' settings): in-domain, final episode"
    other = describe(cfg, parse_config({"env": {"name": "kuhn_poker"}, "train": {"ppo_epochs": 1}}), "p")
    assert other.differences == (Difference("train.ppo_epochs", 2, 1),)
    assert table1_title({"a": same, "b": other}) == (
        "Table 1 (embedded tiny model, not the paper's setting): in-domain, final episode")
    unprofiled = describe(cfg, None, "paper_kuhn_poker")
    assert table1_title({"a": unprofiled}).startswith("Table 1 (embedded tiny model, not the paper's setting)")
    local = describe(parse_config({"model": {"source": "local", "path": "models/x"}}), None, "p")
    assert local.model == "local checkpoint `models/x` (float32)"
    assert table1_title({"a": local}) == "Table 1 (not the paper's setting): in-domain, final episode"


def test_the_markdown_lists_each_run_and_each_differing_setting() -> None:
    a = parse_config({"env": {"name": "kuhn_poker"}, "train": {"iterations": 3, "groups_per_iteration": 2,
                                                                "eval_every": 0}})
    b = parse_config({"env": {"name": "kuhn_poker"}, "algorithm": {"preset": "grpo"},
                      "train": {"iterations": 3, "groups_per_iteration": 2, "ppo_epochs": 1}})
    size = {"iterations": 3, "groups_per_iteration": 2}
    paper_a = parse_config({"env": {"name": "kuhn_poker"}, "train": {**size, "ppo_epochs": 1, "eval_every": 25}})
    paper_b = parse_config({"env": {"name": "kuhn_poker"}, "algorithm": {"preset": "grpo"},
                            "train": {**size, "ppo_epochs": 1, "eval_every": 10}})
    text = settings_markdown({"k-a": describe(a, paper_a, "paper_kuhn_poker"),
                              "k-b": describe(b, paper_b, "paper_kuhn_poker")}, {"kuhn_poker": "Kuhn Poker"})
    lines = text.splitlines()
    model = "embedded tiny Qwen3 from scratch (2 layers, hidden 64, 4 heads, float32)"
    assert (f"| `k-a` | {model} | 3 iterations x 16 meta-episodes (2 groups of 8) | 500 per (opponent, seat), "
            "at the end only | 200 per (opponent, seat) | 0 / 20260303 / 20261124 |") in lines
    assert (f"| `k-b` | {model} | 3 iterations x 48 meta-episodes (2 groups of 24) | 500 per (opponent, seat), "
            "every 25 iterations and at the end | 200 per (opponent, seat) | 0 / 20260303 / 20261124 |") in lines
    assert "#### Kuhn Poker: settings that differ from the paper profile `paper_kuhn_poker`" in lines
    table = lines[lines.index("#### Kuhn Poker: settings that differ from the paper profile `paper_kuhn_poker`") + 2:]
    # ppo_epochs: the paper's 1 for both, only k-a differs; eval_every: the paper's value depends on the run.
    assert table[:4] == ["| setting | paper profile | `k-a` | `k-b` |", "|---|---|---|---|",
                         "| `train.ppo_epochs` | 1 | 2 | = |",
                         "| `train.eval_every` | by method | 0 (paper: 25) | 25 (paper: 10) |"]
    assert len([line for line in table if line.startswith("| `")]) == 2
    unprofiled = settings_markdown({"s": describe(parse_config({"env": {"name": "sokoban"}}), None,
                                                  "paper_sokoban")}, {})
    assert "#### sokoban: no paper profile" in unprofiled and "no `paper_sokoban`" in unprofiled


def test_a_bad_profile_is_reported_with_its_key() -> None:
    bad = {**DATA, "reproduce": {**DATA["reproduce"], "profiles": {"paper_kuhn_poker": {"train.ppo_epochs": 0}}}}
    with pytest.raises(ConfigError, match="train.ppo_epochs"):
        run_settings(bad, "hand-built")


def test_an_evaluation_only_baseline_shows_no_training_budget_and_its_training_keys_unused() -> None:
    trained = parse_config({"env": {"name": "kuhn_poker"}, "train": {"iterations": 3, "ppo_epochs": 2}})
    react = parse_config({"env": {"name": "kuhn_poker"}, "algorithm": {"preset": "react"},
                          "train": {"iterations": 3, "ppo_epochs": 2}, "policy": {"max_new_tokens": 64}})
    paper = {"env": {"name": "kuhn_poker"}, "train": {"iterations": 150, "ppo_epochs": 1},
             "policy": {"max_new_tokens": 4096}}
    settings = {"k-mage": describe(trained, parse_config(paper), "paper_kuhn_poker"),
                "k-react": describe(react, parse_config({**paper, "algorithm": {"preset": "react"}}),
                                    "paper_kuhn_poker")}
    assert (settings["k-mage"].trained, settings["k-react"].trained) == (True, False)
    lines = settings_markdown(settings, {"kuhn_poker": "Kuhn Poker"}).splitlines()
    row = next(line for line in lines if line.startswith("| `k-react` |"))
    assert "| none: evaluation only, the model as given | 500 per (opponent, seat), once (nothing to select from) |" in row
    assert "| `train.iterations` | 150 | 3 | unused |" in lines
    assert "| `train.ppo_epochs` | 1 | 2 | unused |" in lines
    assert "| `policy.max_new_tokens` | 4096 | 48 | 64 |" in lines  # a key the baseline does use
