"""Measuring players: tournaments now; Pass@k and evaluation suites later."""
