"""Meta-episodes without a model: the schedule, memory, restart and records."""

from __future__ import annotations

import numpy as np
import pytest

from mage_core.config import Config
from mage_core.envs.base import Outcome
from mage_core.rollout.meta_episode import MetaEpisode, MetaEpisodeSpec, MetaSettings, Response
from mage_core.trainers.meta_rl import meta_settings
from tests.envcases import Case

pytestmark = pytest.mark.unit


def settings(**overrides) -> MetaSettings:
    base = meta_settings(Config(), "kuhn_poker", 3, True)
    return MetaSettings(**{**base.__dict__, **overrides})


def build(case: Case, s: MetaSettings, seed: int = 0) -> MetaEpisode:
    spec = MetaEpisodeSpec(case.game, case.opponent, case.agent_seat, seed, 0)
    return MetaEpisode(spec, case.build(seed), s, encode=lambda t: [len(t)], encode_action=lambda t: [len(t)])


def play(meta: MetaEpisode, pick) -> list[str]:
    """Drive with a scripted choice; returns the prompts seen."""
    prompts = []
    while not meta.done:
        request = meta.request()
        prompts.append(request.prompt)
        if request.phase == "reflect":
            meta.apply(request, Response("<remark>bet more with K</remark>", -1.0, token_ids=[1, 2, 3]))
        elif request.candidate_texts is not None:
            choice = pick(request.candidate_texts)
            meta.apply(request, Response(request.candidate_texts[choice], -0.7, choice=choice))
        else:
            meta.apply(request, Response(f"<action>{pick(meta.env.legal_actions())}</action>", -0.5,
                                         token_ids=[9]))
    return prompts


def test_kuhn_same_restart_replays_the_deal_and_builds_history() -> None:
    meta = build(Case("kuhn_poker", "aggressive", 1), settings(restart="same"), seed=3)
    prompts = play(meta, lambda texts: texts.index("PASS"))
    assert len(meta.episodes) == 3
    # Aggressive always bets first; passing folds every hand: -1 chip = -5 reward each time.
    assert [e.reward for e in meta.episodes] == [-5.0, -5.0, -5.0]
    assert [e.outcome for e in meta.episodes] == [Outcome.LOSS] * 3
    card = prompts[0].split()[3]
    # One token per fact; the decision is read at the last fact (the opponent's bet).
    assert prompts == [
        f"kuhn second ep1 {card} opBET",
        f"kuhn second ep1 {card} opBET mePASS fold lost1 ep2 {card} opBET",
        f"kuhn second ep1 {card} opBET mePASS fold lost1 ep2 {card} opBET mePASS fold lost1 ep3 {card} opBET",
    ]
    assert [d.episode for d in meta.decisions] == [0, 1, 2]
    assert all(d.phase == "play" and not d.invalid for d in meta.decisions)


def hand_cards(restart: str, seed: int) -> list[str]:
    meta = build(Case("kuhn_poker", "conservative", 0), settings(restart=restart), seed=seed)
    play(meta, lambda texts: 0)
    return [m.trajectory.split()[0] for m in meta.context.memory]  # a final compact state starts with the card


def test_fresh_restart_deals_new_hands_and_same_replays() -> None:
    fresh = [hand_cards("fresh", seed) for seed in range(10)]
    same = [hand_cards("same", seed) for seed in range(10)]
    assert all(len(c) == 3 for c in fresh + same)
    assert all(len(set(c)) == 1 for c in same)
    # Ten meta-episodes of three fresh deals: all-equal cards each time has probability (1/9)^10.
    assert any(len(set(c)) > 1 for c in fresh)


def test_early_stop_ends_after_a_win() -> None:
    # Against aggressive, BET with any card: the first hand that ends in a win stops the meta-episode.
    meta = build(Case("kuhn_poker", "aggressive", 1), settings(early_stop=True), seed=1)
    play(meta, lambda texts: texts.index("BET"))
    outcomes = [e.outcome for e in meta.episodes]
    assert Outcome.WIN not in outcomes[:-1]
    assert outcomes[-1] is Outcome.WIN or len(outcomes) == 3


