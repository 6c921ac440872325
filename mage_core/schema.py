"""Building blocks of the params.yaml schema (pydantic v2)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
Probability = Annotated[float, Field(ge=0, le=1)]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
FiniteNonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
FinitePositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Strict(BaseModel):
    """Base of every section: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ConfigError(Exception):
    """Every problem found in a params file or on the command line, one ``key: message`` per
    line (raised by the loader, ``mage_core.config``, and by whatever checks a value the loader
    cannot: a game's own commands among them)."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: {len(problems)} problem(s)\n" + "\n".join(f"  {p}" for p in problems))
