"""ALFWorld games generated offline, in the official file format (issue 13).

ALFWorld's official games (``alfworld-download``) were made in two steps that both need the
THOR simulator: ALFRED's ``gen/scripts/generate_trajectories.py`` samples a task and spawns
objects with THOR physics, then ``scripts/augment_pddl_states.py`` dumps the THOR scene into
``initial_state.pddl``. Neither script ships in the wheel and both need THOR. What the wheel
does ship is enough to rebuild the second step without THOR:

* ``alfworld/gen/layouts/FloorPlan<N>-objects.json``: the object types present in the scene;
* ``alfworld/gen/layouts/FloorPlan<N>-openable.json``: THOR object id of (most) static
  receptacles -> the agent pose ``[x, z, rotation, horizon]`` from which it is used;
* ``alfworld/gen/layouts/FloorPlan<N>-layout.npy``: the reachable (x, z) grid points;
* ``alfworld/gen/constants.py``: the ALFRED object tables (receptacle compatibilities,
  heatable/coolable/cleanable/toggleable objects, scene splits, goals valid per room type);
* ``alfworld/gen/goal_library.py``: the PDDL goal of every task type;
* ``alfworld/data/alfred.pddl`` and ``alfworld/data/alfred.twl2``: ALFWorld's domain and grammar.

This module writes the problem in the format of ``augment_pddl_states.state_to_pddl`` from
those files, writes ``traj_data.json`` (task_type, pddl_params, scene) and ``game.tw-pddl``
exactly as ``alfworld-generate`` does, and keeps a game only if ALFWorld's own hand-coded
expert wins it in TextWorld's PDDL engine (the same check ``alfworld-generate`` runs).

What THOR decided and this module samples instead (documented approximations):
* which receptacle each object starts in (THOR's random spawn -> uniform over the receptacles
  allowed by ``constants.VAL_RECEPTACLE_OBJECTS``) and how many instances (1..3, target 1..4,
  as ALFRED's MAX_NUM_OF_OBJ_INSTANCES / PICKUP_REPEAT_MAX);
* static receptacles missing from ``-openable.json`` (StoveBurner, Toaster, CoffeeMachine,
  most GarbageCans, towel holders...) get one instance at a random reachable point;
* lamps (not in VAL_RECEPTACLE_OBJECTS; in THOR they stand on furniture) are put on a
  furniture receptacle of the scene;
* scenery that cannot be picked up (houseplants, paper towel rolls...) is left out.

Nothing of ALFWorld's rules is re-implemented: playing, admissible commands, ``won`` and the
expert are alfworld's / textworld's own classes.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import random
import tempfile
from dataclasses import dataclass, field
from os.path import join as pjoin

# Importing alfworld.info creates $ALFWORLD_DATA (default ~/.cache/alfworld): point it to a
# temporary folder before any alfworld import. Nothing in this module reads that folder.
os.environ.setdefault("ALFWORLD_DATA", pjoin(tempfile.gettempdir(), "alfworld_data_unused"))

try:
    import alfworld.gen
    import alfworld.gen.constants as C
    import alfworld.gen.goal_library as glib
    from alfworld.agents.utils.misc import add_task_to_grammar
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH
except ImportError as err:  # pragma: no cover - the alfworld extra is part of `make setup`
    raise ImportError("ALFWorld needs the alfworld package: pip install -e '.[alfworld]' (make setup installs it; "
                      "its build runs `python`, so put the venv's bin first on PATH)") from err
import numpy as np

from mage_core.envs.alfworld.engine import (
    expert_walkthrough, game_files, make_expert_env, make_play_env, patch_handcoded_expert_move_command, replay,
)
from mage_core.envs.alfworld.task_types import (
    GOAL_TO_APPLIANCE, GOAL_TO_INVALID_RECEPTACLE, GOAL_TO_PICKUP_TYPE, TASK_TYPES,
)

#: What other modules import from here; the functions that play games in the engine
#: (the expert check, a dataset's check) are engine.py's, ``TASK_TYPES`` task_types.py's.
__all__ = [
    "SPLIT_FOLDERS", "TASK_TYPES", "FloorPlan", "build_receptacles", "candidate_params", "expert_walkthrough",
    "game_files", "generate_game", "has_task", "make_expert_env", "make_play_env", "make_traj_data",
    "patch_handcoded_expert_move_command", "populate_objects", "problem_pddl", "replay", "split_floor_plans",
]

LAYOUTS_DIR = pjoin(alfworld.gen.__path__[0], "layouts")

STATIC_RECEPTACLES = set(C.RECEPTACLES) - C.MOVABLE_RECEPTACLES_SET
# Objects that can be placed somewhere (all pickupable in THOR).
PLACEABLE = set().union(*C.VAL_RECEPTACLE_OBJECTS.values())
LAMPS = set(C.VAL_ACTION_OBJECTS["Toggleable"])  # DeskLamp, FloorLamp
# Furniture a lamp may stand on (approximation of THOR's parentReceptacles).
LAMP_RECEPTACLES = ["Desk", "SideTable", "Dresser", "Shelf", "DiningTable", "CoffeeTable", "TVStand", "CounterTop"]
# THOR ids of basins are "Sink|x|y|z|SinkBasin"; alfworld's Demangler relies on that form.
BASIN_PARENT = {"SinkBasin": "Sink", "BathtubBasin": "Bathtub"}


def fix_pddl_str_chars(s: str) -> str:
    """Same mangling as augment_pddl_states.fix_pddl_str_chars ('#' becomes the type dash)."""
    for a, b in (("-", "_minus_"), ("#", "-"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        s = s.replace(a, b)
    return s


def object_type(thor_id: str) -> str:
    parts = thor_id.split("|")
    return parts[-1] if len(parts) == 5 else parts[0]


def scene_type(scene_num: int) -> str:
    return next(k for k, r in C.SCENE_TYPE.items() if scene_num in r)


def _fmt(v: float) -> str:
    return ("+" if v >= 0 else "-") + "%05.2f" % abs(v)


def thor_id(otype: str, x: float, y: float, z: float) -> str:
    if otype in BASIN_PARENT:
        return "%s|%s|%s|%s|%s" % (BASIN_PARENT[otype], _fmt(x), _fmt(y), _fmt(z), otype)
    return "%s|%s|%s|%s" % (otype, _fmt(x), _fmt(y), _fmt(z))


def loc_id(x: float, z: float, rot: float, horizon: float) -> str:
    """ALFRED location name: grid coordinates (0.25 m), rotation / 90, camera horizon."""
    return "loc|%d|%d|%d|%d" % (round(x / C.AGENT_STEP_SIZE), round(z / C.AGENT_STEP_SIZE), round(rot / 90) % 4, horizon)


# --------------------------------------------------------------------------------------------
# Floor plans
# --------------------------------------------------------------------------------------------

@dataclass
class FloorPlan:
    scene_num: int
    types: set                      # object types in the scene (objects.json)
    receptacle_points: dict         # THOR receptacle id -> [x, z, rot, horizon] (openable.json)
    reachable: np.ndarray           # (n, 2) reachable x, z points (layout.npy)

    @classmethod
    def load(cls, scene_num: int) -> "FloorPlan":
        name = "FloorPlan%d" % scene_num
        types = set(json.load(open(pjoin(LAYOUTS_DIR, name + "-objects.json"))))
        points = json.load(open(pjoin(LAYOUTS_DIR, name + "-openable.json")))
        reachable = np.load(pjoin(LAYOUTS_DIR, name + "-layout.npy"))
        return cls(scene_num, types, points, reachable)


def available_floor_plans() -> list:
    nums = []
    for f in os.listdir(LAYOUTS_DIR):
        if f.endswith("-objects.json"):
            nums.append(int(f[len("FloorPlan"):-len("-objects.json")]))
    return sorted(nums)


# --------------------------------------------------------------------------------------------
# Scene = receptacles (with locations) + object instances (each in one receptacle)
# --------------------------------------------------------------------------------------------

@dataclass
class Scene:
    floor_plan: FloorPlan
    receptacles: dict = field(default_factory=dict)   # id -> location name
    objects: dict = field(default_factory=dict)       # id -> receptacle id
    agent_location: str = ""

    def receptacles_of(self, rtype: str) -> list:
        return sorted(r for r in self.receptacles if object_type(r) == rtype)

    def receptacle_types(self) -> set:
        return {object_type(r) for r in self.receptacles}

    def object_types(self) -> set:
        return {object_type(o) for o in self.objects}


def build_receptacles(fp: FloorPlan, rng: random.Random) -> Scene:
    """Static receptacles of the floor plan, each with a distinct location."""
    scene = Scene(fp)
    used = set()
    free_points = [tuple(p) for p in fp.reachable.tolist()]

    def unique(loc: str) -> str:
        # Two receptacles can share a precomputed pose (e.g. stacked drawers). Location names
        # are never shown to the player, so make them distinct by bumping the horizon field.
        while loc in used:
            head, hor = loc.rsplit("|", 1)
            loc = "%s|%d" % (head, int(hor) + 1)
        used.add(loc)
        return loc

    for rid, (x, z, rot, hor) in sorted(fp.receptacle_points.items()):
        if object_type(rid) in STATIC_RECEPTACLES:
            scene.receptacles[rid] = unique(loc_id(x, z, rot, hor))

    # Receptacle types listed in objects.json but without a precomputed pose: one instance at a
    # random reachable point (THOR would have given the real count and position).
    missing = sorted((fp.types & STATIC_RECEPTACLES) - scene.receptacle_types())
    for rtype in missing:
        x, z = rng.choice(free_points)
        rid = thor_id(rtype, x + rng.uniform(-0.5, 0.5), rng.uniform(0.0, 1.5), z + rng.uniform(-0.5, 0.5))
        scene.receptacles[rid] = unique(loc_id(x, z, rng.choice([0, 90, 180, 270]), 30))

    # The agent starts at a reachable point that is no receptacle's location, so the intro
    # reads "You are in the middle of a room." (grammar rule look.feedback).
    for _ in range(1000):
        x, z = rng.choice(free_points)
        loc = loc_id(x, z, rng.choice([0, 90, 180, 270]), 30)
        if loc not in used:
            scene.agent_location = loc
            break
    return scene


def _valid_receptacles(scene: Scene, otype: str, exclude_types=()) -> list:
    if otype in LAMPS:
        allowed = set(LAMP_RECEPTACLES)
    else:
        allowed = {r for r, objs in C.VAL_RECEPTACLE_OBJECTS.items() if otype in objs}
    allowed -= set(exclude_types)
    return sorted(r for r in scene.receptacles if object_type(r) in allowed)


def populate_objects(scene: Scene, params: dict, task_type: str, rng: random.Random) -> None:
    """Spawn object instances in receptacles (stands in for THOR's InitialRandomSpawn)."""
    target, parent = params["object_target"], params["parent_target"]
    fp = scene.floor_plan
    counter = 0

    def spawn(otype: str, n: int, exclude_types=()):
        nonlocal counter
        receps = _valid_receptacles(scene, otype, exclude_types)
        for _ in range(n if receps else 0):
            r = rng.choice(receps)
            # Fake position, only used to make a unique THOR-like id (the Demangler numbers
            # same-class objects in sorted-id order, so numbering is random too).
            oid = None
            while oid is None or oid in scene.objects:
                counter += 1
                oid = thor_id(otype, rng.uniform(-3, 3), rng.uniform(0, 2), rng.uniform(-3, 3) + counter * 1e-2)
            scene.objects[oid] = r

    for otype in sorted(fp.types):
        if otype == target:
            # Never start a target where the goal wants it (the game would be won at reset).
            # Nor in the appliance of a transform task (a target starting in the fridge would
            # already be cool: augment_pddl_states marks such objects isCool).
            n_min = 2 if task_type == "pick_two_obj_and_place" else 1
            exclude = {parent, GOAL_TO_APPLIANCE.get(task_type)} - {"", None}
            spawn(otype, rng.randint(n_min, C.PICKUP_REPEAT_MAX), exclude_types=exclude)
        elif otype in LAMPS:  # including the toggle target: one lamp on some furniture
            spawn(otype, 1)
        elif otype in PLACEABLE:
            spawn(otype, rng.randint(1, C.MAX_NUM_OF_OBJ_INSTANCES))


# --------------------------------------------------------------------------------------------
# Task sampling (constraints of ALFRED's sampler)
# --------------------------------------------------------------------------------------------

def candidate_params(scene: Scene, task_type: str, respect_room_types: bool = True,
                     allow_floorlamp: bool = False) -> list:
    """All feasible (object_target, parent_target, toggle_target) triples for this scene."""
    fp = scene.floor_plan
    if respect_room_types and scene_type(fp.scene_num) not in C.GOALS_VALID[task_type]:
        return []
    rtypes = scene.receptacle_types()
    appliance = GOAL_TO_APPLIANCE.get(task_type)
    if appliance and appliance not in rtypes:
        return []
    objs = sorted(fp.types & PLACEABLE)
    if task_type in GOAL_TO_PICKUP_TYPE:
        objs = [o for o in objs if o in C.VAL_ACTION_OBJECTS[GOAL_TO_PICKUP_TYPE[task_type]]]
    out = []
    if task_type == "look_at_obj_in_light":
        lamps = sorted(fp.types & ({"DeskLamp", "FloorLamp"} if allow_floorlamp else {"DeskLamp"}))
        lamps = [lamp for lamp in lamps if any(object_type(r) in LAMP_RECEPTACLES for r in scene.receptacles)]
        for o in objs:
            if o in C.MOVABLE_RECEPTACLES_SET:
                continue
            for lamp in lamps:
                out.append(dict(object_target=o, parent_target="", toggle_target=lamp))
        return out
    for o in objs:
        for r in sorted(rtypes):
            if r in GOAL_TO_INVALID_RECEPTACLE.get(task_type, ()):
                continue
            if o not in C.VAL_RECEPTACLE_OBJECTS.get(r, ()):
                continue
            # The target must be able to start somewhere other than the goal receptacle type
            # and the appliance (see populate_objects).
            if not _valid_receptacles(scene, o, exclude_types={r, appliance} - {None}):
                continue
            out.append(dict(object_target=o, parent_target=r, toggle_target=""))
    return out


def make_traj_data(scene: Scene, task_type: str, params: dict, seed: int) -> dict:
    fp = scene.floor_plan
    pddl_params = dict(object_target=params["object_target"], parent_target=params["parent_target"],
                       toggle_target=params["toggle_target"], mrecep_target="", object_sliced=False)
    return {
        "task_id": "trial_gen_%d_%s_%d" % (fp.scene_num, task_type, seed),
        "task_type": task_type,
        "pddl_params": pddl_params,
        "scene": {"floor_plan": "FloorPlan%d" % fp.scene_num, "scene_num": fp.scene_num, "random_seed": seed},
        # alfworld only reads this with goal_desc_human_anns_prob > 0; keep the key for compatibility.
        "turk_annotations": {"anns": []},
        "generator": "mage_core.envs.alfworld.generate (offline, no THOR)",
    }


# --------------------------------------------------------------------------------------------
# PDDL problem (format of scripts/augment_pddl_states.py: TextWorldTaskGameStateFullKnowledge)
# --------------------------------------------------------------------------------------------

def goal_pddl(traj_data: dict) -> str:
    p = traj_data["pddl_params"]
    goal = glib.gdict[traj_data["task_type"]]["pddl"]
    return goal.format(obj=p["object_target"], recep=p["parent_target"],
                       toggle=p["toggle_target"], mrecep=p["mrecep_target"])


def problem_pddl(scene: Scene, traj_data: dict) -> str:
    """Text of initial_state.pddl. Fact order does not matter: textworld 1.7 lists receptacles and
    objects in sorted order (the intro reads "a cabinet 13, a cabinet 12, ..., a cabinet 1, ...")."""
    params = traj_data["pddl_params"]
    receptacle_types = copy.deepcopy(C.RECEPTACLES) - set(C.MOVABLE_RECEPTACLES)
    type_objects = sorted(copy.deepcopy(C.OBJECTS_SET) - receptacle_types)

    receptacles = sorted(scene.receptacles)
    objects = sorted(scene.objects)
    otype = {o: object_type(o) for o in objects}
    rtype = {r: object_type(r) for r in receptacles}
    locations = sorted(set(scene.receptacles.values())) + [scene.agent_location]

    head = "\n(define (problem plan_%s)\n(:domain alfred)\n(:objects\nagent1 # agent\n" % traj_data["task_id"]
    head += "\n".join(o + " # object" for o in type_objects) + "\n"
    head += "\n".join(o + "Type # otype" for o in type_objects) + "\n"
    head += "\n".join(r + "Type # rtype" for r in sorted(receptacle_types)) + "\n"
    head += "\n".join(o + " # object" for o in objects) + "\n"
    head += "\n".join(r + " # receptacle" for r in receptacles) + "\n"
    head += "\n".join(loc + " # location" for loc in locations) + "\n)\n"

    types_in_scene = set(otype.values())
    init = []
    init += ["(receptacleType %s %sType)" % (r, rtype[r]) for r in receptacles]
    init += ["(objectType %s %sType)" % (o, otype[o]) for o in objects]
    for r_t in sorted(set(rtype.values())):
        for o_t in sorted(C.VAL_RECEPTACLE_OBJECTS.get(r_t, ())):
            if o_t in types_in_scene:
                init.append("(canContain %sType %sType)" % (r_t, o_t))
    init += ["(pickupable %s)" % o for o in objects if otype[o] in PLACEABLE]
    init += ["(isReceptacleObject %s)" % o for o in objects if otype[o] in C.MOVABLE_RECEPTACLES_SET]
    init += ["(openable %s)" % r for r in receptacles if rtype[r] in C.OPENABLE_CLASS_SET]
    init += ["(atLocation agent1 %s)" % scene.agent_location]
    init += ["(cleanable %s)" % o for o in objects if otype[o] in C.VAL_ACTION_OBJECTS["Cleanable"]]
    init += ["(heatable %s)" % o for o in objects if otype[o] in C.VAL_ACTION_OBJECTS["Heatable"]]
    init += ["(coolable %s)" % o for o in objects if otype[o] in C.VAL_ACTION_OBJECTS["Coolable"]]
    init += ["(toggleable %s)" % o for o in objects if otype[o] in C.VAL_ACTION_OBJECTS["Toggleable"]]
    init += ["(sliceable %s)" % o for o in objects if otype[o] in C.VAL_ACTION_OBJECTS["Sliceable"]]
    # augment_pddl_states marks target objects that start in a fridge as already cool.
    init += ["(isCool %s)" % o for o in objects
             if otype[o] == params["object_target"] and rtype[scene.objects[o]] == "Fridge"]
    init += ["(inReceptacle %s %s)" % (o, scene.objects[o]) for o in objects]
    init += ["(receptacleAtLocation %s %s)" % (r, scene.receptacles[r]) for r in receptacles]

    body = "(:init\n" + "\n".join(init) + "\n)\n"
    return fix_pddl_str_chars(head) + "\n" + fix_pddl_str_chars(body) + "\n" + fix_pddl_str_chars(goal_pddl(traj_data))


# --------------------------------------------------------------------------------------------
# Game files, kept when the expert wins them (what alfworld-generate does; engine.py plays them)
# --------------------------------------------------------------------------------------------

def write_game(out_dir: str, traj_data: dict, pddl_problem: str, rng: random.Random) -> str:
    """Write traj_data.json, initial_state.pddl and game.tw-pddl; return the game file path."""
    os.makedirs(out_dir, exist_ok=True)
    with open(pjoin(out_dir, "traj_data.json"), "w") as f:
        json.dump(traj_data, f, indent=2)
    with open(pjoin(out_dir, "initial_state.pddl"), "w") as f:
        f.write(pddl_problem)
    # add_task_to_grammar -> get_templated_task_desc draws the template with the *global*
    # `random`; seed it so the goal sentence is reproducible.
    random.seed(rng.random())
    grammar = add_task_to_grammar(open(ALFRED_TWL2_PATH).read(), traj_data)
    gamedata = {"pddl_domain": open(ALFRED_PDDL_PATH).read(), "grammar": grammar,
                "pddl_problem": pddl_problem, "solvable": None, "walkthrough": None}
    gamefile = pjoin(out_dir, "game.tw-pddl")
    with open(gamefile, "w") as f:
        json.dump(gamedata, f)
    return gamefile


def game_dir_name(traj_data: dict) -> str:
    p = traj_data["pddl_params"]
    recep = p["toggle_target"] if traj_data["task_type"] == "look_at_obj_in_light" else p["parent_target"]
    return "%s-%s-None-%s-%d" % (traj_data["task_type"], p["object_target"], recep, traj_data["scene"]["scene_num"])


def attempt_rng(scene_num: int, task_type: str, seed: int, attempt: int) -> random.Random:
    """The generator of one attempt of ``generate_game``: its scene, task and objects."""
    return random.Random("%d-%s-%d-%d" % (scene_num, task_type, seed, attempt))


@functools.lru_cache(maxsize=4096)
def has_task(scene_num: int, task_type: str, seed: int) -> bool:
    """Whether ``generate_game`` finds a task of this type to try on this floor plan (the
    candidates of its first attempt; it returns at once, writing nothing, when there is none)."""
    scene = build_receptacles(FloorPlan.load(scene_num), attempt_rng(scene_num, task_type, seed, 0))
    return bool(candidate_params(scene, task_type))


def generate_game(scene_num: int, task_type: str, seed: int, out_root: str, env=None,
                  max_tries: int = 10, max_expert_steps: int = 200, **kwargs):
    """Write one solvable game for (floor plan, task type). Returns (game_dir, info) or (None, info).

    The game is kept only if the hand-coded expert wins it within max_expert_steps; its
    commands are stored as the game's walkthrough (as alfworld-generate does)."""
    patch_handcoded_expert_move_command()
    fp = FloorPlan.load(scene_num)
    attempts = []
    for attempt in range(max_tries):
        rng = attempt_rng(scene_num, task_type, seed, attempt)
        scene = build_receptacles(fp, rng)
        cands = candidate_params(scene, task_type, **kwargs)
        if not cands:
            return None, {"error": "no feasible task of this type in FloorPlan%d" % scene_num}
        env = env or make_expert_env()
        params = rng.choice(cands)
        populate_objects(scene, params, task_type, rng)
        traj_data = make_traj_data(scene, task_type, params, seed * 1000 + attempt)
        out_dir = pjoin(out_root, game_dir_name(traj_data), "trial_s%d_a%d" % (seed, attempt))
        gamefile = write_game(out_dir, traj_data, problem_pddl(scene, traj_data), rng)
        commands, won, err = expert_walkthrough(env, gamefile, max_expert_steps, seed=seed)
        gamedata = json.load(open(gamefile))
        gamedata["walkthrough"] = commands if won else None
        gamedata["solvable"] = bool(won)
        json.dump(gamedata, open(gamefile, "w"))
        attempts.append({"dir": out_dir, "won": won, "steps": len(commands), "error": err})
        if won:
            return out_dir, {"attempts": attempts, "params": params, "expert_steps": len(commands)}
        # Keep failed attempts out of the dataset folder (AlfredTWEnv also skips solvable=False).
        for name in ("game.tw-pddl", "traj_data.json", "initial_state.pddl"):
            os.remove(pjoin(out_dir, name))
        os.rmdir(out_dir)
    return None, {"attempts": attempts, "error": "expert failed on %d attempts" % max_tries}


# --------------------------------------------------------------------------------------------
# The split folders (dataset.py writes a dataset of them)
# --------------------------------------------------------------------------------------------

#: Split folder -> the floor plans its games use: ALFWorld's own names (json_2.1.1/...):
#: ``train`` and ``valid_seen`` (unseen games in the training floor plans) on ALFRED's
#: training scenes, ``valid_unseen`` (out of distribution) on ALFRED's test scenes.
from mage_core.envs.alfworld.layout import SPLIT_FOLDERS  # noqa: E402  (split -> official folder name)


def split_floor_plans(split: str) -> list:
    if split == "eval_out_of_distribution":
        return sorted(C.TEST_SCENE_NUMBERS)
    return sorted(C.TRAIN_SCENE_NUMBERS)
