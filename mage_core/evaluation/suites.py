"""Evaluation suites: fixed sets of meta-episodes, in-domain and out-of-domain.

docs/method.md section 8: the in-domain suite is the training population; the
out-of-domain suites come from ``evaluation.ood`` in params.yaml (Tic-Tac-Toe
vs MCTS-1000, Kuhn vs sampled CFR and, named apart, argmax CFR, Sokoban with 1
and 3 boxes after training on 2, WebShop's unseen categories). Every suite is fixed by seed: the in-domain
suite uses its base seed itself (``evaluation.seed`` for the report suites of
``mage evaluate``; training-time evaluation plays the same suite from
``evaluation.selection_seed``, a set of other task seeds, so the set that picks
``best/`` is never the set a figure is reported on), each other suite a seed
derived from its name, so adding or reordering suites changes no other suite.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

import numpy as np

from mage_core.envs.registry import task
from mage_core.opponents.population import Population, PopulationEntry

IN_DOMAIN = "in_domain"
OOD_PREFIX = "ood_"
Which = Literal["in_domain", "ood", "all"]
WHICH = ("in_domain", "ood", "all")


@dataclass(frozen=True)
class Suite:
    name: str  # "in_domain" or "ood_<name>"
    game: str
    entries: tuple[PopulationEntry, ...] = ()  # empty for single-agent tasks
    env_overrides: Mapping[str, Any] = field(default_factory=dict)  # e.g. {"num_boxes": 1}

    def weights(self) -> dict[tuple[str, int], float] | None:
        """Population probability of each (opponent, seat): what the ``all`` figures average over."""
        return Population(list(self.entries)).probabilities() if self.entries else None


def suite_seed(base_seed: int, name: str) -> int:
    """``base_seed`` for the in-domain suite, a stable derived seed for the others."""
    if name == IN_DOMAIN:
        return base_seed
    return int(np.random.SeedSequence([base_seed, zlib.crc32(name.encode())]).generate_state(1)[0])


def suites_for(cfg: Any, which: Which = "all") -> list[Suite]:
    """The suites of ``cfg.env.name``: in-domain, out-of-domain, or both (in that order)."""
    if which not in WHICH:
        raise ValueError(f"unknown suite selection {which!r}; choose one of {', '.join(WHICH)}")
    game = cfg.env.name
    spec = task(game)
    out: list[Suite] = []
    if which in ("in_domain", "all"):
        entries = tuple(cfg.population.entries(game)) if spec.two_player else ()
        out.append(Suite(IN_DOMAIN, game, entries, dict(spec.in_domain_params)))
    if which in ("ood", "all"):
        ood = cfg.evaluation.ood
        for name, ood_spec in getattr(ood, game).items():
            if spec.ood_param is not None:  # a single-agent task: the suite changes one env setting
                out.append(Suite(OOD_PREFIX + name, game, (), {spec.ood_param: getattr(ood_spec, spec.ood_param)}))
            else:
                out.append(Suite(OOD_PREFIX + name, game, tuple(ood.entries(game, name))))
    return out


def selection_suite(cfg: Any) -> Suite:
    """What training-time evaluation plays to pick ``best/``: the in-domain suite
    from other task seeds (``evaluation.selection_seed``); for WebShop, whose
    in-domain suite is a fixed goal list, the goals of the ``select`` split; for
    ALFWorld, whose splits are the official three, the training games (never the
    reported valid_seen / valid_unseen games)."""
    suite = suites_for(cfg, "in_domain")[0]
    split = {"eval": "select", "eval_in_distribution": "train"}.get(suite.env_overrides.get("split", ""))
    if split is not None:
        return Suite(suite.name, suite.game, suite.entries, {**suite.env_overrides, "split": split})
    return suite
