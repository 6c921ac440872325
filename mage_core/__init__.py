"""MAGE: meta-reinforcement learning for strategic exploration and exploitation.

The package is layered (docs/architecture.md):

- ``mage_core.envs``: game rules, text rendering and action parsing (pure Python).
- ``mage_core.opponents``: scripted, search-based and game-theoretic opponents, and
  the populations that sample them.
- ``mage_core.config``: the validated schema of ``params.yaml``.
- ``mage_core.stages``: composition roots the CLI calls.

Importing this package is cheap: heavy dependencies load only where used.
"""

__version__ = "0.1.0"
