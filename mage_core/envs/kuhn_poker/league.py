"""What the co-evolving league (``train.league``) adds at Kuhn Poker (the task's
``TaskProbes.league_members`` and ``league_opponents``).

From the policy's first hand read as a behaviour strategy (``probes.first_hand_strategy``):
its exact best response in both seats (``league_exploiter_<iteration>``, pure) and/or the
strategy itself (``league_past_<iteration>``, P(BET) to 1/1000). Members are behaviour
strategies (P(BET) per information set), met by name as user-defined Kuhn strategies, so the
opponents' exact analysis applies to them as to every other Kuhn opponent. The league itself
(its members, the population share, checkpoints) is ``mage_core.trainers.league``.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Mapping, Sequence

from mage_core.envs.kuhn_poker.analysis import best_response
from mage_core.opponents.kuhn import BehaviourStrategy
from mage_core.opponents.registry import OpponentSettings


def league_members(strategy: BehaviourStrategy, add: Sequence[str], iteration: int
                   ) -> tuple[dict[str, dict[str, Fraction]], float]:
    """The members ``add`` asks for (``exploiter``, ``snapshot``), oldest first, and what the
    exploiter wins per hand, seats averaged (the first hand's exploitability)."""
    value0, as_first = best_response([(1, strategy)], 0)
    value1, as_second = best_response([(1, strategy)], 1)
    members: dict[str, dict[str, Fraction]] = {}
    if "exploiter" in add:
        members[f"league_exploiter_{iteration}"] = {k: Fraction(m) for k, m in {**as_first, **as_second}.items()}
    if "snapshot" in add:
        members[f"league_past_{iteration}"] = {k: Fraction(p).limit_denominator(1000)
                                               for k, p in strategy.p_bet.items()}
    return members, float(value0 + value1) / 2


def league_opponents(settings: OpponentSettings, members: Mapping[str, Mapping[str, Fraction]]) -> OpponentSettings:
    """``settings`` with the league's members among the Kuhn strategies, playable by name."""
    return dataclasses.replace(settings, kuhn_strategies={**settings.kuhn_strategies, **members})
