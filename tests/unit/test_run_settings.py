"""What report.md prints under Table 1: each run's model, budget and seeds, and the
settings that differ from its game's paper profile, on hand-built params whose
differences are written out by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mage_core.config import ConfigError, parse_config
from mage_core.stages.report import table1_title
from mage_core.stages.run_settings import (
    Difference,
    compared_values,
    describe,
    differences,
    model_summary,
    paper_config,
    reference_keys,
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
    # Sokoban's preset value (docs/method.md section 4) against the games' 0.6.
    assert found["algorithm.gamma_traj"] == (0.6, 0.9)
    assert len(found) == len(differences(run, paper))  # one entry per key
    assert "evaluation.ood.kuhn_poker" not in compared_values(run)  # other games' suites are not compared


def test_a_warm_started_run_shows_the_warm_start_it_starts_from() -> None:
    paper = parse_config({"env": {"name": "sokoban"}, "model": {"source": "local", "path": "m"},
                          "warm_start": {"tasks": ["sokoban"]}})  # a local model is never warm-started by the list
    run = parse_config({"env": {"name": "sokoban"}, "warm_start": {"tasks": {"sokoban": {"warm_start.epochs": 9}}}})
    found = {d.key: (d.run_value, d.paper_value) for d in differences(run, paper)}
    assert found["model.init"] == ("artifacts/sft/sokoban/model", None)
    assert model_summary(run) == ("embedded tiny Qwen3 from the warm start `artifacts/sft/sokoban/model` "
                                  "(2 layers, hidden 64, 4 heads, float32)")
    cold = parse_config({"env": {"name": "sokoban"}, "warm_start": {"tasks": ["webshop"]}})
    assert compared_values(cold)["model.init"] is None


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


# -- the paper profiles set every reference key (issue 24) -------------------------------------------

ROOT = Path(__file__).resolve().parents[2]

#: The paper's reference settings (docs/method.md section 10, the reference scripts), written out by
#: hand per game: every paper profile must set each of these keys to this value. Shared by all:
#: Qwen3-4B with thinking, lr 1e-6 constant, clip 0.2, entropy 0.001, K = 3, groups of 8, gamma_step
#: 0.95, step weight 1.0, mean_norm, groups of one task seed, early stop after a win, training
#: temperature 1.0, evaluation at 0.7 / top-p 0.8 / top-k 20, test every 5 steps, save every 10.
SHARED_REFERENCE: dict[str, Any] = {
    "model.source": "local", "model.path": "models/Qwen3-4B", "policy.chat_template": True, "policy.thinking": True,
    "rollout.temperature": 1.0, "rollout.early_stop": True,
    "algorithm.episodes_per_meta_episode": 3, "algorithm.group_size": 8, "algorithm.gamma_step": 0.95,
    "algorithm.step_weight": 1.0, "algorithm.episode_norm": "mean_norm", "algorithm.group_scope": "task",
    "train.learning_rate": 1e-6, "train.lr_schedule": "constant", "train.clip_ratio": 0.2,
    "train.entropy_coef": 0.001, "train.entropy_coef_final": 0.001, "train.eval_every": 5,
    "train.checkpoint_every": 10,
    "evaluation.temperature": 0.7, "evaluation.top_p": 0.8, "evaluation.top_k": 20,
}


def _game(env: str, iterations: int, turns: int, response: int, invalid: float, length: float, kl: float,
          gamma_traj: float, groups: int, **extra: Any) -> dict[str, Any]:
    return {**SHARED_REFERENCE, "reproduce.iterations": iterations, f"env.{env}.max_turns": turns,
            f"env.{env}.max_response_tokens": response, "policy.max_new_tokens": response,
            f"env.{env}.invalid_action_penalty": invalid, f"env.{env}.length_penalty_coef": length,
            "train.kl_coef": kl, "algorithm.gamma_traj": gamma_traj, "train.groups_per_iteration": groups, **extra}


REFERENCE: dict[str, dict[str, Any]] = {
    "tic_tac_toe": _game("tic_tac_toe", 150, 8, 3072, 0.5, 2.0, 0.1, 0.6, 16,
                         **{"train.kl_estimator": "low_var_kl", "population.tic_tac_toe": "balanced"}),
    # Kuhn: invalid-action penalty 2.0; validation against CFR (the reference code's argmax) with the
    # agent second; training seats mixed.
    "kuhn_poker": _game("kuhn_poker", 150, 6, 4096, 2.0, 2.0, 0.1, 0.6, 16, **{
        "train.kl_estimator": "low_var_kl", "population.kuhn_poker": "paper",
        "evaluation.ood.kuhn_poker": {"cfr": "held_out", "cfr_argmax": [{"opponent": "cfr_argmax", "seat": "second"}]}}),
    # Sokoban: 6x6, 2 boxes, 3 moves a turn, levels of 5..21 optimal moves; no KL.
    "sokoban": _game("sokoban", 300, 7, 4096, 0.5, 1.0, 0.0, 0.9, 16, **{
        "env.sokoban.dim_room": 6, "env.sokoban.num_boxes": 2, "env.sokoban.moves_per_turn": 3,
        "env.sokoban.min_solution_moves": 5, "env.sokoban.max_solution_moves": 21}),
    "alfworld": _game("alfworld", 150, 10, 1024, 0.5, 0.0, 0.0, 0.6, 8),
    "webshop": _game("webshop", 150, 12, 1024, 0.5, 0.0, 0.0, 0.6, 8),
}


def _params() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))


def test_the_code_names_the_same_reference_keys_as_the_hand_written_table() -> None:
    for env, values in REFERENCE.items():
        assert sorted(reference_keys(env)) == sorted(values), env


@pytest.mark.parametrize("env", sorted(REFERENCE))
def test_every_paper_profile_sets_every_reference_key_to_the_reference_value(env: str) -> None:
    profile = _params()["reproduce"]["profiles"][f"paper_{env}"]
    missing = [key for key in REFERENCE[env] if key not in profile]
    assert not missing, f"paper_{env} leaves reference keys to the params file: {missing}"
    wrong = {key: (profile[key], value) for key, value in REFERENCE[env].items() if profile[key] != value}
    assert not wrong, f"paper_{env}: (profile, reference) {wrong}"


@pytest.mark.parametrize("env", sorted(REFERENCE))
def test_a_paper_profile_resolves_to_the_reference_values_for_mage_and_for_grpo(env: str) -> None:
    data = _params()
    mage = paper_config(data, env, "mage", "params.yaml")
    assert mage is not None
    resolved = compared_values(mage)
    expected = {("train.iterations" if key == "reproduce.iterations" else key): value
                for key, value in REFERENCE[env].items()}
    for key, value in expected.items():
        if key == "evaluation.ood.kuhn_poker":
            assert resolved[key]["cfr_argmax"] == [{"opponent": "cfr_argmax", "weight": 1.0, "seat": "second"}]
        else:
            assert resolved[key] == value, key
    # GRPO in the paper's setting: single episodes in groups of 24 (docs/method.md section 6), the rest the profile's.
    grpo = compared_values(paper_config(data, env, "grpo", "params.yaml"))
    assert (grpo["algorithm.episodes_per_meta_episode"], grpo["algorithm.group_size"]) == (1, 24)
    assert grpo["train.groups_per_iteration"] == REFERENCE[env]["train.groups_per_iteration"]
    # Every compared key the profile leaves to the file is one docs/method.md section 10 gives no value for.
    s = run_settings(data, "params.yaml")[f"{env}-mage"]
    assert not s.paper_unset & set(expected)


def test_a_params_file_algorithm_key_shows_against_the_methods_preset_even_if_the_profile_is_silent() -> None:
    data = {"env": {"name": "kuhn_poker"}, "algorithm": {"gamma_step": 0.9, "group_size": 4},
            "reproduce": {"runs": {"k-grpo": {"env": "kuhn_poker", "method": "grpo"},
                                   "k-final": {"env": "kuhn_poker", "method": "mage_final_return"}},
                          "profiles": {"paper_kuhn_poker": {"train.learning_rate": 1.0e-6,
                                                            "algorithm.group_size": 8, "algorithm.step_weight": 1.0}}}}
    settings = run_settings(data, "hand-built")
    grpo = {d.key: (d.run_value, d.paper_value) for d in settings["k-grpo"].differences}
    # The paper side is GRPO's preset: gamma_step 0.95 and groups of 24, not the profile's MAGE 8.
    assert grpo["algorithm.gamma_step"] == (0.9, 0.95)
    assert grpo["algorithm.group_size"] == (4, 24)
    assert "algorithm.step_weight" not in grpo  # 1.0 in GRPO's preset and in the run
    final = {d.key: (d.run_value, d.paper_value) for d in settings["k-final"].differences}
    assert final["algorithm.group_size"] == (4, 8)
    assert "algorithm.step_weight" not in final  # the method's own 0.0 on both sides, not the profile's 1.0
    assert settings["k-final"].paper_values["algorithm.step_weight"] == 0.0


def test_keys_the_profile_leaves_to_the_file_are_marked_and_the_unexpressible_settings_listed() -> None:
    settings = run_settings(DATA, "hand-built")
    grpo = settings["kuhn_poker-grpo"]
    # DATA's profile sets early stop, the iterations (via reproduce.iterations) and the algorithm (the preset);
    # train.groups_per_iteration (4) is the file's.
    assert "train.groups_per_iteration" in grpo.paper_unset
    assert not {"rollout.early_stop", "train.iterations", "algorithm.group_scope", "train.learning_rate"} & grpo.paper_unset
    lines = settings_markdown(settings, {"kuhn_poker": "Kuhn Poker"}).splitlines()
    assert "| `train.groups_per_iteration` | 4 (file) | 3 |" in lines
    assert "| `rollout.early_stop` | true | false |" in lines
    assert any(line.startswith("(file): `paper_kuhn_poker` does not set this key") for line in lines)
    head = lines.index("#### Paper settings no key here expresses")
    rows = [line for line in lines[head:] if line.startswith("| ") and not line.startswith("| setting")]
    assert [row.split(" | ")[0] for row in rows] == ["| PPO mini-batch", "| maximum prompt length",
                                                     "| validation during training", "| training engine"]
    assert "64" in rows[0] and "`train.mini_batches_per_epoch`" in rows[0]
    # Without any paper profile there is nothing to compare, so no such list either.
    alone = settings_markdown({"s": describe(parse_config({"env": {"name": "sokoban"}}), None, "paper_sokoban")}, {})
    assert "no key here expresses" not in alone


def test_a_params_key_that_overrides_the_method_preset_is_marked_with_the_presets_value() -> None:
    # Issue 39: mage_final_return's preset sets episode_norm mean_norm (no std division), and the
    # committed params.yaml's explicit `algorithm.episode_norm: mean_std_norm` overrides it in every
    # reported run: the report's settings table says so, naming the preset's value.
    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text(encoding="utf-8"))
    assert data["algorithm"]["episode_norm"] == "mean_std_norm"  # the override this test is about
    settings = run_settings(data, "params.yaml")
    final = settings["kuhn_poker-mage_final_return"]
    assert final.preset_overrides["algorithm.episode_norm"] == "mean_norm"
    assert "algorithm.group_scope" not in final.preset_overrides  # its preset's own value: batch
    assert settings["kuhn_poker-mage"].preset_overrides["algorithm.group_scope"] == "task"
    text = settings_markdown({"final": final}, {"kuhn_poker": "Kuhn Poker"})
    row = next(line for line in text.splitlines() if line.startswith("| `algorithm.episode_norm` |"))
    assert row == "| `algorithm.episode_norm` | mean_norm | mean_std_norm (preset: mean_norm) |"
    assert "(preset: X): the run's method preset sets X" in text
    # without the explicit key the preset's value stands and nothing is marked
    plain = describe(parse_config({"env": {"name": "kuhn_poker"}, "algorithm": {"preset": "mage_final_return"}}),
                     None, "paper_kuhn_poker")
    assert plain.preset_overrides == {}
