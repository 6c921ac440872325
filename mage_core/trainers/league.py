"""The co-evolving league (``train.league``): opponents made from the policy while it trains.

Every ``train.league.every`` iterations the policy is read as a strategy of its game
(``trainers.probes.policy_strategy``: tasks with ``Task.strategy_probes``, Kuhn Poker's first
hand) and the league gains what the task makes of it (``TaskProbes.league_members``: Kuhn's
exact best response in both seats, ``league_exploiter_<iteration>``, and/or the strategy
itself, ``league_past_<iteration>``: ``envs/kuhn_poker/league.py``); the oldest members beyond
``max_members`` leave. The training population then gives the league ``share`` of its weight,
split evenly over the members, each met in either seat.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Sequence

from mage_core.envs.registry import resolve, task
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
        return resolve(self._probes().league_opponents)(settings, self.members)

    def due(self, iteration: int) -> bool:
        """Whether the league grows after ``iteration`` iterations."""
        every = self.cfg.train.league.every
        return bool(every) and iteration % every == 0

    def grow(self, iteration: int, strategy: Any) -> dict[str, float]:
        """Add what ``strategy`` (the policy's, ``probes.policy_strategy``) gives, drop the
        oldest beyond ``max_members``. Returns ``league/members`` and ``league/exploiter_value``
        (what the new exploiter wins per hand, seats averaged: the first hand's
        exploitability)."""
        league = self.cfg.train.league
        members, value = resolve(self._probes().league_members)(strategy, league.add, iteration)
        for name, table in members.items():
            self.members[name] = table
        while len(self.members) > league.max_members:
            del self.members[next(iter(self.members))]
        return {"league/members": float(len(self.members)), "league/exploiter_value": value}

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

    def _probes(self) -> Any:
        probes = task(self.game).strategy_probes
        if probes is None:  # config refuses train.league for such a task (Config._league_plays_kuhn)
            raise ValueError(f"{self.game} declares no strategy probes: it has no league")
        return probes
