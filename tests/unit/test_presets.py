"""Method presets and the paper profiles pinned to docs/method.md (issue 12, "Presets pinned").

The expected values are written out by hand from docs/method.md (sections 4-6, 9, 10)
and the MAGE paper, never read from ``mage_core.config.presets``: a preset that
drifts from the method fails here, and a new preset must be added to the table.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mage_core.config import Config, EnvConfig, parse_config, run_data
from mage_core.stages.reproduce import profile_params
from mage_core.config.presets import PRESETS, preset_values

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
GAMES = ("tic_tac_toe", "kuhn_poker", "sokoban")

#: MAGE (docs/method.md sections 1, 4, 5, 6): K = 3 with reflect turns, differential returns,
#: GiGPO (mean_norm, step weight 1, global anchor), agent-specific (stationary) groups of 8
#: meta-episodes sharing a task seed, gamma_step 0.95, gamma_traj 0.6.
MAGE = {
    "episodes_per_meta_episode": 3, "reflect": True, "reward_variant": "differential", "advantage": "gigpo",
    "episode_norm": "mean_norm", "step_weight": 1.0, "anchor": "global", "grouping": "stationary",
    "group_scope": "task", "group_size": 8, "gamma_step": 0.95, "gamma_traj": 0.6,
    "episode_score": "episode_reward", "episode_baseline": "group", "agent": "trained", "retrieve_k": 3,
}
#: Single-episode baselines (docs/method.md section 6): one episode per sample, groups of 24.
SINGLE = {"episodes_per_meta_episode": 1, "reflect": False, "reward_variant": "single_episode", "group_size": 24}
#: Every preset as its differences from MAGE (docs/method.md section 9).
DIFF_FROM_MAGE: dict[str, dict[str, object]] = {
    "mage": {},
    # LaMer: its published cross-episode return (arXiv 2512.16848); its public code's grouping, a
    # task's rollouts, which in MAGE's code face one opponent: MAGE's (issue 42).
    "lamer": {"reward_variant": "lamer"},
    "gigpo": SINGLE,
    "grpo": {**SINGLE, "advantage": "grpo"},
    # Beyond the paper (issue 12), named apart: final-episode return, batch-wide baselines.
    "mage_final_return": {"reward_variant": "final", "step_weight": 0.0, "episode_score": "return",
                          "episode_baseline": "group_episode_turn", "group_scope": "batch"},
    # The prompting and memory baselines (docs/method.md section 9): never trained. ReAct keeps no
    # memory (single attempts, evaluated over K as the single-episode methods); the others
    # remember across MAGE's K episodes.
    "react": {**SINGLE, "agent": "react"},
    "reflexion": {"agent": "reflexion"},
    "a_mem": {"agent": "a_mem"},
    "memento": {"agent": "memento"},
    # The starting model under MAGE's protocol (K attempts, policy.memory), never trained: the
    # baseline a MAGE or LaMer run is compared with, paired (issue 39).
    "warm_start": {"agent": "frozen"},
    "ablation_cumulative": {"reward_variant": "cumulative"},
    "ablation_single_episode_reward": {"reward_variant": "single_episode"},
    "ablation_non_stationary_grouping": {"grouping": "non_stationary"},
    "ablation_local_anchor": {"anchor": "local"},
    "ablation_fixed_opponent": {},  # population ablations: MAGE's algorithm, other opponents
    "ablation_pattern_skewed": {},
}
#: Presets that leave the paper on purpose (the keys in which they do).
BEYOND_PAPER = {"mage_final_return": {"group_scope", "reward_variant", "step_weight", "episode_score",
                                      "episode_baseline"}}


def expected(preset: str, game: str) -> dict[str, object]:
    values = {**MAGE, **DIFF_FROM_MAGE[preset]}
    if game == "sokoban":
        values["gamma_traj"] = 0.9  # docs/method.md section 4, MAGE's Sokoban script
    return values


def test_every_preset_is_pinned() -> None:
    assert set(PRESETS) == set(DIFF_FROM_MAGE), "pin a new preset in DIFF_FROM_MAGE (docs/method.md section 9)"


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.parametrize("preset", sorted(DIFF_FROM_MAGE))
def test_preset_resolves_to_method_values_for_the_game(preset: str, game: str) -> None:
    algorithm = parse_config({"env": {"name": game}, "algorithm": {"preset": preset}}).algorithm
    resolved = algorithm.model_dump(exclude={"preset"})
    assert resolved == expected(preset, game)
    assert preset_values(preset, game) == expected(preset, game)
    # The docs/method.md invariants, stated once more on their own.
    assert (resolved["gamma_step"], resolved["gamma_traj"]) == (0.95, 0.9 if game == "sokoban" else 0.6)
    assert resolved["group_size"] == (24 if resolved["episodes_per_meta_episode"] == 1 else 8)
    assert resolved["episode_norm"] == "mean_norm"
    if "group_scope" not in BEYOND_PAPER.get(preset, set()):
        assert resolved["group_scope"] == "task"


def test_sokoban_gamma_traj_yields_to_an_explicit_value_and_follows_the_game() -> None:
    assert parse_config({"env": {"name": "sokoban"}, "algorithm": {"gamma_traj": 0.6}}).algorithm.gamma_traj == 0.6
    assert parse_config({"env": {"name": "sokoban"}, "algorithm": {"gamma_traj": 0.75}}).algorithm.gamma_traj == 0.75
    assert parse_config({}).algorithm.gamma_traj == 0.6  # kuhn_poker by default
    assert Config(env=EnvConfig(name="sokoban")).algorithm.gamma_traj == 0.9
    assert preset_values("mage")["gamma_traj"] == 0.6  # without a game: the game-agnostic table


def test_lamer_is_not_the_cumulative_ablation() -> None:
    lamer, ablation = preset_values("lamer"), preset_values("ablation_cumulative")
    assert lamer != ablation
    # They differ in the return alone: LaMer's published formula against the recursion of the
    # MAGE paper's "LAMER-style" ablation (both raw rewards, MAGE's grouping).
    assert {k for k in lamer if lamer[k] != ablation[k]} == {"reward_variant"}
    assert (lamer["reward_variant"], ablation["reward_variant"]) == ("lamer", "cumulative")


#: One paper profile per game of the paper this project supports.
PAPER_PROFILES = ["paper_alfworld", "paper_kuhn_poker", "paper_sokoban", "paper_tic_tac_toe", "paper_webshop"]


def test_every_paper_profile_is_pinned() -> None:
    data = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    assert sorted(n for n in data["reproduce"]["profiles"] if n.startswith("paper_")) == PAPER_PROFILES


@pytest.mark.parametrize("profile", PAPER_PROFILES)
def test_paper_profile_runs_use_the_paper_settings(profile: str) -> None:
    data = profile_params(ROOT / "params.yaml", profile)
    runs = parse_config(data).reproduce.runs
    assert runs
    for run in runs:
        cfg = parse_config(run_data(data, run, f"{profile} run {run}"))
        game, a = cfg.env.name, cfg.algorithm
        assert profile == f"paper_{game}"
        assert (a.gamma_step, a.gamma_traj) == (0.95, 0.9 if game == "sokoban" else 0.6)
        assert a.group_size == (24 if a.episodes_per_meta_episode == 1 else 8)
        assert (a.episode_norm, a.group_scope) == ("mean_norm", "task")
        # KL loss 0.1 low_var_kl on the games, off on Sokoban, ALFWorld, WebShop (docs/method.md sections 6 and 10).
        kl_off = game in ("sokoban", "alfworld", "webshop")
        assert (cfg.train.kl_coef, cfg.train.kl_estimator) == (0.0 if kl_off else 0.1, "low_var_kl")
        # response budgets of docs/method.md section 10
        budget = {"tic_tac_toe": 3072, "kuhn_poker": 4096, "sokoban": 4096, "alfworld": 1024, "webshop": 1024}[game]
        assert getattr(cfg.env, game).max_response_tokens == budget
        assert cfg.rollout.early_stop is True  # docs/method.md section 1: on, as in the paper's protocol
        assert a.model_dump(exclude={"preset"}) == expected(a.preset, game)


def test_the_committed_params_yaml_overrides_a_preset_only_where_it_says_so() -> None:
    # Issue 40: the tests above resolve presets without params.yaml, so they could not see that
    # its explicit algorithm keys override them in every reported run. Here every run of the
    # committed file is resolved as `mage train --run` does, and each value that is not its
    # preset's (written out by hand above) must come from a key the file sets explicitly.
    data = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    explicit = set(data.get("algorithm", {})) - {"preset"}
    runs = data["reproduce"]["runs"]
    for run, spec in runs.items():
        cfg = parse_config(run_data(data, run, f"params.yaml run {run}"))
        resolved = cfg.algorithm.model_dump(exclude={"preset"})
        wanted = expected(cfg.algorithm.preset, cfg.env.name)
        overridden = {key for key, value in resolved.items() if value != wanted[key]}
        run_keys = {k.split(".", 1)[1] for k in spec.get("set", {}) if k.startswith("algorithm.")}
        assert overridden <= explicit | run_keys, (run, overridden - explicit - run_keys)
    # the override the audit found: mage_final_return's preset has no std division, the file's key divides
    final = parse_config(run_data(data, "kuhn_poker-mage_final_return", "params.yaml"))
    assert expected("mage_final_return", "kuhn_poker")["episode_norm"] == "mean_norm"
    assert final.algorithm.episode_norm == "mean_std_norm" and "episode_norm" in explicit
