"""Every environment's settings, declared once: ``EnvSettings`` and one subclass per
environment in its folder (``envs/<name>/params.py``, named by its ``Task.params``).

The same frozen model is the environment's section of params.yaml (``env.<name>``:
``mage_core.config`` assembles ``env`` from the registry) and what its agent environment
takes (``make_env(game, cfg.env.<game>, ...)``). Its rules are checked once, wherever a
value comes from: reading params.yaml (``mage validate``: one line per problem naming the
dotted key, ``env.minesweeper.num_mines: ...``), building one in code (a pydantic
``ValidationError``, a ``ValueError`` naming the class and the field) and changing one
(``replace``: an out-of-domain suite's ``num_boxes``, a split; pydantic's
``model_copy(update=...)`` would check nothing). A few settings are chosen by the code that
builds an environment, never by params.yaml (the split it plays, ALFWorld's planner):
``set_in_code`` declares them; params.yaml naming one is told it is an unknown key.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from mage_core.schema import NonNegativeFloat, PositiveInt, Strict

#: The validation context key that marks values read from a params file (``config.parse_config``).
PARAMS_FILE = "params_file"
_SET_IN_CODE = "set_in_code"


def set_in_code(default: Any) -> Any:
    """A setting the code that builds an environment chooses (a suite's split, the expert's
    planner): not a key of params.yaml, and left out of its dumps (``model_dump``), so the
    resolved config, its digest and the protocol key hold the file's keys only."""
    return Field(default, exclude=True, json_schema_extra={_SET_IN_CODE: True})


class EnvSettings(Strict):
    """What every environment's settings hold besides its own: the per-task penalties
    (docs/method.md section 3 and 10), read by the rollout, not by the environment."""

    invalid_action_penalty: NonNegativeFloat = 0.5
    length_penalty_coef: NonNegativeFloat = 2.0
    max_response_tokens: PositiveInt = 3072

    @field_validator("*", mode="before")
    @classmethod
    def _not_from_params(cls, value: Any, info: ValidationInfo) -> Any:
        """A ``set_in_code`` setting given in params.yaml is an unknown key there, as before."""
        extra = cls.model_fields[info.field_name].json_schema_extra if info.field_name else None
        if isinstance(extra, dict) and extra.get(_SET_IN_CODE) and (info.context or {}).get(PARAMS_FILE):
            raise PydanticCustomError("extra_forbidden", "Extra inputs are not permitted")
        return value

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes``, validated as a new one is (every rule, those across
        fields included: MineSweeper's mines that fit the board); ValueError otherwise."""
        return type(self).model_validate({**self.__dict__, **changes})
