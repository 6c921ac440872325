"""Recorded prompts: every play prompt of a scripted meta-episode, per style.

The prompts are what the policy reads; any change shows as a diff against
tests/golden/data/prompts-*.txt. Regenerate after an intended change with
``MAGE_UPDATE_GOLDEN=1 pytest -m golden`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from mage_core.config import Config
from mage_core.rollout.meta_episode import MetaEpisode, MetaEpisodeSpec, MetaSettings, Response
from mage_core.trainers.meta_rl import meta_settings
from tests.envcases import Case

pytestmark = pytest.mark.golden

DATA = Path(__file__).parent / "data"
UPDATE = os.environ.get("MAGE_UPDATE_GOLDEN") == "1"

CASES = [
    (Case("kuhn_poker", "intermediate", 1), "compact", "history_only"),
    (Case("kuhn_poker", "aggressive", 0), "paper", "history_and_reflection"),
    (Case("tic_tac_toe", "pattern-edges", 0), "compact", "history_only"),
    (Case("tic_tac_toe", "pattern-corners", 1), "paper", "history_only"),
    (Case("sokoban", None, 0), "compact", "history_only"),
    (Case("sokoban", None, 0), "paper", "reflection_only"),
]


def record(case: Case, style: str, memory: str) -> str:
    base = meta_settings(Config(), case.game, 3, True)
    settings = MetaSettings(**{**base.__dict__, "style": style, "memory": memory, "restart": "same"})
    meta = MetaEpisode(MetaEpisodeSpec(case.game, case.opponent, case.agent_seat, 7, 0), case.build(7), settings,
                       encode=lambda t: [], encode_action=lambda t: [])
    rng = np.random.default_rng(7)
    chunks = []
    while not meta.done:
        request = meta.request()
        texts = request.candidate_texts or []
        choice = int(rng.integers(len(texts)))
        chunks.append(f"=== prompt ({request.phase}) -> {texts[choice]}\n{request.prompt}")
        meta.apply(request, Response(texts[choice], 0.0, choice=choice))
    return "\n".join(chunks) + "\n"


@pytest.mark.parametrize(("case", "style", "memory"), CASES, ids=lambda x: x.id if isinstance(x, Case) else x)
def test_prompts_match_recording(case: Case, style: str, memory: str) -> None:
    path = DATA / f"prompts-{case.id}-{style}-{memory}.txt"
    text = record(case, style, memory)
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no recording {path.name}: run MAGE_UPDATE_GOLDEN=1 pytest -m golden"
    assert text == path.read_text(encoding="utf-8")
