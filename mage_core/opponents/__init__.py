"""Opponents for the two-player games and the populations that sample them."""
