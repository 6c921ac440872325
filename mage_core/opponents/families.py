"""What every generated family of opponents shares (``kuhn_families``, ``ttt_families``):
its members' names and the checks of its size, seed and member index."""

from __future__ import annotations


def member_name(family: str, index: int) -> str:
    """Member ``index`` of ``family``: ``<family>-<index>``."""
    return f"{family}-{index}"


def count_and_seed_problems(count: object, seed: object) -> list[str]:
    """What is wrong with a family's ``count`` (an int >= 1) and ``seed`` (an int >= 0)."""
    problems = []
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        problems.append(f"count must be an int >= 1, got {count!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        problems.append(f"seed must be an int >= 0, got {seed!r}")
    return problems


def check_index(count: int, index: object) -> int:
    """``index`` if it names a member of a family of ``count``, else ValueError."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise ValueError(f"member index must be an int in [0, {count}), got {index!r}")
    return index
