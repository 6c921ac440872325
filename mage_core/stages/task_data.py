"""Checks that a data-backed task's files are there before a stage does any work.

WebShop plays a catalogue folder (``env.webshop.data_path``); a missing folder,
a file without a field, or a split without goals stops ``mage train`` and
``mage evaluate`` with one line naming the key and the fix, before anything is
written (the catalogue is then cached for the stage's own use).
"""

from __future__ import annotations

import dataclasses

from mage_core.config import Config, ConfigError

#: The WebShop splits each stage plays.
WEBSHOP_SPLITS = {"train": ("train", "select"), "evaluate": ("eval", "ood")}


def check_task_data(cfg: Config, stage: str) -> None:
    """Raise ``ConfigError`` if the task of ``cfg.env.name`` cannot be played by ``stage``."""
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
