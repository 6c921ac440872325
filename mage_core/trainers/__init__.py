"""Training loops written against the backend Protocols, their settings and checkpoints.

Importing this package is cheap: import the submodules you need
(``mage_core.trainers.checkpoint``, ``mage_core.trainers.meta_rl``, ...).
"""
