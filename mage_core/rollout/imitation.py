"""Demonstrations: meta-episodes in which a task's expert acts instead of the policy.

Every decision is asked for exactly as the policy is asked (``MetaEpisode.request``:
the same prompt, memory of earlier attempts and candidates), then answered with the
expert's action (``Task.expert``), so the recorded decisions are what imitation trains
on (``mage sft``, the warm start of issue 28). Constrained actions only: an expert
names one of the legal actions, the candidate the policy would have to pick.

The warm start must leave room to improve, so the expert is imperfect on purpose and by
a setting: with probability ``detour`` each step of a meta-episode's first attempt takes
a uniformly drawn legal action instead (a wrong product opened, a box pushed the wrong
way, a guessed cell); the expert then continues from wherever that left it. Later
attempts are the expert's own. A detour is recorded (``detour: true``) as context for
what follows, never cloned (``stages.sft.samples_of``): the policy learns to recover
from states the expert alone never reaches, not to stray. So is a step the expert cannot
plan (it returns None: a Sokoban box pushed where it can never leave), taken at random
like a detour: a random step is never passed off as the expert's.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from mage_core.envs.base import Revealed
from mage_core.rollout.meta_episode import MetaEpisode, Response

#: ``act(env, rng, memory) -> action``: one of the env's legal actions, or None when it has no
#: plan from here (the step is then a detour). ``memory``: what the earlier attempts revealed
#: (``envs.base.Revealed``, one an attempt), as the policy's memory lines show it.
Expert = Callable[[object, np.random.Generator, Sequence[Revealed]], "str | None"]


def play_expert(metas: Sequence[MetaEpisode], expert: Expert, rngs: Sequence[np.random.Generator],
                detour: float = 0.0) -> list[dict[str, Any]]:
    """Play each of ``metas`` to its end with ``expert`` choosing every action
    (``rngs[i]``: meta-episode i's draws, the expert's ties and the detours). Returns one
    record a decision, as text: the meta-episode's index, attempt and turn, the prompt and
    candidates exactly as shown, the action taken and whether it was a detour."""
    if not 0.0 <= detour <= 1.0:
        raise ValueError(f"detour must be a probability in [0, 1], got {detour}")
    if len(rngs) != len(metas):
        raise ValueError(f"{len(rngs)} generators for {len(metas)} meta-episodes")
    records: list[dict[str, Any]] = []
    for index, (meta, rng) in enumerate(zip(metas, rngs)):
        while not meta.done:
            request = meta.request()
            if request.phase != "play":
                raise NotImplementedError("an expert writes no reflections: demonstrations take "
                                          "policy.reflections summary or none")
            legal = request.candidate_texts
            if legal is None:
                raise NotImplementedError("demonstrations are constrained actions: set policy.action_mode: "
                                          "constrained (free-text demonstrations are not built)")
            strays = detour > 0 and not meta.episodes and rng.random() < detour
            # The expert remembers what the policy would: the facts of its memory lines.
            memory = [m.facts for m in meta.context.memory if m.facts is not None]
            action = None if strays else expert(meta.env, rng, memory)
            if action is None:  # a detour, or no plan from here: a uniformly drawn legal action
                strays, action = True, legal[int(rng.integers(len(legal)))]
            if action not in legal:
                raise ValueError(f"the expert chose {action!r}, not one of the {len(legal)} legal actions "
                                 f"(task seed {meta.spec.task_seed}, episode {len(meta.episodes)})")
            records.append({"meta_episode": index, "task_seed": meta.spec.task_seed, "attempt": len(meta.episodes),
                            "turn": meta.env.turn, "prompt": request.prompt, "candidates": legal,
                            "action": action, "detour": bool(strays)})
            meta.apply(request, Response(action, 0.0, choice=legal.index(action)))
    return records
