"""Samples and advantages from scripted meta-episodes, checked by hand."""

from __future__ import annotations

import pytest

from mage_core.config import Config
from mage_core.rollout.meta_episode import MetaEpisode, MetaEpisodeSpec, MetaSettings, Response
from mage_core.trainers.batch import AdvantageSettings, build_samples
from mage_core.trainers.meta_rl import meta_settings
from tests.envcases import Case

pytestmark = pytest.mark.unit

CASE = Case("kuhn_poker", "aggressive", 1)
MAGE = AdvantageSettings("differential", "gigpo", "mean_norm", 1.0, "global", "stationary", 0.95, 0.6)


def seed_dealing_king() -> int:
    """A task seed whose (replayed) deal gives the agent the K."""
    for seed in range(100):
        env = CASE.build(seed)
        env.reset()
        if env.compact_observation().startswith("K "):
            return seed
    raise AssertionError("no seed deals a K in 100 tries")


def scripted(action: str, seed: int) -> MetaEpisode:
    base = meta_settings(Config(), "kuhn_poker", 3, True)
    settings = MetaSettings(**{**base.__dict__, "restart": "same"})
    meta = MetaEpisode(MetaEpisodeSpec("kuhn_poker", CASE.opponent, 1, seed, 0), CASE.build(seed), settings,
                       encode=lambda t: [1, 2], encode_action=lambda t: [3] if t == "mePASS" else [4])
    while not meta.done:
        request = meta.request()
        choice = request.candidate_texts.index(action)
        meta.apply(request, Response(action, -0.69, choice=choice))
    return meta


def test_mage_advantages_by_hand() -> None:
    seed = seed_dealing_king()
    folder, caller = scripted("PASS", seed), scripted("BET", seed)
    # Aggressive bets every hand; with the K, folding loses 1 chip (-5), calling wins 2 (+10).
    assert [e.reward for e in folder.episodes] == [-5.0, -5.0, -5.0]
    assert [e.reward for e in caller.episodes] == [10.0, 10.0, 10.0]
    samples = build_samples([folder, caller], MAGE)
    # Differential scores d = [R0, R1-R0, R2-R1]: folder [-5, 0, 0], caller [10, 0, 0]. One decision
    # per hand, so the returns equal the scores (nothing after the last step of an episode but
    # 0.6 x the next episode's zero return). One group (same seed, opponent, seat), mean 5/6;
    # one anchor cluster (the same state every time), mean 5/6. Advantage = 2 (score - 5/6).
    expected = [2 * (s - 5 / 6) for s in (-5, 0, 0, 10, 0, 0)]
    assert [s.advantage for s in samples] == pytest.approx(expected)
    assert [s.choice for s in samples] == [0, 0, 0, 1, 1, 1]  # candidates in legal order PASS, BET
    assert all(s.candidates == [[3], [4]] and s.prompt == [1, 2] for s in samples)


def test_grpo_on_single_episode_scores() -> None:
    seed = seed_dealing_king()
    settings = AdvantageSettings("single_episode", "grpo", "mean_norm", 1.0, "global", "stationary", 0.95, 0.6)
    samples = build_samples([scripted("PASS", seed), scripted("BET", seed)], settings)
    # Scores R_k: three -5 and three +10; mean 2.5, sample std sqrt(6 * 7.5^2 / 5) = 8.2158.
    std = (6 * 7.5**2 / 5) ** 0.5
    expected = [(-5 - 2.5) / (std + 1e-6)] * 3 + [(10 - 2.5) / (std + 1e-6)] * 3
    assert [s.advantage for s in samples] == pytest.approx(expected)


def test_unfinished_meta_episodes_are_refused() -> None:
    base = meta_settings(Config(), "kuhn_poker", 3, True)
    meta = MetaEpisode(MetaEpisodeSpec("kuhn_poker", "aggressive", 1, 0, 0), CASE.build(0), base,
                       encode=lambda t: [1], encode_action=lambda t: [2])
    with pytest.raises(ValueError, match="finished"):
        build_samples([meta], MAGE)


def test_per_episode_baselines_option() -> None:
    # episode_baseline "group_and_episode": baselines (and anchor clusters) per episode index.
    # Hand 1: scores -5 (folder) and +10 (caller), mean 2.5; hands 2-3: all zero.
    seed = seed_dealing_king()
    settings = AdvantageSettings("differential", "gigpo", "mean_norm", 1.0, "global", "stationary", 0.95, 0.6,
                                 episode_baseline="group_and_episode")
    samples = build_samples([scripted("PASS", seed), scripted("BET", seed)], settings)
    expected = [2 * (-5 - 2.5), 0, 0, 2 * (10 - 2.5), 0, 0]
    assert [s.advantage for s in samples] == pytest.approx(expected)


