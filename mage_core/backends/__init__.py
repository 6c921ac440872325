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
#: train engine name -> (module, class). Implements ``base.TrainEngine``.
ENGINES = {
    "torch": ("mage_core.backends.torch_engine", "TorchEngine"),
    "deepspeed": ("mage_core.backends.deepspeed_engine", "DeepSpeedEngine"),
}
#: Backends params.yaml may name (``backend.generator`` / ``backend.engine``) that are
#: not built yet: selecting one stops a stage before any work, with this reason.
NOT_BUILT = {
    "vllm": "the vLLM generator (offline engine, weight sync from the train engine) is not built yet (issue 5)",
}


def require_built(generator: str, engine: str | None = None, zero_stage: int | None = None) -> None:
    """Raise NotImplementedError, naming the params key, if a selected backend is not built."""
    for key, name in (("backend.generator", generator), ("backend.engine", engine)):
        if name in NOT_BUILT:
            raise NotImplementedError(f"{key}: {name}: {NOT_BUILT[name]}; use backend.generator: hf and "
                                      "backend.engine: torch, and see `mage doctor`")
    if engine == "deepspeed" and zero_stage == 3:
        raise NotImplementedError("backend.zero_stage: 3 (sharded weights) is not built in the DeepSpeed engine: "
                                  "weight sync and checkpoints need whole weights on every rank; use zero_stage 2")


def generator_class(name: str) -> Any:
    """The Generator class registered as ``name`` (imports its module now)."""
    if name not in GENERATORS:
        raise ValueError(f"unknown generator backend {name!r}; choose one of {', '.join(GENERATORS)}")
    module, cls = GENERATORS[name]
    return getattr(importlib.import_module(module), cls)
