"""``mage kuhn analyze``, ``mage ttt analyze``: a two-player game's exact analysis.

What each prints is the game's own (``Task.analyze``, in its folder:
``envs/kuhn_poker/commands.py``, ``envs/tic_tac_toe/commands.py``); this stage loads the
configuration and hands it over with the command line's options.
"""

from __future__ import annotations

from typing import Any, Sequence

from mage_core.config import ConfigError, load_config
from mage_core.envs.registry import games_with, resolve, task


def run(game: str, params: str, overrides: Sequence[str] = (), **options: Any) -> int:
    """Load ``params`` (with ``overrides``) and run ``game``'s analysis with ``options``
    (its own: ``--opponent``, ``--meta-hands``, ``--samples``...); its exit code."""
    cfg = load_config(params, overrides)
    analyze = task(game).analyze
    if analyze is None:
        raise ConfigError("command line", [f"{game}: no exact analysis; the games with one: "
                                           f"{', '.join(games_with('analyze'))}"])
    return resolve(analyze)(cfg, **options)
