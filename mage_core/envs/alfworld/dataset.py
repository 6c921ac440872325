"""A dataset of generated ALFWorld games in the official split folders, its games made
ahead of time by worker processes.

``generate_dataset`` asks ``generate.generate_game`` for the games of each split (sorted),
task type and game in turn, each try on a floor plan drawn from the split's by the split's
seeded generator (``Order``), and keeps a game unless its problem is another game's; a try
that keeps nothing is followed by another on a new draw (20 at most).

``generate_game`` is a function of its floor plan, task type and seed alone: the files it
writes depend on nothing else (its random draws are seeded by those, the expert's too). So
the calls the loop will make next can be made before it gets there, in other processes:
``Makers`` predicts them (a copy of the loop's order, as if every try with a candidate task
kept its game: ``generate.has_task`` tells that without playing), hands them to idle workers,
each into a scratch folder of its own, and makes itself the call the loop needs when no worker
has it. The loop takes each call's result in its own order and moves the files (and the empty
task folders that failed attempts leave, as the plain loop does) into the dataset; a wrong
prediction only wastes a worker's time. So the folder is the same, byte for byte, with any
number of workers (tests/integration/test_alfworld_generate.py).

Whoever makes a game also replays its walkthrough while fast-downward's translation of it is
in that process's memo (cache.py), and ``engine.replay`` remembers the result by the file's
bytes: the check that follows generation (``commands.check``) plays no game a second time.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from multiprocessing.connection import Connection
from os.path import join as pjoin

from mage_core.envs.alfworld import engine
from mage_core.envs.alfworld import generate as G

#: Worker processes at most (each holds its own memos: a few hundred MB).
MAX_WORKERS = 4
#: Tries on different floor plans before a task type is given up.
TRIES = 20


@dataclass(frozen=True)
class Call:
    """One ``generate_game`` call of the loop."""

    split: str
    task_type: str
    scene_num: int
    seed: int


class Order:
    """Where ``generate_dataset``'s loop stands: split (sorted), task type, game and try,
    and the split's random generator, which draws each try's floor plan."""

    def __init__(self, seed: int, games_per_task: dict, task_types: list) -> None:
        self.seed = seed
        self.splits = sorted(games_per_task.items())
        self.task_types = task_types
        self.split, self.kind, self.game, self.tries = 0, 0, 0, 0
        self.rng = random.Random(f"{seed}-{self.splits[0][0]}") if self.splits else None
        self._call: Call | None = None
        self._settle()

    def _settle(self) -> None:
        """Move past the splits with nothing left to make."""
        while self.split < len(self.splits) and (self.kind >= len(self.task_types)
                                                 or self.splits[self.split][1] == 0):
            self.split, self.kind, self.game, self.tries = self.split + 1, 0, 0, 0
            if self.split < len(self.splits):
                self.rng = random.Random(f"{self.seed}-{self.splits[self.split][0]}")

    def call(self) -> Call | None:
        """The call the loop makes now (its floor plan drawn once); None when all is made."""
        if self._call is None and self.split < len(self.splits):
            split = self.splits[self.split][0]
            scene_num = self.rng.choice(G.split_floor_plans(split))
            game_seed = self.seed * 100_000 + self.split * 10_000 + self.game * 100 + self.tries
            self._call = Call(split, self.task_types[self.kind], scene_num, game_seed)
        return self._call

    def advance(self, kept: bool) -> None:
        """Past the current call: to the next game if it kept one, else to the next try
        (RuntimeError after ``TRIES`` tries without a game)."""
        call, self._call = self.call(), None
        if kept:
            self.game, self.tries = self.game + 1, 0
            if self.game == self.splits[self.split][1]:
                self.kind, self.game = self.kind + 1, 0
            self._settle()
            return
        self.tries += 1
        if self.tries == TRIES:
            raise RuntimeError(f"{call.split}: no solvable {call.task_type} game in {TRIES} floor plans "
                               f"(seed {self.seed})")

    def upcoming(self, n: int) -> list[Call]:
        """The next ``n`` calls from here (the current one first), if every try with a
        candidate task keeps its game."""
        ahead, out = copy.deepcopy(self), []
        while len(out) < n and ahead.call() is not None:
            call = ahead.call()
            out.append(call)
            try:
                ahead.advance(G.has_task(call.scene_num, call.task_type, call.seed))
            except RuntimeError:
                break
        return out


def generate_dataset(out_root: str, seed: int, games_per_task: dict, progress=None, task_types=None,
                     workers: int | None = None) -> dict:
    """Write ``games_per_task[split]`` solvable games of each of the six task types into
    ``out_root/<split folder>/`` (``task_types``: a subset of the six, default all); each
    game on a floor plan drawn (seeded) from the split's floor plans where its task type is
    valid, and no game the same problem (objects, their places and the goal:
    ``AlfWorldEnv.task_key``) as another of any split. Returns ``{split: [(task type, game
    dir, expert steps)]}``. ``progress(n)`` is called after each game. Raises RuntimeError
    when a task type finds no solvable game in 20 floor plans. ``workers``: processes that
    make games ahead of the loop (default: one per CPU core but this one's, at most
    ``MAX_WORKERS``; 0: none); the games are the same with any number."""
    for split in games_per_task:
        if split not in G.SPLIT_FOLDERS:
            raise ValueError(f"unknown ALFWorld split {split!r}; choose {', '.join(G.SPLIT_FOLDERS)}")
    kinds = list(task_types or G.TASK_TYPES.values())
    for task_type in kinds:
        if task_type not in G.TASK_TYPES.values():
            raise ValueError(f"unknown ALFWorld task type {task_type!r}; choose {', '.join(G.TASK_TYPES.values())}")
    if workers is None:
        workers = min(MAX_WORKERS, (os.cpu_count() or 1) - 1)
    made: dict = {split: [] for split in sorted(games_per_task)}
    problems: set[str] = set()  # every game's PDDL problem: no task twice, in a split or across them
    order = Order(seed, games_per_task, kinds)
    with Makers(out_root, workers) as makers:
        while (call := order.call()) is not None:
            game_dir, info = makers.make(call, order.upcoming(workers + 2))
            kept = game_dir is not None and _problem(game_dir) not in problems
            if game_dir is not None and not kept:
                shutil.rmtree(game_dir)  # a task another game (of any split) is: drawn again
                with contextlib.suppress(OSError):  # its task folder, if it held only that game
                    os.rmdir(os.path.dirname(game_dir))
            order.advance(kept)
            if kept:
                problems.add(_problem(game_dir))
                made[call.split].append((call.task_type, game_dir, info["expert_steps"]))
                if progress is not None:
                    progress(1)
    return made


def _problem(game_dir: str) -> str:
    with open(pjoin(game_dir, "game.tw-pddl"), encoding="utf-8") as f:
        return json.load(f)["pddl_problem"]


class Makers:
    """Makes the loop's calls: by worker processes ahead of the loop, or here; each into a
    scratch folder of its own (next to ``out_root``), whose files ``make`` moves into
    ``out_root`` when the loop takes the call."""

    def __init__(self, out_root: str, workers: int) -> None:
        self.out_root = out_root
        self.made = 0
        self.done: dict[Call, dict] = {}  # made ahead, not taken yet
        self.workers = [_Worker() for _ in range(workers)]  # they import alfworld while this process makes games
        parent = os.path.dirname(os.path.abspath(out_root))
        os.makedirs(parent, exist_ok=True)
        self.scratch = tempfile.mkdtemp(prefix=".alfworld-scratch-", dir=parent)

    def __enter__(self) -> "Makers":
        return self

    def __exit__(self, *exc) -> None:
        for worker in self.workers:
            worker.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def make(self, call: Call, upcoming: list[Call]) -> tuple:
        """``generate_game``'s result for ``call``, its files moved into the dataset.
        ``upcoming``: the calls predicted from here (``Order.upcoming``), for idle workers;
        while a worker still makes ``call``, this process makes one of them."""
        while call not in self.done:
            self._collect()
            if call in self.done:
                break
            held = {worker.call for worker in self.workers if worker.call is not None}
            free = [c for c in upcoming if c != call and c not in self.done and c not in held
                    and G.has_task(c.scene_num, c.task_type, c.seed)]  # a try without a task is quick: made here
            for worker in self.workers:
                if worker.idle() and free:
                    worker.start(free.pop(0), self._folder())
            holder = next((worker for worker in self.workers if worker.call == call), None)
            if holder is None:
                self.done[call] = _make(call, self._folder())
            elif free:  # something useful while the worker finishes
                self.done[free[0]] = _make(free[0], self._folder())
            else:
                self._take(holder.result())
        return self._move(call, self.done.pop(call))

    def _folder(self) -> str:
        self.made += 1
        return pjoin(self.scratch, str(self.made))

    def _collect(self) -> None:
        for worker in self.workers:
            if worker.call is not None and worker.ready():
                self._take(worker.result())

    def _take(self, result: dict | None) -> None:
        """A worker's result (None: it failed; the loop makes that call here, and any error is raised here)."""
        if result is not None:
            self.done[result["call"]] = result

    def _move(self, call: Call, result: dict) -> tuple:
        """``generate_game``'s (game dir, info), its folders and files moved from the scratch
        folder into ``out_root``: the task folders of every attempt (a failed one leaves its
        task folder empty, as ``generate_game`` does in place), the kept game's trial folder."""
        base = pjoin(self.out_root, G.SPLIT_FOLDERS[call.split])
        info = copy.deepcopy(result["info"])
        for attempt in info.get("attempts", ()):
            os.makedirs(pjoin(base, os.path.dirname(attempt["dir"])), exist_ok=True)
            attempt["dir"] = pjoin(base, attempt["dir"])
        if result["game_dir"] is None:
            return None, info
        game_dir = pjoin(base, result["game_dir"])
        os.rename(pjoin(result["folder"], result["game_dir"]), game_dir)
        if result["replay"] is not None:
            engine.remember_replay(*result["replay"])
        return game_dir, info


