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


def test_early_stopped_meta_episodes_count_at_every_later_index() -> None:
    # Early stop on: the first meta-episode won episode 1 and stopped; the second lost
    # three times; the third lost, won episode 2 and stopped. Per-episode figures are
    # over all three: a stopped one counts as its winning episode from then on.
    m = summarize([finished("a", 0, [W], [10]), finished("a", 0, [L, L, L], [-10] * 3),
                   finished("a", 0, [L, W], [-10, 10])], 3)
    assert [m[f"all/success_ep{k}"] for k in (1, 2, 3)] == pytest.approx([1 / 3, 2 / 3, 2 / 3])
    assert [m[f"all/reward_ep{k}"] for k in (1, 2, 3)] == pytest.approx([-10 / 3, 10 / 3, 10 / 3])
    assert [m[f"all/pass_at_{k}"] for k in (1, 2, 3)] == pytest.approx([1 / 3, 2 / 3, 2 / 3])
    assert m["all/draw_ep3"] == 0.0 and m["a/first/num_meta_episodes"] == 3
    # When no meta-episode reaches episode 3, its keys are still there.
    early = summarize([finished("a", 0, [W], [10]), finished("a", 0, [L, W], [-10, 10])], 3)
    assert early["all/success_ep3"] == 1.0 and early["all/reward_ep3"] == 10.0


def test_without_early_stop_every_index_averages_the_played_episodes() -> None:
    # Early stop off: all K episodes played; a win need not repeat.
    m = summarize([finished("a", 0, [W, L, W], [10, -10, 10]), finished("a", 0, [L, L, D], [-10, -10, 0])], 3)
    assert [m[f"all/success_ep{k}"] for k in (1, 2, 3)] == pytest.approx([0.5, 0.0, 0.5])
    assert [m[f"all/reward_ep{k}"] for k in (1, 2, 3)] == pytest.approx([0.0, -10.0, 5.0])
    assert m["all/draw_ep3"] == 0.5 and m["all/pass_at_2"] == 0.5


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


@pytest.mark.parametrize("game", ["kuhn_poker", "tic_tac_toe"])
def test_selection_and_report_sets_share_no_task_seed(game: str) -> None:
    # (The seeded single-agent tasks' sets are apart in content, a stronger check:
    # tests/unit/test_task_sets.py.)
    # Selection vs report (issue 12): the set that picks best/ (evaluation.selection_seed)
    # and every report suite of `mage evaluate` (evaluation.seed) are disjoint, built by
    # the real spec builders at the default seeds and sizes far above the CPU default's.
    from mage_core.config import parse_config
    from mage_core.evaluation.meta_eval import evaluation_specs
    from mage_core.evaluation.suites import suite_seed, suites_for

    cfg = parse_config({"env": {"name": game}})
    e = cfg.evaluation
    in_domain = suites_for(cfg, "in_domain")[0]
    selection = {s.task_seed for s in evaluation_specs(game, list(in_domain.entries), 5000,
                                                       suite_seed(e.selection_seed, in_domain.name))}
    for suite in suites_for(cfg, "all"):
        report = {s.task_seed for s in evaluation_specs(game, list(suite.entries), 5000, suite_seed(e.seed, suite.name))}
        assert selection.isdisjoint(report), suite.name
        assert all(0 <= seed < 2**62 for seed in report)


def test_selection_seed_must_differ_from_the_report_seed() -> None:
    from mage_core.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match="selection_seed must differ"):
        parse_config({"evaluation": {"seed": 7, "selection_seed": 7}})
