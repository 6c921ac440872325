"""Which seeded tasks a set may hold: report, selection and training sets apart in content.

A seeded task (``Task.seeded_tasks``: Sokoban's levels, MineSweeper's boards) is made from
its seed, and two seeds can make the same task: a 6 x 6 room with two boxes has only some
thousands of levels that the generator draws with any frequency, so 330 seeds gave 325
distinct levels, 11 of them also among the warm start's demonstrations. Sets apart in seed
are therefore not apart in content. Here every task belongs to one *pool*, read off a hash of
its content (``KeyedTask.task_key``):

- ``report``: a quarter of the tasks, the only ones the report sets (``mage evaluate``) play;
- ``select``: another quarter, the selection set that picks ``best/``;
- ``train``: the other half, everything training plays (the RL batches and the warm start's
  demonstrations).

The pool of a task depends on nothing but its content, so the sets are disjoint whatever
their sizes and seeds (a set's size never moves another set), and an evaluation set holds each
task once (``distinct``): its seeds are drawn in order and a seed whose task the set already
holds is skipped. Tasks that are a fixed list split by index (WebShop's goals, ALFWorld's
games) and two-player games (deals and boards against opponents) are not pooled; their sets
are what their splits and seeds make (``tests/unit/test_task_sets.py`` checks every
single-agent task's sets apart in content).
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any, Iterator, Literal

import numpy as np

from mage_core.envs.registry import make_env, task

Pool = Literal["report", "select", "train"]
#: Each pool's share of the hash's range [0, 1), in this order.
POOL_SHARES: dict[str, float] = {"report": 0.25, "select": 0.25, "train": 0.5}
#: Candidates drawn per task asked for before a set is declared impossible (a pool holds a
#: quarter of the tasks: ~4 draws a task while distinct tasks are plentiful).
_DRAWS_PER_TASK = 64


def pool_of(key: str) -> Pool:
    """The pool of the task whose content is ``key``: the first 8 bytes of its SHA-256 as a
    fraction of 2^64, cut at the cumulative shares of ``POOL_SHARES``."""
    u = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
    edge = 0.0
    for name, share in POOL_SHARES.items():
        edge += share
        if u < edge:
            return name  # type: ignore[return-value]
    return "train"


def pooled(game: str) -> bool:
    """Whether ``game``'s sets are drawn from content pools (``Task.seeded_tasks``)."""
    return task(game).seeded_tasks


def task_key(game: str, env_settings: Any, seed: int) -> str:
    """The content of the task seed ``seed`` makes, read off the env a rollout would build
    from it (``make_env`` with ``np.random.default_rng(seed)``, then ``reset``)."""
    env = make_env(game, env_settings, np.random.default_rng(seed))
    env.reset()
    return env.task_key()  # type: ignore[attr-defined]


def seed_stream(*entropy: int) -> Iterator[int]:
    """An endless stream of 62-bit task seeds fixed by ``entropy`` (chunks of 256)."""
    for chunk in itertools.count():
        states = np.random.SeedSequence([*entropy, chunk]).generate_state(256, dtype=np.uint64) >> np.uint64(2)
        yield from (int(s) for s in states)


def pool_seeds(game: str, env_settings: Any, candidates: Iterator[int], count: int, pool: Pool,
               distinct: bool = True, what: str = "set") -> list[int]:
    """The first ``count`` seeds of ``candidates`` whose task lies in ``pool`` (and, when
    ``distinct``, is not already among those kept). ValueError naming the settings when
    ``count`` such tasks are not found in ``count x 64`` candidates: the settings leave the
    pool too few distinct tasks for the set."""
    kept: list[int] = []
    seen: set[str] = set()
    for seed in itertools.islice(candidates, count * _DRAWS_PER_TASK):
        key = task_key(game, env_settings, seed)
        if pool_of(key) != pool or (distinct and key in seen):
            continue
        seen.add(key)
        kept.append(seed)
        if len(kept) == count:
            return kept
    if count == 0:
        return kept
    raise ValueError(f"the {what} asks for {count} distinct {game} tasks of the {pool} pool and {count * _DRAWS_PER_TASK} "
                     f"draws found {len(kept)}: these env.{game} settings make too few distinct tasks; lower the "
                     f"set's size (evaluation.meta_episodes_per_opponent_seat, reproduce.eval_per_pair) or widen "
                     f"the settings")


def draw_seed(game: str, env_settings: Any, rng: np.random.Generator, pool: Pool = "train") -> int:
    """One task seed from ``rng`` whose task lies in ``pool`` (training's draws: repeats allowed)."""
    for _ in range(_DRAWS_PER_TASK * 16):
        seed = int(rng.integers(2**62))
        if pool_of(task_key(game, env_settings, seed)) == pool:
            return seed
    raise ValueError(f"{_DRAWS_PER_TASK * 16} {game} tasks drawn and none in the {pool} pool: these env.{game} "
                     f"settings make too few distinct tasks")