#: This process's engines for ``_make``: the expert's and a play env for the replay.
_ENGINES: dict = {}


def _make(call: Call, folder: str) -> dict:
    """``generate_game`` for ``call`` into ``folder`` (its paths relative to it), and the
    replay of the game it keeps (the file's digest and ``engine.replay``'s result)."""
    if not _ENGINES:
        _ENGINES.update(expert=G.make_expert_env(), play=G.make_play_env())
    game_dir, info = G.generate_game(call.scene_num, call.task_type, call.seed, folder, env=_ENGINES["expert"])
    for attempt in info.get("attempts", ()):
        attempt["dir"] = os.path.relpath(attempt["dir"], folder)
    replayed = None
    if game_dir is not None:
        gamefile = pjoin(game_dir, "game.tw-pddl")
        with contextlib.suppress(Exception):  # the check replays it for real, and reports it
            replayed = (engine.file_digest(gamefile), engine.replay(_ENGINES["play"], gamefile))
        game_dir = os.path.relpath(game_dir, folder)
    return {"call": call, "folder": folder, "game_dir": game_dir, "info": info, "replay": replayed}


class _Worker:
    """A worker process (a fresh interpreter, ``_serve``) that makes one call at a time,
    talking over two pipes of its own."""

    def __init__(self) -> None:
        to_worker, from_us = os.pipe()
        to_us, from_worker = os.pipe()
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (package_root, os.environ.get("PYTHONPATH")))))
        code = f"from mage_core.envs.alfworld.dataset import _serve; _serve({to_worker}, {from_worker})"
        self.process = subprocess.Popen([sys.executable, "-c", code], pass_fds=(to_worker, from_worker), env=env,
                                        stdin=subprocess.DEVNULL)
        os.close(to_worker)
        os.close(from_worker)
        self.send = Connection(from_us, readable=False)
        self.receive = Connection(to_us, writable=False)
        self.started = False  # it said it is up (after importing alfworld)
        self.alive = True
        self.call: Call | None = None

    def idle(self) -> bool:
        if self.alive and not self.started and self._poll():
            self.started = self._answer() == "up"
        return self.alive and self.started and self.call is None

    def start(self, call: Call, folder: str) -> None:
        try:
            self.send.send((call, folder))
            self.call = call
        except OSError:
            self.alive = False

    def ready(self) -> bool:
        """Whether its answer is there (or it died)."""
        return self.alive and self._poll()

    def result(self) -> dict | None:
        """The current call's result (blocking); None when the worker failed or died."""
        self.call = None
        answer = self._answer()
        return answer[1] if isinstance(answer, tuple) and answer[0] == "made" else None

    def _poll(self) -> bool:
        try:
            return self.receive.poll()
        except OSError:
            self.alive = False
            return False

    def _answer(self):
        try:
            return self.receive.recv()
        except (EOFError, OSError):
            self.alive = False
            return None

    def close(self) -> None:
        if self.alive and self.call is None:
            with contextlib.suppress(OSError):
                self.send.send(None)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        if self.process.poll() is None:  # still making a game nobody will take
            self.process.terminate()
            self.process.wait(timeout=5)
        self.send.close()
        self.receive.close()


def _serve(read_fd: int, write_fd: int) -> None:
    """A worker's loop: make each call it is sent, answer with the result."""
    requests, answers = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    answers.send("up")
    while True:
        try:
            message = requests.recv()
        except EOFError:
            return
        if message is None:
            return
        try:
            answers.send(("made", _make(*message)))
        except Exception as err:  # noqa: BLE001  (the loop makes the call itself and raises it there)
            answers.send(("failed", repr(err)))
