"""Returns, advantages and losses: pure functions on arrays (docs/architecture.md, style rule 1).

Nothing here knows about config objects, games or models; callers pass numbers.
"""
