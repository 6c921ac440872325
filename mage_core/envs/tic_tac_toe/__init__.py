"""Tic-Tac-Toe: pure rules (``rules``) and the agent environment (``env``).

METHOD.md sections 2, 3, 10 and 11. Opponents live in ``mage_core.opponents``
(``patterns``, ``mcts``, ``minimax``, ``random_player``).
"""

from mage_core.envs.tic_tac_toe.env import (
    TicTacToeEnv,
    TicTacToeSettings,
    cell_to_action,
    parse_coordinates,
    render_board,
)
from mage_core.envs.tic_tac_toe.rules import (
    WIN_LINES,
    TicTacToeState,
    initial_state,
    play_moves,
    reachable_states,
)

__all__ = [
    "WIN_LINES",
    "TicTacToeEnv",
    "TicTacToeSettings",
    "TicTacToeState",
    "cell_to_action",
    "initial_state",
    "parse_coordinates",
    "play_moves",
    "reachable_states",
    "render_board",
]
