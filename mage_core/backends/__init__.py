"""Model backends behind the Protocols of ``mage_core.backends.base``.

Selected by name from dict literals (DESIGN.md style rule 4); the heavy module
is imported only when its backend is selected, so ``import mage_core.backends``
costs nothing beyond torch.
"""

from __future__ import annotations

import importlib
from typing import Any

#: generator backend name -> (module, class). Implements ``base.Generator``.
GENERATORS = {
    "hf": ("mage_core.backends.hf", "HFGenerator"),
}


def generator_class(name: str) -> Any:
    """The Generator class registered as ``name`` (imports its module now)."""
    if name not in GENERATORS:
        raise ValueError(f"unknown generator backend {name!r}; choose one of {', '.join(GENERATORS)}")
    module, cls = GENERATORS[name]
    return getattr(importlib.import_module(module), cls)
