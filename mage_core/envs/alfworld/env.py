"""ALFWorld as an agent environment: a game of a split folder, played through
alfworld's own wrappers over TextWorld's PDDL engine (``generate.make_play_env``):
the real observation text, the real admissible commands, the real ``won`` flag.

An episode: ``reset()`` draws a game of the split (by the generator) and resets
the engine on it (0.5-1.5 s: the problem is translated by fast-downward);
``restart()`` resets the same game. A turn is one command; a command the game
does not admit is an invalid turn: no engine step, the feedback "Nothing
happens." (the engine's own answer to it), no reward, the turn counts. Winning
pays ``success_reward`` (verl-agent: 10) and ends the episode; the turn limit
(paper: 10) ends it with 0, the worst legal outcome.

Observations: the task, the last feedback, and the admissible commands (as
verl-agent's prompts list them). Compact style (the embedded model): the same
words, the commands under one-word names ``c1``..``cN`` (their order: the
engine's sorted list), which are the constrained candidates.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Sequence

import numpy as np

from mage_core.envs.alfworld import knowledge
from mage_core.envs.alfworld.layout import SPLIT_FOLDERS, AlfWorldDataError  # noqa: F401  (re-exported)
from mage_core.envs.alfworld.params import AlfWorldSettings
from mage_core.envs.base import Outcome, Revealed, StepResult, check_generator, extract_action_text, split_index_error

NOTHING_HAPPENS = "Nothing happens."
_ADJECTIVE = {"clean": "clean", "heat": "hot", "cool": "cool"}
_TASK = re.compile(r"Your task is to: (.*)")
_PUT = re.compile(r"^put (.+?) (?:in|on|in/on|into|onto) (.+)$")


@functools.lru_cache(maxsize=8)
def split_games(data_path: str, split: str) -> tuple[str, ...]:
    """The game files of a split folder (sorted), each one marked solvable."""
    from mage_core.envs.alfworld.generate import game_files

    folder = Path(data_path) / SPLIT_FOLDERS[split]
    if not folder.is_dir():
        raise AlfWorldDataError(f"{folder}: no such folder; generate the games with `mage alfworld generate "
                                f"--out {data_path}` (or point env.alfworld.data_path at ALFWorld's json_2.1.1)")
    files = tuple(game_files(str(folder)))
    if not files:
        raise AlfWorldDataError(f"{folder}: no game.tw-pddl under it")
    from mage_core.envs.alfworld.grammar import check_game_file

    for f in files:  # a game file holds code: each is checked before TextWorld sees it (grammar.py)
        if not check_game_file(f).get("solvable"):
            raise AlfWorldDataError(f"{f}: not marked solvable (check it: mage alfworld check {data_path})")
    return files


def compact_text(text: str) -> str:
    """Lower case, the TextWorld banner and line breaks dropped."""
    text = text.replace("-= Welcome to TextWorld, ALFRED! =-", " ")
    return " ".join(text.lower().split())


class AlfWorldEnv:
    """One ALFWorld game per episode; ``restart()`` replays the same game."""

    name = "alfworld"

    def __init__(self, settings: AlfWorldSettings, rng: np.random.Generator,
                 games: Sequence[str] | None = None) -> None:
        from mage_core.envs.alfworld.generate import make_play_env, patch_handcoded_expert_move_command

        self.settings = settings
        self.games = tuple(games) if games is not None else split_games(settings.data_path, settings.split)
        if not self.games:
            raise AlfWorldDataError("AlfWorldEnv needs at least one game")
        self._rng = check_generator(rng, "AlfWorldEnv")
        patch_handcoded_expert_move_command()  # harmless for play; keeps any expert in this process right
        self._engine = make_play_env()  # the planner runs only when asked: planner_commands()
        self._checked: set[str] = set(self.games) if games is None else set()  # split_games checked those
        self._order = np.random.default_rng(0).permutation(len(self.games))  # reset_to's: the task types mixed
        self.game: str | None = None
        self._state: dict = {}
        self.task = ""
        self._goal: knowledge.Goal | None = None
        self._feedback, self._turn, self._done, self._won = "", 0, False, False

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict:
        """A finished meta-episode goes back from a Ray rollout worker pickled; the engine
        (fast-downward's library, loaded through ctypes) cannot be, and stays there."""
        state = self.__dict__.copy()
        state["_engine"] = None
        return state

    def _live_engine(self):
        if self._engine is None:
            raise RuntimeError("this AlfWorldEnv came back from a rollout worker without its engine: "
                               "it can be read, not played (set_game/restart/step need a new AlfWorldEnv)")
        return self._engine

    # ------------------------------------------------------------------ life cycle
    def reset(self) -> None:
        self.set_game(self.games[int(self._rng.integers(len(self.games)))])

    def split_size(self) -> int:
        return len(self.games)

    def reset_to(self, index: int) -> None:
        """Game ``index`` of the split, in a fixed shuffled order (seed 0) so that the first
        games of a set mix the task types."""
        if not 0 <= index < len(self.games):
            raise split_index_error(index, len(self.games), "game")
        self.set_game(self.games[int(self._order[index])])

    def set_game(self, gamefile: str) -> None:
        """Start an episode on a given game file (checked once before its first load:
        ``grammar.check_game_file``)."""
        if gamefile not in self._checked:
            from mage_core.envs.alfworld.grammar import check_game_file

            check_game_file(gamefile)
            self._checked.add(gamefile)
        self._live_engine().load(gamefile)
        self.game = gamefile
        self.restart()

    def task_key(self) -> str:
        """The game's PDDL problem: its objects, their hidden initial places and the goal
        (``envs.base.KeyedTask``); two files that hold the same problem are one task."""
        if self.game is None:
            raise RuntimeError("AlfWorldEnv.task_key() before reset()")
        with open(self.game, encoding="utf-8") as f:
            return "alfworld " + json.load(f)["pddl_problem"]

    def restart(self) -> None:
        if self.game is None:
            raise RuntimeError("AlfWorldEnv.restart() before reset()")
        self._state = self._live_engine().reset()
        match = _TASK.search(self._state["feedback"])
        self.task = match.group(1).strip() if match else ""
        self._goal = knowledge.parse_goal(self.task)
        self._feedback = self._state["feedback"].strip()
        self._turn = 0
        self._done = False
        self._won = False
        self._room = knowledge.room(self._feedback)
        self._steps: list[tuple[str, str]] = []  # this attempt's admitted commands and their feedback

    @property
    def done(self) -> bool:
        return self._done

    @property
    def turn(self) -> int:
        return self._turn

    @property
    def won(self) -> bool:
        return self._won

    def planner_commands(self) -> list[str]:
        """A shortest command sequence to the goal from here (TextWorld's planner, which knows
        where every object is); needs ``settings.planner``."""
        if not self.settings.planner:
            raise RuntimeError("AlfWorldEnv.planner_commands: the engine plans only with "
                               "AlfWorldSettings(planner=True)")
        if self._done or not self._state:
            return []
        # What TextWorld computes into state["policy_commands"] after every step when asked to
        # (PddlEnv._gather_infos), asked here only when the expert acts: no plan for a detour
        # step or a restart (memoized: cache.py).
        pddl = self._live_engine().unwrapped
        return list(pddl._pddl_state.replan(pddl._entity_infos))

    # ------------------------------------------------------------------ what the agent sees
    def legal_actions(self) -> list[str]:
        """The game's admissible commands (the engine's sorted list); empty once over."""
        return [] if self._done else list(self._state["admissible_commands"])

    def observation(self) -> str:
        head = f"Your task is to: {self.task}"
        feedback = self._feedback if self._turn else self._feedback.replace("-= Welcome to TextWorld, ALFRED! =-", "")
        if self._done:
            result = "The task is done." if self._won else "The episode is over."
            return f"{head}\n{feedback.strip()}\n{result}"
        actions = ", ".join(self.legal_actions())
        return f"{head}\n{feedback.strip()}\nYour admissible actions: {actions}"

    def compact_observation(self) -> str:
        """The task, the last feedback and the commands (as ``c<i> <command>``, or the commands alone
        with ``compact_candidates: words``); while the attempt goes on,
        also what it has found so far (``_compact_state``) and the objects it has cleaned,
        heated or cooled (``hot mug 1``): the state a player keeps in mind, which the compact
        prompt (the current state only) would otherwise lose."""
        feedback = compact_text(self._feedback)
        if self._turn == 0:  # the intro repeats the task at its end
            feedback = feedback.split("your task is to:")[0].strip()
        if self._done:  # what a later attempt can use is in the memory line: ``memory_line``
            return f"task {compact_text(self.task)} {feedback} {'won' if self._won else 'lost'}"
        done = [f"{_ADJECTIVE[m.group(1)]} {m.group(2)}" for m in (knowledge.TRANSFORM.match(a) for a, _ in self._steps)
                if m]
        kept = " ".join(filter(None, [self._compact_state(), *done]))
        if self.settings.compact_candidates == "words":
            choices = ", ".join(self.legal_actions())
        else:
            choices = " ".join(f"c{i} {a}" for i, a in enumerate(self.legal_actions(), start=1))
        return f"task {compact_text(self.task)} {feedback} {kept + ' ' if kept else ''}{choices}"

    def _compact_state(self) -> str:
        """Where this attempt now knows an object of the goal's classes to be (those it picked up
        gone, those it put down where it put them), then ``nothing in`` the other receptacles it
        has looked into; the memory line's form (``_compact_line``)."""
        know = knowledge.Knowledge.of(self._room, self._steps)
        return self._compact_line(list(know.where.items()), [r for r, _ in knowledge.first_looks(self._steps)])

    def _compact_line(self, seen: Sequence[tuple[str, str]], looked: Sequence[str]) -> str:
        """``seen`` (object, receptacle) pairs of the goal's classes (the object, and for a
        ``look`` goal the lamp) as ``mug 1 in cabinet 2``, then ``nothing in`` each receptacle of
        ``looked`` that holds none of them: a small model reads a few tokens, not a kitchen's
        inventory, in the game's own words (so the embedded model's vocabulary has them)."""
        wanted = {self._goal.obj, self._goal.target} if self._goal is not None else set()
        found = [(o, r) for o, r in seen if knowledge.kind_of(o) in wanted]
        with_found = {r for _, r in found}
        rest = list(dict.fromkeys(r for r in looked if r not in with_found))
        return " ".join([f"{o} in {r}" for o, r in found] + (["nothing in " + " ".join(rest)] if rest else []))

    def compact_action(self, action: str) -> str:
        """An admissible command as ONE word, ``c<i>``, its position in ``legal_actions()``; with
        ``compact_candidates: words``, its own words (``go to cabinet 2``), read token by token."""
        if self.settings.compact_candidates == "words":
            return action
        return f"c{self.legal_actions().index(action) + 1}"

    def parse_action(self, response: str) -> str | None:
        """The admissible command a response names (its last ``<action>`` block, or the
        whole text), spacing and case normalised; "put X in/on Y", the older ALFWorld
        form, reads as "move X to Y". None if it names none; never raises."""
        if not isinstance(response, str) or self._done or not self._state:
            return None
        text = extract_action_text(response)
        command = " ".join((text if text is not None else response).lower().split()).strip(" .")
        legal = self.legal_actions()
        if command in legal:
            return command
        put = _PUT.match(command)
        if put is not None and f"move {put.group(1)} to {put.group(2)}" in legal:
            return f"move {put.group(1)} to {put.group(2)}"
        return None

    # ------------------------------------------------------------------ acting
    def step(self, action: str | None) -> StepResult:
        if self._done:
            raise RuntimeError("AlfWorldEnv.step() after the episode ended; call restart() or reset()")
        self._turn += 1
        invalid = action is None or action not in self._state["admissible_commands"]
        reward, outcome = 0.0, None
        if invalid:
            self._feedback = NOTHING_HAPPENS
        else:
            self._state, _, _ = self._live_engine().step(action)
            self._feedback = self._state["feedback"].strip()
            self._steps.append((action, self._feedback))
            if self._state["won"]:
                self._won = True
                reward, outcome = self.settings.success_reward, Outcome.WIN
        if outcome is None and self._turn >= self.settings.max_turns:
            outcome = Outcome.TIMEOUT
        if outcome is not None:
            self._done = True
        return StepResult(reward=reward, done=self._done, invalid=invalid, outcome=outcome,
                          info={"game": os.path.basename(os.path.dirname(os.path.dirname(self.game or "")))})

    def legal_return_floor(self) -> float:
        return 0.0

    # ------------------------------------------------------------------ what an attempt reveals
    def receptacles(self) -> tuple[str, ...]:
        """The receptacles the room description names, in its order."""
        return self._room

    def steps(self) -> tuple[tuple[str, str], ...]:
        """This attempt's admitted commands with the feedback each got, in order."""
        return tuple(self._steps)

    def revealed(self) -> Revealed:
        """What this attempt's looks showed (``envs.base.Revealing``), at the first look into or
        onto each receptacle: ``saw`` "mug 1 in cabinet 2" for each object there, ``empty``
        "drawer 1" where there was none (``knowledge.first_looks``: objects the attempt had
        picked up before that look left out). A replayed game starts where these facts say."""
        return Revealed(self.task_key(), self._facts())

    def _facts(self) -> tuple[tuple[str, str], ...]:
        facts: list[tuple[str, str]] = []
        for recep, objects in knowledge.first_looks(self._steps):
            facts.extend((("saw", f"{obj} in {recep}") for obj in objects) if objects else [("empty", recep)])
        return tuple(facts)

    def memory_line(self, revealed: Revealed, style: str) -> str:
        """Paper: every fact (``saw: mug 1 in cabinet 2, soapbottle 2 in cabinet 2; empty: drawer
        1.``). Compact: ``_compact_facts``."""
        return revealed.line(style) if style != "compact" else self._compact_facts(revealed.facts)

    def _compact_facts(self, facts: Sequence[tuple[str, str]]) -> str:
        """What the goal needs of ``facts`` (``_compact_line``), in the order they were learnt."""
        seen: list[tuple[str, str]] = []  # (object, receptacle) of every "saw" fact
        looked: list[str] = []  # every receptacle a fact is about, in order
        for kind, subject in facts:
            if kind == "empty":
                looked.append(subject)
                continue
            match = knowledge.SAW.fullmatch(subject)
            if match is None:
                raise ValueError(f"ALFWorld fact {subject!r} ({kind}): not '<object> in <receptacle>'")
            seen.append((match[1], match[2]))
            looked.append(match[2])
        return self._compact_line(seen, looked)


def walkthrough(gamefile: str) -> list[str]:
    """The stored expert walkthrough of a game (the scripted expert of the tests)."""
    import json

    with open(gamefile) as handle:
        return list(json.load(handle).get("walkthrough") or [])
