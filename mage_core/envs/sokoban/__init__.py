"""Sokoban: reverse-play level generation, an optimal BFS solver and the agent env
(docs/method.md section 10). Pure Python + numpy."""
