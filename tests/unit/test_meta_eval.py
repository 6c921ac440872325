"""Evaluation metrics from hand-made outcomes, and the fixed evaluation set."""

from __future__ import annotations

import pytest

from mage_core.envs.base import Outcome
from mage_core.evaluation.meta_eval import evaluation_specs, summarize
from mage_core.opponents.population import preset
from mage_core.rollout.meta_episode import EpisodeResult, MetaEpisode, MetaEpisodeSpec

pytestmark = pytest.mark.unit

W, L, D = Outcome.WIN, Outcome.LOSS, Outcome.DRAW


def finished(opponent: str, seat: int, outcomes: list[Outcome], rewards: list[float]) -> MetaEpisode:
    meta = MetaEpisode.__new__(MetaEpisode)  # a finished record; no env needed to summarize it
    meta.spec = MetaEpisodeSpec("tic_tac_toe", opponent, seat, 0, 0)
    meta.episodes = [EpisodeResult(r, o, 3, 1 if o is L else 0) for o, r in zip(outcomes, rewards)]
    meta.done = True
    return meta


def test_pass_at_k_success_and_draw_rates_by_hand() -> None:
    metas = [
        finished("a", 0, [L, W, W], [-10, 10, 10]),
        finished("a", 0, [D, D, L], [0, 0, -10]),
        finished("b", 1, [W, L, W], [10, -10, 10]),
        finished("b", 1, [L, L, D], [-10, -10, 0]),
    ]
    m = summarize(metas, 3)
    # Pass@k: first wins at episode 2, never, 1, never -> pass@1 1/4, pass@2 2/4, pass@3 2/4.
    assert (m["all/pass_at_1"], m["all/pass_at_2"], m["all/pass_at_3"]) == (0.25, 0.5, 0.5)
    assert m["all/success_ep1"] == 0.25 and m["all/success_ep3"] == 0.5
    assert m["all/draw_ep1"] == 0.25 and m["all/draw_ep3"] == 0.25
    assert m["all/reward_ep1"] == pytest.approx(-2.5) and m["all/reward_ep2"] == pytest.approx(-2.5)
    assert m["a/first/pass_at_1"] == 0.0 and m["b/second/pass_at_1"] == 0.5
    assert m["all/invalid_rate"] == pytest.approx(5 / 36)  # 5 losses x 1 invalid over 12 episodes x 3 turns
    assert m["all/num_meta_episodes"] == 4


def test_chips_unit_divides_rewards() -> None:
    m = summarize([finished("a", 0, [L, W], [-5, 10])], 2, reward_per_unit=5.0, unit="chips")
    assert (m["all/chips_ep1"], m["all/chips_ep2"]) == (-1.0, 2.0)


def test_early_stopped_meta_episodes_count_for_pass_at_k() -> None:
    m = summarize([finished("a", 0, [W], [10]), finished("a", 0, [L, L, L], [-10] * 3)], 3)
    assert m["all/pass_at_3"] == 0.5
    assert m["all/success_ep1"] == 0.5 and m["all/success_ep2"] == 0.0  # ep2 only played by the second


def test_evaluation_set_is_fixed_and_covers_every_pair() -> None:
    a = evaluation_specs("kuhn_poker", preset("kuhn_poker", "paper"), 5, seed=11)
    b = evaluation_specs("kuhn_poker", preset("kuhn_poker", "paper"), 5, seed=11)
    c = evaluation_specs("kuhn_poker", preset("kuhn_poker", "paper"), 5, seed=12)
    assert a == b and a != c
    assert len(a) == 6 * 5
    assert {(s.opponent, s.agent_seat) for s in a} == {(o, s) for o in ("conservative", "aggressive",
                                                                        "intermediate") for s in (0, 1)}
    assert len({s.task_seed for s in a}) == 30


def test_population_weights_reweight_the_all_group() -> None:
    metas = [finished("a", 0, [W], [10]), finished("b", 1, [L], [-10]), finished("b", 1, [L], [-10])]
    pooled = summarize(metas, 1)
    weighted = summarize(metas, 1, weights={("a", 0): 0.75, ("b", 1): 0.25})
    assert pooled["all/success_ep1"] == pytest.approx(1 / 3)
    assert weighted["all/success_ep1"] == pytest.approx(0.75)
    assert weighted["all/reward_ep1"] == pytest.approx(0.75 * 10 - 0.25 * 10)
    assert weighted["all/num_meta_episodes"] == 3