def test_generated_reflections_are_samples_and_enter_memory() -> None:
    s = settings(action_mode="free", reflections="generated", memory="reflection_only", style="paper")
    meta = build(Case("kuhn_poker", "intermediate", 0), s, seed=2)
    prompts = play(meta, lambda legal: legal[0])
    phases = [d.phase for d in meta.decisions]
    assert phases.count("reflect") == 2
    reflect = [d for d in meta.decisions if d.phase == "reflect"]
    assert [d.episode for d in reflect] == [1, 2]  # a reflect turn belongs to the next episode
    assert all(d.anchor == "reflection" for d in reflect)
    assert "Your reflection after trial #1:\nbet more with K" in prompts[-1]
    assert "Your card" in prompts[-1]  # paper style shows the full observation


def test_missing_remark_is_an_invalid_reflection() -> None:
    s = settings(action_mode="free", reflections="generated", memory="reflection_only", style="paper")
    meta = build(Case("kuhn_poker", "intermediate", 0), s, seed=2)
    while not meta.done:
        request = meta.request()
        text = "no tags" if request.phase == "reflect" else "<action>PASS</action>"
        meta.apply(request, Response(text, 0.0, token_ids=[1]))
    reflect = [d for d in meta.decisions if d.phase == "reflect"]
    assert all(d.invalid and d.penalty == pytest.approx(0.5) for d in reflect)


def test_invalid_free_action_counts_a_turn_and_is_penalized() -> None:
    s = settings(action_mode="free")
    meta = build(Case("kuhn_poker", "conservative", 0), s, seed=0)
    request = meta.request()
    meta.apply(request, Response("I fold?", -2.0, token_ids=[1, 2]))
    d = meta.decisions[0]
    assert d.invalid and d.penalty == pytest.approx(0.5) and d.task_reward == 0.0
    assert meta.env.turn == 1 and not meta.env.done


def test_stalling_to_the_turn_limit_costs_more_than_folding() -> None:
    # Issue 12: six invalid turns used to cost 6 x 0.5 = 3 against 5 for a fold. Now the hand
    # the turn limit ends pays -2 chips x 5 = -10 on its last turn, plus the six penalties.
    meta = build(Case("kuhn_poker", "aggressive", 0), settings(action_mode="free", num_episodes=1), seed=0)
    while not meta.done:
        meta.apply(meta.request(), Response("I stall", 0.0, token_ids=[1]))
    assert [d.task_reward for d in meta.decisions] == [0.0] * 5 + [-10.0]
    assert [d.penalty for d in meta.decisions] == pytest.approx([0.5] * 6)
    (episode,) = meta.episodes
    assert (episode.reward, episode.outcome, episode.num_invalid) == (-10.0, Outcome.TIMEOUT, 6)
    paid = sum(d.task_reward - d.penalty for d in meta.decisions)
    assert paid == pytest.approx(-13.0) and paid < -5.0  # a fold pays -5


def test_ttt_and_sokoban_meta_episodes_run_to_the_end() -> None:
    rng = np.random.default_rng(0)
    for case in (Case("tic_tac_toe", "pattern-corners", 0), Case("sokoban", None, 0)):
        s = meta_settings(Config(), case.game, 3, True)
        meta = build(case, s, seed=4)
        play(meta, lambda texts: int(rng.integers(len(texts))))
        assert len(meta.episodes) == 3
        assert all(d.candidate_ids is not None for d in meta.decisions)


def test_attempts_without_memory_read_like_lone_first_episodes() -> None:
    # Single-episode baselines are evaluated over K attempts without reflection:
    # each attempt's prompt must look exactly like training's single episode.
    s = meta_settings(Config(), "kuhn_poker", 3, reflect=False)
    assert s.memory == "none"
    meta = build(Case("kuhn_poker", "aggressive", 1), MetaSettings(**{**s.__dict__, "restart": "same"}), seed=3)
    prompts = play(meta, lambda texts: texts.index("PASS"))
    assert len(meta.episodes) == 3
    assert len(set(prompts)) == 1 and prompts[0].startswith("kuhn second ep1 ")
    paper = MetaSettings(**{**s.__dict__, "style": "paper", "restart": "same"})
    prompts = play(build(Case("kuhn_poker", "aggressive", 1), paper, seed=3), lambda texts: texts.index("PASS"))
    assert all("# Current trial #1 of 1" in p and "Earlier trials" not in p for p in prompts)
