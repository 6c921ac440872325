"""The policy's first Kuhn hand read from its scores (``trainers.probes``, ``envs/kuhn_poker/probes.py``):
every infoset reached as planned, probabilities equal to those the rollout itself
samples with, and the exact exploitability of the resulting strategy."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from mage_core.envs.kuhn_poker import probes as kuhn_probes
from mage_core.envs.kuhn_poker import second_hand
from mage_core.trainers import probes
from mage_core.trainers.probes import TrainerView
from mage_core.generation import SamplingParams
from mage_core.config import parse_config
from mage_core.envs.kuhn_poker.analysis import exploitability
from mage_core.envs.kuhn_poker.exact_greedy import fix_deals
from mage_core.policy.model import load_policy
from mage_core.rollout.meta_episode import MetaEpisodeSpec
from mage_core.rollout.runner import meta_episode_seeds
from mage_core.stages.train import build_policy, make_codec, make_generator
from mage_core.trainers.meta_rl import MetaRLTrainer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory) -> MetaRLTrainer:
    cfg = parse_config({"env": {"name": "kuhn_poker"}, "tournament": {"matches": []}})
    out: Path = tmp_path_factory.mktemp("policy")
    build_policy(cfg, out)
    model, tokenizer = load_policy(out / "policy-init")
    generator = make_generator(cfg, tokenizer, out / "policy-init", model, copy_model=False)
    return MetaRLTrainer(cfg, None, generator, make_codec(tokenizer, cfg.policy))


def test_first_hand_strategy_is_what_the_rollout_samples_from(trainer: MetaRLTrainer) -> None:
    strategy = probes.policy_strategy(trainer)
    assert sorted(strategy.p_bet) == sorted(["J", "Q", "K", "Jpb", "Qpb", "Kpb", "Jp", "Qp", "Kp", "Jb", "Qb", "Kb"])
    assert all(0 < float(p) < 1 for p in strategy.p_bet.values())  # an untrained policy, temperature 1
    # The opening bets of a suite where the agent opens are the same numbers.
    probe = parse_config({"population": {"kuhn_poker": "probe"}}).population.entries("kuhn_poker")
    opening = kuhn_probes.opening_bets(TrainerView(trainer), probe)
    assert [opening[f"all/opening_bet_{c}_ep1"] for c in "JQK"] == pytest.approx(
        [float(strategy.p_bet[c]) for c in "JQK"], abs=1e-6)  # other batches: float32 rounding
    # Play K as first player against `aggressive` (which bets after a check): where the agent
    # checked, its next decision is at Kpb, and the log-prob it sampled with is the strategy's.
    specs = [MetaEpisodeSpec("kuhn_poker", "aggressive", 0, 0, i) for i in range(24)]
    metas = trainer.build(specs, trainer.eval_settings)
    fix_deals(metas, [[(2, 0)]] * len(metas))
    sampling = SamplingParams(temperature=1.0, max_new_tokens=trainer.cfg.policy.max_new_tokens,
                              stop_token_ids=trainer.codec.stop_token_ids)
    metas = trainer.play(metas, trainer.actor(sampling), meta_episode_seeds(torch.Generator().manual_seed(3), 24))
    checked = [m for m in metas if m.decisions[0].choice == 0]  # candidates: PASS, BET
    assert checked, "no meta-episode checked K first"
    for meta in metas:
        first = meta.decisions[0]
        p_first = float(strategy.p_bet["K"]) if first.choice == 1 else 1 - float(strategy.p_bet["K"])
        assert math.exp(first.logprob) == pytest.approx(p_first, rel=1e-5)
    for meta in checked:
        second = meta.decisions[1]
        p_second = float(strategy.p_bet["Kpb"]) if second.choice == 1 else 1 - float(strategy.p_bet["Kpb"])
        assert math.exp(second.logprob) == pytest.approx(p_second, rel=1e-5)


def test_first_hand_exploitability_is_exact_for_the_read_strategy(trainer: MetaRLTrainer) -> None:
    metrics = probes.strategy_metrics(trainer)
    strategy = probes.policy_strategy(trainer)
    assert metrics["eval/first_hand/exploitability"] == float(exploitability(strategy))
    assert metrics["eval/first_hand/exploitability"] > 0  # an untrained policy is no equilibrium
    assert metrics["eval/first_hand/p_bet_Kb"] == float(strategy.p_bet["Kb"])


# The probe pair, the agent first to act, after hand 1 where the agent bet J: the tight caller
# folds Q ("J: bp", reveals it), the station calls Q ("J: bb, opponent showed Q", reveals it),
# both call K ("J: bb, opponent showed K", posterior 1/2 each). Best responses for one hand,
# counted by hand: against the tight caller bet J (-1/2 against -1 for checking), check Q (0
# against -1/2), check K (3/2 against 1); against the station check J (-1 against -2), Q is a
# tie (0 either way), bet K (2 against 3/2). Unrevealed, hand 2 is not the last of K = 3 and a
# probe may still pay in hand 3: no Bayes-optimal move is named there.
BAYES_AFTER = {"tight_caller": {"J": 1, "Q": 0, "K": 0}, "calling_station": {"J": 0, "Q": None, "K": 1},
               None: {"J": None, "Q": None, "K": None}}


def test_second_hand_bets_views_posteriors_and_best_responses(trainer: MetaRLTrainer) -> None:
    entries = parse_config({"population": {"kuhn_poker": "probe"}}).population.entries("kuhn_poker")
    rows = second_hand.second_hand_bets(TrainerView(trainer), entries)
    by_view = {}
    for row in rows:
        by_view.setdefault(row["view"], []).append(row)
    assert all(len(v) == 3 for v in by_view.values())  # hand 2 dealt each card (fresh deals)
    # The three views of a J bet, with their exact probability and posterior.
    assert by_view["J: bp"][0]["posterior"] == {"tight_caller": 1.0}
    # P(view): opponent 1/2 x deal 1/6 x the hand-1 play (bet, check-fold, check-call) 1/3.
    assert by_view["J: bp"][0]["p_view"] == pytest.approx(1 / 36)
    assert by_view["J: bb, opponent showed Q"][0]["posterior"] == {"calling_station": 1.0}
    assert by_view["J: bb, opponent showed K"][0]["posterior"] == pytest.approx(
        {"calling_station": 0.5, "tight_caller": 0.5})
    assert by_view["J: bb, opponent showed K"][0]["p_view"] == pytest.approx(2 / 36)
    # Checking hand 1 never tells them apart (they open alike after a check). Views, counted by
    # hand: a bet gives 3 per card (J: bp, bb showing Q, bb showing K; Q: bp, bb showing J or K;
    # K: bp, bb showing J or Q) and so does a check (J: pbp, pbb showing Q or K; Q: pp showing J,
    # pbp, pbb showing K; K: pp showing J, pbp, pbb showing Q): 18.
    assert all(r["posterior"] == pytest.approx({"calling_station": 0.5, "tight_caller": 0.5})
               for r in rows if r["view"][3] == "p")
    assert len(by_view) == 18
    assert by_view["K: bp"][0]["posterior"] == {"tight_caller": 1.0}  # it folds J and Q alike
    assert by_view["K: bp"][0]["p_view"] == pytest.approx(2 / 36)
    # Q checked and checked behind by both (their J does not bluff): both check plays reach it.
    assert by_view["Q: pp, opponent showed J"][0]["p_view"] == pytest.approx(2 * 2 / 36)
    assert sum(per_card[0]["p_view"] for per_card in by_view.values()) == pytest.approx(1.0)
    for view, per_card in by_view.items():
        revealed = [n for n, p in per_card[0]["posterior"].items() if p == 1.0]
        expected = BAYES_AFTER[revealed[0] if revealed else None]
        for row in per_card:
            assert row["bayes_bet"] == expected[row["card"]], (view, row["card"])
            assert row["note"] == ("tie" if row["best_bet"] is None else "" if revealed else "later hands")
            assert 0 < row["p_bet"] < 1  # an untrained policy at temperature 1


def test_second_hand_bets_are_what_the_rollout_samples_from(trainer: MetaRLTrainer) -> None:
    entries = parse_config({"population": {"kuhn_poker": "probe"}}).population.entries("kuhn_poker")
    rows = {(r["view"], r["card"]): r["p_bet"] for r in second_hand.second_hand_bets(TrainerView(trainer), entries)}
    # Sampled play against the tight caller, deals (J, Q) then (K, J): where the agent bet J,
    # the caller folded, and the agent's first hand-2 move was sampled from P(BET | "J: bp", K).
    specs = [MetaEpisodeSpec("kuhn_poker", "tight_caller", 0, 0, i) for i in range(24)]
    metas = trainer.build(specs, trainer.eval_settings)
    fix_deals(metas, [[(0, 1), (2, 0)]] * len(metas))
    sampling = SamplingParams(temperature=1.0, max_new_tokens=trainer.cfg.policy.max_new_tokens,
                              stop_token_ids=trainer.codec.stop_token_ids)
    metas = trainer.play(metas, trainer.actor(sampling), meta_episode_seeds(torch.Generator().manual_seed(5), 24))
    bet_first = [m for m in metas if m.decisions[0].choice == 1]
    assert bet_first, "no meta-episode bet J first"
    p = rows[("J: bp", "K")]
    for meta in bet_first:
        second = next(d for d in meta.decisions if d.episode == 1 and d.phase == "play")
        assert math.exp(second.logprob) == pytest.approx(p if second.choice == 1 else 1 - p, rel=1e-5)


def test_second_hand_metrics_weigh_views_by_probability() -> None:
    rows = [
        {"view": "a", "card": "J", "p_view": 0.1, "posterior": {"x": 1.0}, "p_bet": 0.9, "bayes_bet": 1},
        {"view": "b", "card": "J", "p_view": 0.3, "posterior": {"x": 1.0}, "p_bet": 0.5, "bayes_bet": 0},
        {"view": "c", "card": "J", "p_view": 0.2, "posterior": {"x": 0.5, "y": 0.5}, "p_bet": 0.2, "bayes_bet": None},
        {"view": "d", "card": "K", "p_view": 0.4, "posterior": {"y": 1.0}, "p_bet": 0.7, "bayes_bet": 1},
    ]
    metrics = second_hand.second_hand_metrics(rows)
    assert metrics["all/bet_J_ep2_after_x"] == pytest.approx((0.1 * 0.9 + 0.3 * 0.5) / 0.4)
    assert metrics["all/bet_J_ep2_unrevealed"] == pytest.approx(0.2)
    assert metrics["all/bet_K_ep2_after_y"] == pytest.approx(0.7)
    # Agreement (ties left out): a bets (0.9) where betting is best, b does not bet (0.5 is not
    # above 1/2) where checking is best, d bets where betting is best: all three agree.
    assert metrics["all/ep2_bayes_agreement"] == pytest.approx(1.0)
    rows[1]["p_bet"] = 0.8  # now b bets where checking is best
    assert second_hand.second_hand_metrics(rows)["all/ep2_bayes_agreement"] == pytest.approx(0.5 / 0.8)
    assert second_hand.second_hand_metrics([]) == {}
    assert second_hand.second_hand_metrics(None) == {}


def test_second_hand_is_the_last_hand_at_k2(tmp_path: Path) -> None:
    """With K = 2 hand 2 is the last: the posterior's one-hand best response is Bayes-optimal
    everywhere, unrevealed views included (check J, -1 against -5/4; check Q, 0 against -1/4;
    K a tie at 3/2; counted by hand above)."""
    cfg = parse_config({"env": {"name": "kuhn_poker"}, "tournament": {"matches": []},
                        "algorithm": {"episodes_per_meta_episode": 2}, "population": {"kuhn_poker": "probe"}})
    build_policy(cfg, tmp_path)
    model, tokenizer = load_policy(tmp_path / "policy-init")
    generator = make_generator(cfg, tokenizer, tmp_path / "policy-init", model, copy_model=False)
    trainer = MetaRLTrainer(cfg, None, generator, make_codec(tokenizer, cfg.policy))
    rows = second_hand.second_hand_bets(TrainerView(trainer), cfg.population.entries("kuhn_poker"))
    unrevealed = [r for r in rows if max(r["posterior"].values()) < 1]
    assert unrevealed and all(r["bayes_bet"] == BAYES_AFTER_K2[r["card"]] for r in unrevealed)


BAYES_AFTER_K2 = {"J": 0, "Q": 0, "K": None}


def test_second_hand_names_what_it_cannot_read(trainer: MetaRLTrainer, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    probe = parse_config({"population": {"kuhn_poker": "probe"}}).population.entries("kuhn_poker")
    assert second_hand.second_hand_unreadable(TrainerView(trainer), probe) is None
    settings = trainer.eval_settings
    cases = [
        ({"retrieval": "notes"}, probe, r"^method: a 'notes' retrieval memory \(A-MEM, Memento\) is shared"),
        ({"reflections": "generated"}, probe, r"^policy.reflections: generated reflections"),
        ({"num_episodes": 1}, probe, r"^algorithm.episodes_per_meta_episode: 1 hand\(s\)"),
        ({}, parse_config({"population": {"kuhn_poker": "held_out"}}).population.entries("kuhn_poker"),
         r"^population.kuhn_poker: 'cfr' plays stochastically where the agent acts first"),
    ]
    for change, entries, reason in cases:
        monkeypatch.setattr(trainer, "eval_settings", replace(settings, **change))
        assert re.match(reason, second_hand.second_hand_unreadable(TrainerView(trainer), entries) or ""), change
        assert second_hand.second_hand_bets(TrainerView(trainer), entries) is None
    monkeypatch.setattr(trainer, "eval_settings", settings)


def test_second_hand_stops_where_the_environment_plays_another_hand_1(trainer: MetaRLTrainer,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulated hand 1 is checked against the environment's: simulate the tight caller
    as the calling station (it calls where the other folds) and the reading stops, naming it."""
    probe = parse_config({"population": {"kuhn_poker": "probe"}}).population.entries("kuhn_poker")
    suite = second_hand._second_hand_suite

    def swapped(*args: object) -> object:
        weights, strategies = suite(*args)
        return weights, {**strategies, "tight_caller": strategies["calling_station"]}

    monkeypatch.setattr(second_hand, "_second_hand_suite", swapped)
    with pytest.raises(RuntimeError, match=r"against 'tight_caller', deal \(\d, \d\), the environment's hand 1"):
        second_hand.second_hand_bets(TrainerView(trainer), probe)


