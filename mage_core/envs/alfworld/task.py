"""ALFWorld as a task (``mage_core.envs.task``): a folder of TextWorld games, the official splits."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from mage_core.envs.task import DataStage, Task, TaskData, TaskPrompt

#: The splits each stage plays (training selects on its own games).
SPLITS = {"train": ("train",), "evaluate": ("eval_in_distribution", "eval_out_of_distribution")}
#: Compact command names offered at most (c1..cN; the admissible lists seen run to ~60).
COMMANDS = 120


def _reward_bounds(settings: Any) -> tuple[float, float]:
    return 0.0, settings.success_reward


def _problems(cfg: Any, stage: DataStage) -> list[str]:
    from mage_core.envs.alfworld.env import AlfWorldDataError, split_games

    for split in SPLITS[stage]:
        try:
            split_games(cfg.env.alfworld.data_path, split)
        except AlfWorldDataError as err:
            return [f"env.alfworld.data_path: {err}"]
    return []


def _texts(cfg: Any) -> Iterator[str]:
    """The grammar (every feedback sentence) and each game's goal text and object names,
    read from the game files without playing them."""
    import json
    import re

    from mage_core.envs.alfworld.env import SPLIT_FOLDERS, split_games

    words: set[str] = set()
    for split in SPLIT_FOLDERS:
        try:
            files = split_games(cfg.env.alfworld.data_path, split)
        except ValueError:
            continue  # a split without games: TaskData.problems reports it when a stage needs it
        for gamefile in files:
            with open(gamefile) as handle:
                data = json.load(handle)
            words.update(re.findall(r"[a-z]+", data["grammar"].lower()))
            words.update(re.findall(r"[a-z]+", data["pddl_problem"].lower()))  # object and type names
    yield " ".join(sorted(words))
    yield " ".join(str(i) for i in range(1, 61))


def _action_words(env: Any) -> Iterable[str]:
    """Later states admit more commands than the first: ``c1``..``cN``; none when a command is its
    own words (``compact_candidates: words``), which the game's vocabulary holds (``_texts``)."""
    if env.settings.compact_candidates == "words":
        return ()
    return (f"c{i}" for i in range(1, COMMANDS + 1))


TASK = Task(
    name="alfworld",
    title="ALFWorld",
    report_order=2,
    params="mage_core.envs.alfworld.params:AlfWorldSettings",
    prompt=TaskPrompt(
        tag="alfworld",
        rules=(
            "You are an expert agent operating in the ALFRED embodied household environment.\n"
            "# Rules\n"
            "- You see what is around you as text and act with ONE of the admissible actions listed, e.g. "
            "go to a receptacle, open or close it, take an object from it, move an object to a receptacle, "
            "heat, cool or clean an object with an appliance, use a lamp.\n"
            "- Objects are often inside closed receptacles: search them. The task is done when its goal "
            "holds.\n"
            "# Goal\n"
            "You get several attempts at the same task in the same room. Learn from the earlier attempts "
            "where things are and finish the task in as few actions as you can."
        ),
        action_format=(
            "Choose ONE admissible action inside <action> </action> tags, e.g. <action>go to cabinet "
            "1</action>."
        ),
    ),
    env_class="mage_core.envs.alfworld.env:AlfWorldEnv",
    reward_bounds=_reward_bounds,
    in_domain_params={"split": "eval_in_distribution"},
    ood_param="split",
    ood_suite="mage_core.envs.alfworld.params:AlfWorldSuiteConfig",
    ood_defaults={"unseen_floor_plans": {}},
    # A reset takes ~1 s (fast-downward translates the problem): one random meta-episode
    # covers its prompt shapes; its words come from ``texts``.
    action_words=_action_words,
    data=TaskData(problems=_problems, params="mage_core.envs.alfworld.params:AlfWorldDataConfig",
                  generate="mage_core.envs.alfworld.commands:generate_from_params",
                  texts=_texts, corpus_meta_episodes=1),
    expert="mage_core.envs.alfworld.expert:act",  # it searches, and reads what its memory saw
    expert_memory=True,
)
