"""Meta-episodes: K episodes, restart, reflect, memory, batched policy calls."""
