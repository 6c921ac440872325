"""ALFWorld's games in TextWorld's PDDL engine: the hand-coded expert that decides
whether a generated game is kept, and the play env and walkthrough replay that check
a dataset (``generate`` re-exports all of it; its callers import it from there).

The alfworld and textworld imports are inside the functions, so importing this
module stays cheap; like ``generate``, it points $ALFWORLD_DATA away first.
"""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
from os.path import join as pjoin

# Importing alfworld.info creates $ALFWORLD_DATA (default ~/.cache/alfworld): point it to a
# temporary folder before any alfworld import (as generate does). Nothing here reads that folder.
os.environ.setdefault("ALFWORLD_DATA", pjoin(tempfile.gettempdir(), "alfworld_data_unused"))


# --------------------------------------------------------------------------------------------
# The expert check (what alfworld-generate does)
# --------------------------------------------------------------------------------------------

def patch_handcoded_expert_move_command():
    """Fix a bug of alfworld 0.4.2's hand-coded expert (still in upstream master).

    The grammar renamed the put command to "move X to Y", but BasePolicy.update_state_tracking
    still looks for "put" in the last command, so after a successful "move" the expert still
    believes it holds the object. For pick_two_obj_and_place it then walks back and forth
    trying to return the first object (and times out). This translates the command back to
    the form the tracker expects; nothing else of the expert changes. Idempotent.
    """
    from alfworld.agents.expert import handcoded_expert as he
    if getattr(he.BasePolicy.update_state_tracking, "_mage_patched", False):
        return
    original = he.BasePolicy.update_state_tracking

    def update_state_tracking(self, game_state, last_action):
        if last_action.startswith("move ") and " to " in last_action:
            last_action = "put " + last_action[len("move "):]
        return original(self, game_state, last_action)

    update_state_tracking._mage_patched = True
    he.BasePolicy.update_state_tracking = update_state_tracking


def make_expert_env():
    """The environment alfworld-generate uses to check solvability (its translation, parses
    and derivations memoized: cache.py, derive.py; the games it writes are the same)."""
    import textworld
    from textworld.envs import PddlEnv
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredInfos

    from mage_core.envs.alfworld import cache, grammar

    cache.install()
    grammar.install()  # no eval of a game's grammar expressions
    request_infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    env = PddlEnv(request_infos)
    env = AlfredDemangler(env, shuffle=False)
    env = AlfredInfos(env)
    return AlfredExpert(env, expert_type="handcoded")


def expert_walkthrough(env, gamefile: str, max_steps: int = 200, seed: int = 0):
    """Follow the hand-coded expert to the end (alfworld-generate's is_solvable, with a step
    cap). Returns (commands, won, error)."""
    random.seed(seed)  # the expert picks among same-class objects with the global `random`
    commands = []
    try:
        env.load(gamefile)
        state = env.reset()
        if state["won"]:
            return commands, True, "won at reset"
        for _ in range(max_steps):
            cmd = state["extra.expert_plan"][0]
            state, _, done = env.step(cmd)
            commands.append(cmd)
            if state["won"]:
                return commands, True, None
        return commands, False, "step cap %d reached" % max_steps
    except Exception as e:  # HandCodedAgentFailed / Timeout surface as exceptions
        return commands, False, "%s: %s" % (type(e).__name__, e)


# --------------------------------------------------------------------------------------------
# Checking a dataset: every game's walkthrough wins in the real engine
# --------------------------------------------------------------------------------------------

def game_files(root: str) -> list:
    """Every ``game.tw-pddl`` under ``root`` (sorted), skipping what ALFWorld skips
    (paths with "movable" or "Sliced")."""
    out = []
    for folder, _, files in os.walk(root):
        if "game.tw-pddl" in files and "movable" not in folder and "Sliced" not in folder:
            out.append(pjoin(folder, "game.tw-pddl"))
    return sorted(out)


def make_play_env(planner: bool = False):
    """TextWorld's PDDL engine with ALFWorld's wrappers and no expert: what an agent plays
    (its translation and template parses memoized: cache.py). ``planner``: the state also
    holds ``policy_commands``, the planner's shortest way to the goal from there."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from textworld.envs import PddlEnv

    from mage_core.envs.alfworld import cache, grammar

    cache.install()
    grammar.install()  # no eval of a game's grammar expressions
    infos = textworld.EnvInfos(won=True, admissible_commands=True, policy_commands=planner, extras=["gamefile"])
    return AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))


#: Replays done in this process, or by a worker of ``dataset.generate_dataset``
#: (``remember_replay``): the result by the SHA-256 of the game file's bytes.
_REPLAYS: dict[str, tuple] = {}


def file_digest(path: str) -> str:
    """The SHA-256 of a file's bytes (what ``replay``'s memo is keyed by)."""
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def remember_replay(digest: str, result: tuple) -> None:
    """Take the result of a replay done in another process (``file_digest`` of its file)."""
    _REPLAYS[digest] = tuple(result)


def replay(env, gamefile: str) -> tuple:
    """Play a game's stored walkthrough in the real engine: (won, steps, problem or None).
    A command the game does not admit is a failure. A file that is no game, or whose
    grammar holds code, raises ``AlfWorldDataError`` before the engine loads it. The
    result is a function of the file's bytes (the engine reads nothing else): a file whose
    bytes were replayed before in this process, or by a worker that generated it, is not
    played again."""
    from mage_core.envs.alfworld.grammar import check_game_file

    digest = file_digest(gamefile)
    if digest in _REPLAYS:
        return _REPLAYS[digest]
    data = check_game_file(gamefile)
    _REPLAYS[digest] = result = _play_walkthrough(env, gamefile, data.get("walkthrough"), data.get("solvable"))
    return result


def _play_walkthrough(env, gamefile: str, walkthrough, solvable) -> tuple:
    if not solvable or not walkthrough:
        return False, 0, "marked unsolvable or without a walkthrough"
    env.load(gamefile)
    state = env.reset()
    for step, command in enumerate(walkthrough, start=1):
        if command not in state["admissible_commands"]:
            return False, step, f"step {step}: {command!r} is not admissible"
        state, _, done = env.step(command)
        if state["won"]:
            return True, step, None
    return False, len(walkthrough), "the walkthrough ends without winning"
