"""The sections of params.yaml each task declares in its own folder, assembled from the
registry (``mage_core.envs.registry``): ``env.<name>`` (``Task.params``) and
``data.<name>`` (``Task.data.params``, tasks whose problems live in generated files)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import create_model

from mage_core.envs.registry import GAMES, resolve, task, two_player_games
from mage_core.schema import Strict

GameName = Literal[GAMES]  # type: ignore[valid-type]  # the registry's names
TwoPlayerGame = Literal[tuple(two_player_games())]  # type: ignore[valid-type]


def _section(reference: str) -> tuple[Any, Any]:
    section = resolve(reference)
    return section, section()


#: ``env``: the game trained on and one section per task, each the settings class its task
#: declares (``Task.params``, in the task's folder: ``envs/<name>/params.py``), which is also
#: what its environment takes (``make_env(game, cfg.env.<game>, ...)``).
EnvConfig = create_model(
    "EnvConfig", __base__=Strict, __module__=__name__,
    name=(GameName, "kuhn_poker"),
    **{game: _section(task(game).params) for game in GAMES},
)

#: ``data``: what the ``data@<name>`` DVC stages generate into ``data/<name>``, one section per
#: task with data files (``Task.data.params``).
DataConfig = create_model(
    "DataConfig", __base__=Strict, __module__=__name__,
    **{game: _section(task(game).data.params) for game in GAMES if task(game).data is not None},
)