def test_batch_scope_groups_meta_episodes_of_different_deals() -> None:
    # Two meta-episodes against the same opponent and seat, on two different task seeds that
    # both deal the K: the folder (-5 each hand) and the caller (+10 each hand).
    seeds = [s for s in range(200) if (e := CASE.build(s)).reset() is None and e.compact_observation().startswith("K ")]
    folder, caller = scripted("PASS", seeds[0]), scripted("BET", seeds[1])
    # Task scope (the paper's): each meta-episode is its own group (and cluster): the folder's
    # scores -5, 0, 0 (mean -5/3) and the caller's 10, 0, 0 (mean 10/3); both terms equal,
    # advantage = 2 (score - own mean): it compares hands, not the two ways of playing the K.
    task = [2 * (s + 5 / 3) for s in (-5, 0, 0)] + [2 * (s - 10 / 3) for s in (10, 0, 0)]
    assert [s.advantage for s in build_samples([folder, caller], MAGE)] == pytest.approx(task)
    # Batch scope: one group per (opponent, seat) -> exactly the shared-seed figures above.
    batch = AdvantageSettings(**{**MAGE.__dict__, "group_scope": "batch"})
    expected = [2 * (s - 5 / 6) for s in (-5, 0, 0, 10, 0, 0)]
    assert [s.advantage for s in build_samples([folder, caller], batch)] == pytest.approx(expected)


def test_batch_scope_draws_every_meta_episode_on_its_own() -> None:
    import numpy as np

    from mage_core.config import parse_config
    from mage_core.trainers.meta_rl import MetaRLTrainer

    cfg = parse_config({"algorithm": {"group_scope": "batch", "group_size": 4}, "train": {"groups_per_iteration": 500}})
    specs = MetaRLTrainer(cfg, None, None, None).sample_specs(np.random.default_rng(0))  # type: ignore[arg-type]
    assert len(specs) == 2000 and len({s.task_seed for s in specs}) == 2000
    share = {o: sum(s.opponent == o for s in specs) / 2000 for o in ("conservative", "aggressive", "intermediate")}
    # paper population 0.3 / 0.3 / 0.4: within 4 standard errors (sqrt(0.24 / 2000) = 0.011)
    assert share == pytest.approx({"conservative": 0.3, "aggressive": 0.3, "intermediate": 0.4}, abs=0.045)
    assert abs(sum(s.agent_seat for s in specs) / 2000 - 0.5) < 0.045


def test_final_return_with_per_situation_baselines() -> None:
    # The "final" return and "group_episode_turn" baselines (beyond the paper): the agent
    # moves first against aggressive holding the K, checks (turn 0), aggressive bets, and
    # the agent folds (-5) or calls (+10) at turn 1, in each of the 3 hands (same deal).
    case = Case("kuhn_poker", "aggressive", 0)
    seed = next(s for s in range(200) if (e := case.build(s)).reset() is None
                and e.compact_observation().startswith("K"))

    def play(second: str) -> MetaEpisode:
        base = meta_settings(Config(), "kuhn_poker", 3, True)
        meta = MetaEpisode(MetaEpisodeSpec("kuhn_poker", "aggressive", 0, seed, 0), case.build(seed),
                           MetaSettings(**{**base.__dict__, "restart": "same"}),
                           encode=lambda t: [1], encode_action=lambda t: [2] if t == "mePASS" else [3])
        while not meta.done:
            request = meta.request()
            action = "PASS" if meta.env.turn == 0 else second
            meta.apply(request, Response(action, -0.69, choice=request.candidate_texts.index(action)))
        return meta

    folder, caller = play("PASS"), play("BET")
    assert [e.reward for e in folder.episodes] == [-5.0] * 3 and [e.reward for e in caller.episodes] == [10.0] * 3
    assert [d.turn for d in caller.decisions] == [0, 1] * 3
    settings = AdvantageSettings("final", "gigpo", "mean_norm", 0.0, "global", "stationary", 0.95, 0.6,
                                 group_scope="batch", episode_score="return", episode_baseline="group_episode_turn")
    samples = build_samples([folder, caller], settings)
    # Every decision's return is its meta-episode's last hand: -5 and +10. Each (episode, turn)
    # group holds one decision of each: mean 2.5, advantages -7.5 and +7.5 (no std division).
    assert [s.advantage for s in samples] == pytest.approx([-7.5] * 6 + [7.5] * 6)
