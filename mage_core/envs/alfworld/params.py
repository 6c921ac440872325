"""``env.alfworld``, ``evaluation.ood.alfworld`` and ``data.alfworld`` of params.yaml: ALFWorld's
settings, its out-of-domain suite and its generated games."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mage_core.envs.alfworld.layout import SPLIT_FOLDERS
from mage_core.envs.params import EnvSettings, set_in_code
from mage_core.schema import FinitePositiveFloat, NonNegativeFloat, NonNegativeInt, PositiveInt, Strict


class AlfWorldSettings(EnvSettings):
    """ALFWorld (docs/method.md section 10: 10 turns, 1024 response tokens, no length
    penalty; reward as verl-agent); the game folder (``mage alfworld generate``, or the
    official json_2.1.1). The code that builds an environment chooses its ``split`` (a
    suite's ``Task.in_domain_params`` / ``ood_param``) and ``planner``: ``planner_commands()``
    may plan a shortest way to the goal from the current state (TextWorld's planner, which
    knows where everything is), for ``expert.omniscient`` in tests and benchmarks; off in
    play and in ``mage sft`` (whose expert searches). ``compact_candidates``: how the compact
    prompt offers the admissible commands and the policy answers, ``index`` (``c3``: one token a
    command) or ``words`` (the command's own words, scored token by token, so that the policy can
    copy a place its prompt names: docs/learning.md)."""

    data_path: str = "data/alfworld"
    max_turns: PositiveInt = 10
    success_reward: FinitePositiveFloat = 10.0
    length_penalty_coef: NonNegativeFloat = 0.0
    max_response_tokens: PositiveInt = 1024
    compact_candidates: Literal["index", "words"] = "index"
    split: Literal[tuple(SPLIT_FOLDERS)] = set_in_code("train")  # type: ignore[valid-type]
    planner: bool = set_in_code(False)


class AlfWorldSuiteConfig(Strict):
    """An out-of-domain ALFWorld suite: the games of a split never trained on."""

    split: Literal["eval_out_of_distribution"] = "eval_out_of_distribution"


class AlfWorldDataConfig(Strict):
    """``data.alfworld``: the generated ALFWorld games (``mage data generate alfworld``): games per task type."""

    seed: NonNegativeInt = 0
    train: NonNegativeInt = 2
    valid_seen: NonNegativeInt = 1
    valid_unseen: NonNegativeInt = 1
    task_types: list[Literal["pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
                             "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
                             "pick_two_obj_and_place"]] = Field(
        default_factory=lambda: ["pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
                                 "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
                                 "pick_two_obj_and_place"], min_length=1)
