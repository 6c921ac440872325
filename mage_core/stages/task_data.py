"""Checks that a data-backed task's files are there before a stage does any work.

WebShop plays a catalogue folder (``env.webshop.data_path``), ALFWorld a game
folder (``env.alfworld.data_path``); a missing folder, a file without a field, a
game not marked solvable, or a split without goals stops ``mage train`` and
``mage evaluate`` with one line naming the key and the fix, before anything is
written (the catalogue is then cached for the stage's own use). What each task
checks is its own (``Task.data.problems``).
"""

from __future__ import annotations

from mage_core.config import Config, ConfigError
from mage_core.envs.registry import task
from mage_core.envs.task import DataStage


def check_task_data(cfg: Config, stage: DataStage) -> None:
    """Raise ``ConfigError`` if the task of ``cfg.env.name`` cannot be played by ``stage``."""
    data = task(cfg.env.name).data
    if data is None:
        return
    problems = data.problems(cfg, stage)
    if problems:
        raise ConfigError("params", problems)
