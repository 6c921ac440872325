"""Tic-Tac-Toe: pure rules (``rules``) and the agent environment (``env``).

docs/method.md sections 2, 3, 10 and 11. Opponents live in ``mage_core.opponents``
(``patterns``, ``mcts``, ``minimax``, ``random_player``).
"""
