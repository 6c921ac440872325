"""ALFWorld (Shridhar et al. 2021) on games the project generates offline.

- ``generate``: the official game files (``initial_state.pddl``, ``traj_data.json``,
  ``game.tw-pddl``) written from the floor-plan layouts and object tables the
  ``alfworld`` wheel ships, each kept only if alfworld's own hand-coded expert wins
  it in TextWorld's PDDL engine (docs/environments.md).
- ``engine``: that expert check, and the play env and walkthrough replay that check a
  dataset (TextWorld's PDDL engine with ALFWorld's wrappers);
- ``task_types``: ALFRED's six task types and its sampler's constraints on each.
- ``layout``: the split folders and the error a games folder raises;
- ``commands``: ``mage alfworld generate|check`` and ``mage data generate alfworld``.

Playing them as an agent environment (``env.name: alfworld``) is not built yet.
Needs the ``alfworld`` extra; importing this package does not import alfworld.
"""
