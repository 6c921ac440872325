"""ALFWorld's games folder: its split folders (json_2.1.1's layout) and the error a folder
or game file that cannot be played raises. A leaf module: the environment (``env``), the
generator (``generate``) and the game-file checks (``grammar``) all read it, and it reads none
of them."""

from __future__ import annotations

#: Split -> its folder in ALFWorld's layout (json_2.1.1/...).
SPLIT_FOLDERS = {"train": "train", "eval_in_distribution": "valid_seen", "eval_out_of_distribution": "valid_unseen"}


class AlfWorldDataError(ValueError):
    """A game folder is missing, empty, or holds a game that cannot be played."""
