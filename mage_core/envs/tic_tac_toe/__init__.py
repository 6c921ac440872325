"""Tic-Tac-Toe: pure rules (``rules``), the agent environment (``env``), the best
responses to the population (``best_response``) and ``mage ttt analyze`` (``commands``,
reached through the task).

docs/method.md sections 2, 3, 10 and 11. Opponents live in ``mage_core.opponents``
(``patterns``, ``mcts``, ``minimax``, ``random_player``).
"""
