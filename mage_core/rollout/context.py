"""What the policy reads: prompts for play and reflect turns (docs/method.md section 2).

A play prompt = task description + contextual memory of the previous episodes
+ the state history of the current episode. Memory modes (reference-code
names): ``history_only``, ``reflection_only``, ``history_and_reflection``.

Two prompt styles:

- ``paper``: natural-language templates in the shape of the paper's Appendix C
  (rules, goal, memory of earlier trials, moves so far, the <action> format),
  for pretrained LLMs such as Qwen3-4B;
- ``compact``: one token per fact for small models trained from scratch. A
  compact prompt is ``<game> <seat> ep1 <final state> ... epk <state>`` and the
  action follows at once: the decision is read at the last fact, not at a
  constant cue word. Memory entries are the episodes' final compact states
  (history), followed by what the episode revealed where the task says
  (``mine (6,4) safe (1,4)``: ``envs.base.Revealed``), and/or remarks (``remark1 <text>``). Measured on the tiny model
  (issue 12): fused one-token facts (``opBET`` instead of ``op BET``) halve the
  tokens of a Kuhn meta-episode and learn about twice as fast per iteration.

Rendering is pure string work on what the env shows the agent; nothing here
sees hidden information. Each task's own words (its compact tag, rules and action
format) are declared by the task (``Task.prompt``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

from mage_core.envs.base import Revealed
from mage_core.envs.registry import task

Style = Literal["paper", "compact"]
Memory = Literal["history_only", "reflection_only", "history_and_reflection", "none"]

SEAT_WORDS = {0: "first", 1: "second"}


@dataclass
class EpisodeMemory:
    """What is remembered of one finished episode."""

    trajectory: str  # the episode's turns as text (paper style) or its final compact state
    success: bool
    remark: str | None = None  # the reflection written after it (None: none)
    #: What the episode revealed about the task (``envs.base.Revealed``: a revealing task's
    #: facts, such as MineSweeper's mine and safe cells), kept for the task's expert, and
    #: ``facts_line``, how the history line shows them in the prompt's style (None: no facts).
    facts: Revealed | None = None
    facts_line: str | None = None


@dataclass
class ContextState:
    """Everything a prompt is built from, kept by the meta-episode."""

    game: str
    agent_seat: int | None  # None for single-agent tasks
    num_episodes: int
    memory: list[EpisodeMemory] = field(default_factory=list)
    current_turns: list[tuple[str, str]] = field(default_factory=list)  # (observation, action text) so far


def _memory_lines(state: ContextState, mode: Memory, style: Style) -> list[str]:
    lines = []
    for k, m in enumerate(state.memory, start=1):
        history = mode in ("history_only", "history_and_reflection")
        reflection = mode in ("reflection_only", "history_and_reflection") and m.remark is not None
        if style == "compact":
            if history:
                lines.append(f"ep{k} {m.trajectory}" + (f" {m.facts_line}" if m.facts_line else ""))
            if reflection:
                lines.append(f"remark{k} {m.remark}")
            continue
        result = "the task was successfully completed" if m.success else "the task was NOT successfully completed"
        if history:
            revealed = f"\nWhat trial #{k} revealed: {m.facts_line}" if m.facts_line else ""
            lines.append(f"On trial #{k} you took these moves:\n{m.trajectory}\nThen {result}.{revealed}")
        elif reflection:
            lines.append(f"On trial #{k} {result}.")
        if reflection:
            lines.append(f"Your reflection after trial #{k}:\n{m.remark}")
    return lines


def play_prompt(state: ContextState, observation: str, mode: Memory, style: Style, moves_per_turn: int = 3,
                recalled: Sequence[str] | None = None) -> str:
    """The prompt of a play turn; ``observation`` is the current state in the
    style's rendering (``env.observation()`` or ``env.compact_observation()``).
    ``recalled``: what a retrieval memory returned for it (the A-MEM and Memento
    baselines), shown instead of the memory of the earlier episodes."""
    if style == "compact":
        head = task(state.game).prompt.tag + (f" {SEAT_WORDS[state.agent_seat]}" if state.agent_seat is not None else "")
        episode = len(state.memory) + 1
        memory = _memory_lines(state, mode, style) if recalled is None else [f"mem {r}" for r in recalled]
        return " ".join([head, *memory, f"ep{episode} {observation}"])
    parts = [task(state.game).prompt.rules]
    if state.agent_seat is not None:
        parts.append(f"You are Player {state.agent_seat}: you move {SEAT_WORDS[state.agent_seat]}.")
    if recalled is not None:
        if recalled:
            parts.append("# What you remember of similar situations\n" + "\n".join(f"- {r}" for r in recalled))
        memory = []
    else:
        memory = _memory_lines(state, mode, style)
    if memory:
        parts.append("# Earlier trials against this opponent\n" + "\n\n".join(memory))
    trial = len(state.memory) + 1
    parts.append(f"# Current trial #{trial} of {state.num_episodes}")
    if state.current_turns:
        moves = "\n".join(f"State:\n{obs}\nYour action: {act}" for obs, act in state.current_turns)
        parts.append(f"Moves so far:\n{moves}")
    parts.append(f"Current state:\n{observation}")
    fmt = task(state.game).prompt.action_format.format(moves=moves_per_turn)
    parts.append(f"Now it is your move. Reason step by step about the situation, then answer. {fmt}")
    return "\n\n".join(parts)


def reflect_prompt(state: ContextState, finished: EpisodeMemory) -> str:
    """The prompt of a reflect turn after an episode (paper style only: a
    compact policy uses structured summaries, never generated text)."""
    outcome = ("The trial was successfully completed: explain what worked and how to keep it."
               if finished.success else "The trial was NOT successfully completed: find the mistakes.")
    seat = f"\nYou are Player {state.agent_seat}." if state.agent_seat is not None else ""
    return (
        f"{task(state.game).prompt.rules}{seat}\n\n# Trial #{len(state.memory)} just ended\n{finished.trajectory}\n\n"
        f"{outcome}\nThink about the opponent's or the task's behaviour and your decisions, then write a short "
        "plan for the next trial inside <remark> </remark> tags."
    )


def paper_trajectory(turns: list[tuple[str, str]], final_observation: str) -> str:
    """A finished episode as text for paper-style memory."""
    steps = [f"State:\n{obs}\nYour action: {act}" for obs, act in turns]
    return "\n".join([*steps, f"Final state:\n{final_observation}"])
