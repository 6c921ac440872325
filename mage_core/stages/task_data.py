"""Checks that a data-backed task's files are there before a stage does any work.

WebShop plays a catalogue folder (``env.webshop.data_path``), ALFWorld a game
folder (``env.alfworld.data_path``); a missing folder, a file without a field, a
game not marked solvable, or a split without goals stops ``mage train`` and
``mage evaluate`` with one line naming the key and the fix, before anything is
written (the catalogue is then cached for the stage's own use).
"""

from __future__ import annotations

import dataclasses

from mage_core.config import Config, ConfigError

#: The WebShop splits each stage plays.
WEBSHOP_SPLITS = {"train": ("train", "select"), "evaluate": ("eval", "ood")}


#: The ALFWorld splits each stage plays (training selects on its own games).
ALFWORLD_SPLITS = {"train": ("train",), "evaluate": ("eval_in_distribution", "eval_out_of_distribution")}


def check_task_data(cfg: Config, stage: str) -> None:
    """Raise ``ConfigError`` if the task of ``cfg.env.name`` cannot be played by ``stage``."""
    if cfg.env.name == "alfworld":
        from mage_core.envs.alfworld.env import AlfWorldDataError, split_games

        for split in ALFWORLD_SPLITS[stage]:
            try:
                split_games(cfg.env.alfworld.data_path, split)
            except AlfWorldDataError as err:
                raise ConfigError("params", [f"env.alfworld.data_path: {err}"]) from None
        return
    if cfg.env.name != "webshop":
        return
    from mage_core.envs.webshop.catalogue import CatalogueError
    from mage_core.envs.webshop.env import load_shop, split_goals

    settings = cfg.env.webshop.settings()
    try:
        catalogue, _ = load_shop(settings.data_path, settings.load_seed, settings.skip_unknown_goals)
        for split in WEBSHOP_SPLITS[stage]:
            split_goals(catalogue, dataclasses.replace(settings, split=split))
    except CatalogueError as err:
        raise ConfigError("params", [f"env.webshop.data_path: {err}"]) from None
