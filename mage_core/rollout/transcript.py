"""Readable transcripts of finished meta-episodes: what the policy saw and said.

Logged as run artifacts (MLflow) so that a person can read sample dialogues,
reflections included, next to the curves.
"""

from __future__ import annotations

from typing import Callable, Sequence

from mage_core.rollout.meta_episode import MetaEpisode


def transcript(meta: MetaEpisode, decode: Callable[[list[int]], str]) -> str:
    """Every decision of ``meta``: its prompt (decoded), the response, the reward."""
    spec = meta.spec
    lines = [f"# meta-episode: game {spec.game}, opponent {spec.opponent}, agent seat {spec.agent_seat}, "
             f"task seed {spec.task_seed}"]
    for d in meta.decisions:
        where = f"episode {d.episode + 1}, {d.phase}" + (f" turn {d.turn + 1}" if d.phase == "play" else "")
        lines += [f"## {where}", "prompt:", decode(d.prompt_ids), f"response: {d.text}",
                  f"reward {d.task_reward:+g}" + (" (invalid)" if d.invalid else "")]
    results = ", ".join(f"episode {k + 1}: {e.outcome.name.lower()} {e.reward:+g}" for k, e in enumerate(meta.episodes))
    lines.append(f"# results: {results}")
    return "\n".join(lines) + "\n"


def transcripts(metas: Sequence[MetaEpisode], decode: Callable[[list[int]], str], limit: int = 6) -> str:
    """Transcripts of the first meta-episode of each (opponent, seat), at most ``limit``."""
    seen, chosen = set(), []
    for meta in metas:
        key = (meta.spec.opponent, meta.spec.agent_seat)
        if key not in seen and len(chosen) < limit:
            seen.add(key)
            chosen.append(meta)
    return "\n".join(transcript(m, decode) for m in chosen)
