"""The co-evolving league (``train.league``): opponents made from the policy while it trains.

Every ``train.league.every`` iterations the policy's first hand is read as a behaviour
strategy (``strategy_probes.first_hand_strategy``: tasks with ``Task.strategy_probes``, Kuhn
Poker) and the league gains its exact best response in both seats
(``league_exploiter_<iteration>``, pure) and/or the strategy itself
(``league_past_<iteration>``, P(BET) to 1/1000); the oldest members beyond ``max_members``
leave. The training population then gives the league ``share`` of its weight, split evenly
over the members, each met in either seat. Members are behaviour strategies, so the
opponents' exact analysis applies to them as to every other Kuhn opponent.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any, Sequence

from mage_core.opponents.population import Population, PopulationEntry
from mage_core.opponents.registry import OpponentSettings


class League:
    """The members (name -> P(BET) per information set, oldest first) of one training run."""

    def __init__(self, cfg: Any, game: str) -> None:
        self.cfg, self.game = cfg, game
        self.members: dict[str, dict[str, Fraction]] = {}

    def opponent_settings(self) -> OpponentSettings:
        """The configured opponents and the league's members."""
        settings = self.cfg.opponents.settings()
        if not self.members:
            return settings
        return dataclasses.replace(settings, kuhn_strategies={**settings.kuhn_strategies, **self.members})

    def due(self, iteration: int) -> bool:
        """Whether the league grows after ``iteration`` iterations."""
        every = self.cfg.train.league.every
        return bool(every) and iteration % every == 0

    def grow(self, iteration: int, strategy: Any) -> dict[str, float]:
        """Add what ``strategy`` (the policy's first hand) gives, drop the oldest beyond
        ``max_members``. Returns ``league/members`` and ``league/exploiter_value`` (what the
        new exploiter wins per hand, seats averaged: the first hand's exploitability)."""
        from mage_core.envs.kuhn_poker.analysis import best_response

        league = self.cfg.train.league
        value0, as_first = best_response([(1, strategy)], 0)
        value1, as_second = best_response([(1, strategy)], 1)
        if "exploiter" in league.add:
            self.members[f"league_exploiter_{iteration}"] = {k: Fraction(m) for k, m in {**as_first,
                                                                                           **as_second}.items()}
        if "snapshot" in league.add:
            self.members[f"league_past_{iteration}"] = {k: Fraction(p).limit_denominator(1000)
                                                        for k, p in strategy.p_bet.items()}
        while len(self.members) > league.max_members:
            del self.members[next(iter(self.members))]
        return {"league/members": float(len(self.members)), "league/exploiter_value": float(value0 + value1) / 2}

    def population(self) -> Population:
        """The training population: the configured one, the league taking ``share`` of it."""
        base = self.cfg.population.entries(self.game)
        if not self.members:
            return Population(base)
        share, total = self.cfg.train.league.share, sum(e.weight for e in base)
        entries = [PopulationEntry(e.opponent, e.weight / total * (1 - share), e.seat) for e in base]
        entries += [PopulationEntry(name, share / len(self.members), "mixed") for name in self.members]
        return Population(entries)

    def state(self) -> list[list[Any]]:
        """The league for a checkpoint (weights-only safe): [name, [[infoset, num, den], ...]]."""
        return [[name, [[key, p.numerator, p.denominator] for key, p in table.items()]]
                for name, table in self.members.items()]

    def load(self, state: Sequence[Sequence[Any]] | None) -> None:
        """Restore ``state`` (a resumed run meets the league it had)."""
        self.members = {str(name): {str(key): Fraction(int(num), int(den)) for key, num, den in table}
                        for name, table in (state or [])}
