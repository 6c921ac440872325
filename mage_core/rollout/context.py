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
  (history) and/or remarks (``remark1 <text>``). Measured on the tiny model
  (issue 12): fused one-token facts (``opBET`` instead of ``op BET``) halve the
  tokens of a Kuhn meta-episode and learn about twice as fast per iteration.

Rendering is pure string work on what the env shows the agent; nothing here
sees hidden information.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

Style = Literal["paper", "compact"]
Memory = Literal["history_only", "reflection_only", "history_and_reflection", "none"]

GAME_TAGS = {"tic_tac_toe": "ttt", "kuhn_poker": "kuhn", "sokoban": "sokoban", "webshop": "webshop", "alfworld": "alfworld"}
SEAT_WORDS = {0: "first", 1: "second"}

TASKS = {
    "kuhn_poker": (
        "You are an expert Kuhn Poker player.\n"
        "# Rules\n"
        "- Two players, a deck of three cards: K beats Q beats J. Each player antes 1 chip and gets one private "
        "card; the third card stays hidden.\n"
        "- Player 0 acts first. PASS puts no chip in (check, or fold when facing a bet); BET puts 1 chip in "
        "(bet, or call when facing a bet).\n"
        "- A PASS after a BET folds: the bettor takes the pot. Two PASSes or two BETs go to showdown: the "
        "higher card takes the pot.\n"
        "# Goal\n"
        "You play several hands against the same opponent, whose style you are not told. Learn how it plays "
        "from the earlier hands and win as many chips as you can."
    ),
    "tic_tac_toe": (
        "You are an expert Tic-Tac-Toe player.\n"
        "# Rules\n"
        "- A 3x3 board; X moves first. Players alternate placing their mark on an empty cell.\n"
        "- Three of your marks in a row, column or diagonal wins; a full board without a line is a draw.\n"
        "- Cells are (row, col) with rows and columns numbered 1 to 3 from the top left.\n"
        "# Goal\n"
        "You play several games against the same opponent, whose style you are not told. Learn its habits "
        "from the earlier games and win."
    ),
    "sokoban": (
        "You are an expert Sokoban player.\n"
        "# Rules\n"
        "- You (P) move up, down, left or right on the grid; walls (#) block you.\n"
        "- Walking into a box (X) pushes it one cell if the cell behind it is free; boxes cannot be pulled.\n"
        "- The level is solved when every box stands on a target (O); a box on a target shows as √.\n"
        "# Goal\n"
        "You get several attempts at the same level. Learn from the earlier attempts and solve it."
    ),
    "webshop": (
        "You are an expert autonomous agent shopping on the WebShop website.\n"
        "# Rules\n"
        "- Each page is shown as text, its parts separated by [SEP]. The instruction says what to buy: a "
        "product, its attributes, its options (such as size or colour) and a price limit.\n"
        "- search[query] searches the catalogue from any page. click[name] clicks a button, a product's ID, "
        "or an option value shown on the page (in lower case), e.g. click[next >], click[buy now].\n"
        "- On a product's page, click each wanted option value before Buy Now. Buying ends the attempt.\n"
        "# Goal\n"
        "You get several attempts at the same instruction. Learn from the earlier attempts and buy the "
        "product that matches every requirement."
    ),
    "alfworld": (
        "You are an expert agent operating in the ALFRED embodied household environment.\n"
        "# Rules\n"
        "- You see what is around you as text and act with ONE of the admissible actions listed, e.g. "
        "go to a receptacle, open or close it, take an object from it, move an object to a receptacle, "
        "heat, cool or clean an object with an appliance, use a lamp.\n"
        "- Objects are often inside closed receptacles: search them. The task is done when its goal holds.\n"
        "# Goal\n"
        "You get several attempts at the same task in the same room. Learn from the earlier attempts "
        "where things are and finish the task in as few actions as you can."
    ),
}

ACTION_FORMATS = {
    "kuhn_poker": "Choose ONE action, PASS or BET, inside <action> </action> tags, e.g. <action>BET</action>.",
    "tic_tac_toe": "Choose ONE empty cell inside <action> </action> tags as (row, col), e.g. <action>(2, 3)"
                   "</action>.",
    "sokoban": "Give up to {moves} moves separated by commas inside <action> </action> tags, e.g. "
               "<action>up, left</action>.",
    "webshop": "Choose ONE action, search[query] or click[name], inside <action> </action> tags, e.g. "
               "<action>click[buy now]</action>.",
    "alfworld": "Choose ONE admissible action inside <action> </action> tags, e.g. <action>go to cabinet 1</action>.",
}


@dataclass
class EpisodeMemory:
    """What is remembered of one finished episode."""

    trajectory: str  # the episode's turns as text (paper style) or its final compact state
    success: bool
    remark: str | None = None  # the reflection written after it (None: none)


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
                lines.append(f"ep{k} {m.trajectory}")
            if reflection:
                lines.append(f"remark{k} {m.remark}")
            continue
        result = "the task was successfully completed" if m.success else "the task was NOT successfully completed"
        if history:
            lines.append(f"On trial #{k} you took these moves:\n{m.trajectory}\nThen {result}.")
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
        head = GAME_TAGS[state.game] + (f" {SEAT_WORDS[state.agent_seat]}" if state.agent_seat is not None else "")
        episode = len(state.memory) + 1
        memory = _memory_lines(state, mode, style) if recalled is None else [f"mem {r}" for r in recalled]
        return " ".join([head, *memory, f"ep{episode} {observation}"])
    parts = [TASKS[state.game]]
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
    fmt = ACTION_FORMATS[state.game].format(moves=moves_per_turn)
    parts.append(f"Now it is your move. Reason step by step about the situation, then answer. {fmt}")
    return "\n\n".join(parts)


def reflect_prompt(state: ContextState, finished: EpisodeMemory) -> str:
    """The prompt of a reflect turn after an episode (paper style only: a
    compact policy uses structured summaries, never generated text)."""
    outcome = ("The trial was successfully completed: explain what worked and how to keep it."
               if finished.success else "The trial was NOT successfully completed: find the mistakes.")
    seat = f"\nYou are Player {state.agent_seat}." if state.agent_seat is not None else ""
    return (
        f"{TASKS[state.game]}{seat}\n\n# Trial #{len(state.memory)} just ended\n{finished.trajectory}\n\n"
        f"{outcome}\nThink about the opponent's or the task's behaviour and your decisions, then write a short "
        "plan for the next trial inside <remark> </remark> tags."
    )


def paper_trajectory(turns: list[tuple[str, str]], final_observation: str) -> str:
    """A finished episode as text for paper-style memory."""
    steps = [f"State:\n{obs}\nYour action: {act}" for obs, act in turns]
    return "\n".join([*steps, f"Final state:\n{final_observation}"])
