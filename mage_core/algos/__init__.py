"""Returns, advantages and losses: pure functions on arrays (DESIGN.md, "algos/").

Nothing here knows about config objects, games or models; callers pass numbers.
"""
