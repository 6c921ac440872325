"""What a policy's first Kuhn hand reveals beyond its chips (the task's ``TaskProbes``).

- ``first_hand_bets``: the policy's probability of BET at one decision of the first hand;
- ``opening_bets``: its opening bet per card where it acts first (does it probe?);
- ``first_hand_strategy``: its whole first hand as a behaviour strategy (what the league,
  ``train.league``, is built from), and ``first_hand_metrics`` that strategy's exact
  exploitability;
- ``suite_probes``: one evaluation suite's figures (the opening bets, and the hand-2 bets
  after hand 1 of ``second_hand``).

Each reads the policy through a ``envs.policy_view.PolicyView`` (the trainer's side passes
one in: the policy lives above the games), from its candidate scores at the evaluation
temperature: constrained actions only.
"""

from __future__ import annotations

from typing import Any, Sequence

from mage_core.envs.kuhn_poker.exact_greedy import fix_deals
from mage_core.envs.kuhn_poker.rules import BET, CARD_LETTERS, DEALS, MOVE_NAMES, PASS
from mage_core.envs.kuhn_poker.second_hand import second_hand_bets, second_hand_metrics
from mage_core.envs.policy_view import PolicyView
from mage_core.opponents.kuhn import BehaviourStrategy
from mage_core.opponents.population import Population, PopulationEntry


def first_hand_bets(policy: PolicyView, cases: Sequence[tuple[str, int, tuple[int, int], bool]]) -> list[float]:
    """The policy's probability of BET at one decision of the FIRST hand per case
    (opponent, agent seat, deal, agent passed first): the deal is fixed, the agent passes
    first where asked, and the opponent plays its own (deterministic, for the cases to reach
    their infoset) move. Read from the candidate scores at the evaluation temperature: no
    sampling noise. The first hand has no history, so this is the policy before it has met
    anyone."""
    metas = policy.meta_episodes([(opponent, seat) for opponent, seat, _, _ in cases])
    fix_deals(metas, [[deal] for _, _, deal, _ in cases])
    requests = []
    for meta, (_, _, _, passed) in zip(metas, cases):
        request = meta.request()
        if passed:  # the agent's PASS; the opponent answers before the next request
            policy.force(meta, request, MOVE_NAMES[PASS])
            request = meta.request()
        requests.append(request)
    return policy.probabilities(requests, MOVE_NAMES[BET])


def opening_bets(policy: PolicyView, entries: Sequence[PopulationEntry]) -> dict[str, float]:
    """With the agent first to act: the policy's probability of betting its first decision of
    the FIRST hand with each card, averaged over the suite's opponents it meets in that seat
    (``all/opening_bet_{J,Q,K}_ep1``).

    Against the exploration pair (preset ``probe``) the Bayes-optimal agent
    bets every card there (the answer to a bet is what tells the two apart)
    while "play fixed, then respond" never bets J or Q (``analysis``).
    Constrained actions only (empty otherwise, and for suites where the agent
    never opens)."""
    if policy.cfg.policy.action_mode != "constrained":
        return {}
    pairs = [(name, p) for (name, seat), p in sorted(Population(list(entries)).probabilities().items())
             if seat == 0 and p > 0]
    if not pairs:
        return {}
    deals = [next(d for d in DEALS if d[0] == card) for card in range(3)]
    bets = first_hand_bets(policy, [(name, 0, deal, False) for name, _ in pairs for deal in deals])
    total = sum(p for _, p in pairs)
    out = {f"all/opening_bet_{CARD_LETTERS[card]}_ep1": 0.0 for card in range(3)}
    for i, bet in enumerate(bets):
        out[f"all/opening_bet_{CARD_LETTERS[i % 3]}_ep1"] += pairs[i // 3][1] / total * bet
    return out


def first_hand_strategy(policy: PolicyView) -> BehaviourStrategy | None:
    """The policy's first hand as a behaviour strategy (P(BET) at each of the 12 information
    sets, ``first_hand_bets``), or None when it cannot be read (free-text actions). Each
    infoset is reached with a built-in deterministic opponent: ``aggressive`` bets every card
    (the agent's answers to a bet), ``conservative`` checks J and Q (its turn after a check)."""
    if policy.cfg.policy.action_mode != "constrained":
        return None
    cases, keys = [], []
    for card in range(3):
        other = 0 if card != 0 else 1  # the opponent holds J, or Q when the agent has J
        cases += [("aggressive", 0, (card, other), False), ("aggressive", 0, (card, other), True),
                  ("conservative", 1, (other, card), False), ("aggressive", 1, (other, card), False)]
        letter = CARD_LETTERS[card]
        keys += [letter, f"{letter}pb", f"{letter}p", f"{letter}b"]
    bets = first_hand_bets(policy, cases)
    return BehaviourStrategy("policy (first hand)", dict(zip(keys, bets)))


def first_hand_metrics(strategy: BehaviourStrategy) -> dict[str, float]:
    """``eval/first_hand/exploitability``: what a best responder wins per hand, seats
    averaged, from the policy's first-hand strategy (exact for that strategy,
    ``analysis.exploitability``; 0 at a Nash equilibrium, whose value to the first player is
    -1/18), and ``eval/first_hand/p_bet_<infoset>``."""
    from mage_core.envs.kuhn_poker.analysis import exploitability

    out = {"eval/first_hand/exploitability": float(exploitability(strategy))}
    out.update({f"eval/first_hand/p_bet_{key}": float(p) for key, p in strategy.p_bet.items()})
    return out


def suite_probes(policy: PolicyView, entries: Sequence[PopulationEntry]) -> dict[str, Any]:
    """One evaluation suite's probes: the opening bets (does it probe?), then the hand-2
    opening bets after hand 1 (does hand 2 use what hand 1 showed? suites of deterministic
    opponents, K >= 2: ``second_hand``)."""
    return {**opening_bets(policy, entries), **second_hand_metrics(second_hand_bets(policy, entries))}
