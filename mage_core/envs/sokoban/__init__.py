"""Sokoban: reverse-play level generation, an optimal BFS solver and the agent env
(METHOD.md section 10). Pure Python + numpy."""

from mage_core.envs.sokoban.env import SokobanEnv, SokobanSettings
from mage_core.envs.sokoban.generate import (
    SELECTION_MODES,
    GenerationStats,
    LevelGenerationError,
    generate_level,
    generate_level_with_stats,
)
from mage_core.envs.sokoban.level import DIRECTIONS, LEGEND, SokobanLevel
from mage_core.envs.sokoban.solver import solve, solve_reference

__all__ = [
    "DIRECTIONS",
    "LEGEND",
    "SELECTION_MODES",
    "GenerationStats",
    "LevelGenerationError",
    "SokobanEnv",
    "SokobanLevel",
    "SokobanSettings",
    "generate_level",
    "generate_level_with_stats",
    "solve",
    "solve_reference",
]
