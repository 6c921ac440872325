"""Recorded playthroughs: the exact text every game shows the agent.

Any change of observation text (the prompts' raw material) shows up as a diff
against tests/golden/data/. After an intended change, regenerate with
``MAGE_UPDATE_GOLDEN=1 pytest -m golden`` and review the diff like code.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.envcases import Case

pytestmark = pytest.mark.golden

DATA = Path(__file__).parent / "data"
UPDATE = os.environ.get("MAGE_UPDATE_GOLDEN") == "1"

PLAYTHROUGHS = [
    (Case("tic_tac_toe", "pattern-corners", 0), 1),
    (Case("tic_tac_toe", "pattern-center_corners_edges", 1), 2),
    (Case("kuhn_poker", "aggressive", 0), 3),
    (Case("kuhn_poker", "conservative", 1), 4),
    (Case("kuhn_poker", "intermediate", 1), 8),
    (Case("sokoban", None, 0), 5),
]


def record(case: Case, seed: int) -> str:
    """Play with seeded random legal actions, one invalid turn first, then restart."""
    env = case.build(seed)
    env.reset()
    rng = np.random.default_rng(seed)
    lines = [f"# {case.id} seed={seed}"]
    first = True
    while not env.done:
        lines += ["--- observation", env.observation()]
        action = None if first else env.legal_actions()[int(rng.integers(len(env.legal_actions())))]
        first = False
        result = env.step(action)
        lines.append(f"--- action {action!r} -> reward {result.reward:+.2f} invalid={result.invalid} "
                     f"done={result.done} outcome={result.outcome.value if result.outcome else None}")
    lines += ["--- final observation", env.observation()]
    env.restart()
    lines += ["--- after restart", env.observation()]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("case", "seed"), PLAYTHROUGHS, ids=lambda x: x.id if isinstance(x, Case) else str(x))
def test_playthrough_matches_recording(case: Case, seed: int) -> None:
    path = DATA / f"{case.id}-seed{seed}.txt"
    text = record(case, seed)
    if UPDATE:
        DATA.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no recording {path.name}: run MAGE_UPDATE_GOLDEN=1 pytest -m golden"
    assert text == path.read_text(encoding="utf-8")