def test_second_hand_replayed_deal_and_early_stop_name_no_bayes_move(trainer: MetaRLTrainer,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Replayed deals: hand 2 is hand 1's deal again (one card a view), and the posterior's
    best response, which assumes a fresh deal, is not named Bayes-optimal. Early stop: a view
    whose hand 1 the agent won has no hand 2; the rest name no Bayes move at K = 3."""
    from dataclasses import replace

    probe = parse_config({"population": {"kuhn_poker": "probe"}}).population.entries("kuhn_poker")
    monkeypatch.setattr(trainer, "eval_settings", replace(trainer.eval_settings, restart="same"))
    rows = second_hand.second_hand_bets(TrainerView(trainer), probe)
    assert len(rows) == 18 and all(r["card"] == r["view"][0] for r in rows)
    assert all(r["bayes_bet"] is None and r["note"] in {"restart same", "tie"} for r in rows)
    monkeypatch.setattr(trainer, "eval_settings", replace(trainer.eval_settings, restart="fresh", early_stop=True))
    rows = second_hand.second_hand_bets(TrainerView(trainer), probe)
    views = {r["view"] for r in rows}
    assert "J: bp" not in views and "K: bp" not in views  # won: the meta-episode ends
    assert "J: bb, opponent showed Q" in views  # lost: hand 2 is played
    assert rows and all(r["bayes_bet"] is None and r["note"] in {"early stop", "tie"} for r in rows)


def test_mage_kuhn_probe_writes_the_views_and_names_what_it_cannot_read(tmp_path: Path) -> None:
    import csv

    from mage_core.config import ConfigError
    from mage_core.stages import kuhn_probe

    params = Path(__file__).resolve().parents[2] / "params.yaml"
    cfg = parse_config({"env": {"name": "kuhn_poker"}, "tournament": {"matches": []}})
    build_policy(cfg, tmp_path)
    policy = tmp_path / "policy-init"
    out = tmp_path / "probe" / "rows.csv"
    assert kuhn_probe.run(str(params), str(policy), str(out), ["env.name=kuhn_poker",
                                                              "population.kuhn_poker=probe"]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 18 * 3 and {r["card"] for r in rows} == {"J", "Q", "K"}
    with pytest.raises(ConfigError, match="population.kuhn_poker: '.+' plays stochastically"):
        kuhn_probe.run(str(params), str(policy), None, ["env.name=kuhn_poker", "population.kuhn_poker=diverse"])
    with pytest.raises(ConfigError, match="--policy: .* holds no model"):
        kuhn_probe.run(str(params), str(tmp_path), None, ["env.name=kuhn_poker", "population.kuhn_poker=probe"])
    with pytest.raises(ConfigError, match="env.name: `mage kuhn probe` reads a Kuhn Poker policy"):
        kuhn_probe.run(str(params), str(policy), None, ["env.name=tic_tac_toe"])
