"""The trial table and its metrics, from hand-made meta-episodes."""

from __future__ import annotations

import pytest

from mage_core.envs.base import Outcome
from mage_core.evaluation.meta_eval import summarize_trials
from mage_core.evaluation.trials import TRIAL_COLUMNS, trial_rows
from mage_core.rollout.meta_episode import Decision, EpisodeResult, MetaEpisode, MetaEpisodeSpec

pytestmark = pytest.mark.unit

W, L, D = Outcome.WIN, Outcome.LOSS, Outcome.DRAW


def decision(episode: int, phase: str = "play", response: list[int] | None = None,
             candidates: list[list[int]] | None = None, choice: int | None = None) -> Decision:
    return Decision(phase=phase, episode=episode, turn=0, anchor="s", prompt_ids=[1], response_ids=response,
                    candidate_ids=candidates, choice=choice, logprob=0.0, task_reward=0.0, invalid=False,
                    penalty=0.0, text="")


def finished(opponent: str | None, seat: int, outcomes: list[Outcome], rewards: list[float],
             decisions: list[Decision] = (), seed: int = 0) -> MetaEpisode:
    meta = MetaEpisode.__new__(MetaEpisode)  # a finished record; no env needed
    meta.spec = MetaEpisodeSpec("kuhn_poker", opponent, seat, seed, 0)
    meta.episodes = [EpisodeResult(r, o, 2, 1 if o is L else 0) for o, r in zip(outcomes, rewards)]
    meta.decisions = list(decisions)
    meta.done = True
    return meta


def test_one_row_per_episode_with_tokens_per_episode() -> None:
    meta = finished("aggressive", 1, [L, W], [-5.0, 10.0], [
        decision(0, candidates=[[4], [5, 6]], choice=1),  # constrained: the chosen candidate's 2 tokens
        decision(0, candidates=[[4], [5, 6]], choice=0),  # 1 token
        decision(1, phase="reflect", response=[7, 8, 9]),  # a reflection counts for the episode it prepares
        decision(1, response=[1, 2, 3, 4]),
    ], seed=42)
    rows = trial_rows([meta], "in_domain", reward_per_unit=5.0)
    assert [tuple(r) for r in rows] == [TRIAL_COLUMNS] * 2
    assert rows[0] == {"suite": "in_domain", "opponent": "aggressive", "seat": "second", "meta_episode": 0,
                       "task_seed": 42, "episode": 1, "reward": -5.0, "score": -1.0, "success": False,
                       "draw": False, "invalid": 1, "turns": 2, "tokens": 3}
    assert rows[1]["episode"] == 2 and rows[1]["score"] == 2.0 and rows[1]["success"] and rows[1]["tokens"] == 7
    single = trial_rows([finished(None, 0, [D], [0.0])], "ood_one_box")
    assert (single[0]["opponent"], single[0]["seat"]) == ("none", "none")


def test_unfinished_meta_episodes_are_refused() -> None:
    meta = finished("a", 0, [W], [1.0])
    meta.done = False
    with pytest.raises(ValueError, match="meta-episode 0 of suite 'x' is not finished"):
        trial_rows([meta], "x")


def test_intervals_are_wilson_for_rates_and_normal_for_means() -> None:
    # 4 meta-episodes of one pair: one success in episode 1 -> 1/4.
    metas = [finished("a", 0, [W], [10.0]), finished("a", 0, [L], [-10.0]), finished("a", 0, [L], [-10.0]),
             finished("a", 0, [D], [0.0])]
    rows = trial_rows(metas, "s")
    m = summarize_trials(rows, 1, intervals=True)
    # Wilson 95% for 1/4 by hand: centre (0.25 + z^2/8) / (1 + z^2/4), half-width
    # z sqrt(0.25 * 0.75 / 4 + z^2 / 64) / (1 + z^2/4), z = 1.96 -> [0.0456, 0.6994].
    assert m["a/first/success_ep1"] == 0.25
    assert m["a/first/success_ep1_low"] == pytest.approx(0.0456, abs=1e-4)
    assert m["a/first/success_ep1_high"] == pytest.approx(0.6994, abs=1e-4)
    # Mean reward -2.5, sample std of (10, -10, -10, 0) = sqrt(275/3) = 9.574 -> half 1.96 * 9.574 / 2 = 9.383.
    assert m["a/first/reward_ep1"] == -2.5
    assert m["a/first/reward_ep1_low"] == pytest.approx(-2.5 - 9.383, abs=1e-3)
    assert m["a/first/reward_ep1_high"] == pytest.approx(-2.5 + 9.383, abs=1e-3)
    assert "a/first/success_ep1_low" not in summarize_trials(rows, 1)


def test_weighted_all_interval_combines_the_pairs() -> None:
    # Pair a/first: rewards 2, 0 (mean 1, se 1); pair b/second: rewards 4, 4, 4, 4 (mean 4, se 0).
    metas = [finished("a", 0, [W], [2.0]), finished("a", 0, [L], [0.0])] + [finished("b", 1, [W], [4.0])] * 4
    m = summarize_trials(trial_rows(metas, "s"), 1, weights={("a", 0): 0.25, ("b", 1): 0.75}, intervals=True)
    assert m["all/reward_ep1"] == pytest.approx(0.25 * 1 + 0.75 * 4)
    # se of the weighted mean = 0.25 * 1 -> half-width 1.96 * 0.25
    assert m["all/reward_ep1_high"] - m["all/reward_ep1"] == pytest.approx(1.959964 * 0.25, rel=1e-5)
    assert m["all/num_meta_episodes"] == 6


def test_weighted_rate_intervals_stay_within_zero_and_one() -> None:
    # No draws anywhere: every pair's draw rate is 0, so the weighted interval cannot go below 0.
    metas = [finished("a", 0, [W], [1.0])] * 3 + [finished("b", 1, [L], [-1.0])] * 3
    m = summarize_trials(trial_rows(metas, "s"), 1, weights={("a", 0): 0.5, ("b", 1): 0.5}, intervals=True)
    assert m["all/draw_ep1"] == 0.0 and m["all/draw_ep1_low"] == 0.0 and 0 < m["all/draw_ep1_high"] < 1
    assert m["all/success_ep1"] == 0.5 and 0.0 <= m["all/success_ep1_low"] < 0.5 < m["all/success_ep1_high"] <= 1.0


def test_the_final_attempt_minus_the_first_is_paired_on_each_meta_episode() -> None:
    # Gains per meta-episode (final success - first): L..W = +1, W (stopped early, carried) = 0,
    # W..L = -1, L..W = +1 -> mean 1/4; sample std of (1, 0, -1, 1) = sqrt(11/12) = 0.9574,
    # half-width 1.96 * 0.9574 / 2 = 0.9382.
    metas = [finished("a", 0, [L, L, W], [0.0] * 3), finished("a", 0, [W], [10.0]),
             finished("a", 0, [W, L, L], [0.0] * 3), finished("a", 0, [L, W, W], [0.0] * 3)]
    m = summarize_trials(trial_rows(metas, "s"), 3, intervals=True)
    assert m["all/success_gain"] == pytest.approx(0.25)
    assert m["all/success_gain_low"] == pytest.approx(0.25 - 0.9382, abs=1e-3)
    assert m["all/success_gain_high"] == pytest.approx(0.25 + 0.9382, abs=1e-3)
    # the unpaired difference of the two rates is the same mean: 3/4 final - 2/4 first
    assert m["all/success_ep3"] - m["all/success_ep1"] == pytest.approx(0.25)
    assert "all/success_gain" not in summarize_trials(trial_rows(metas[:1], "s"), 1)  # K = 1: no gain
