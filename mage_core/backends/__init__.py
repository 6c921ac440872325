"""Model backends behind the Protocols of ``mage_core.backends.base``.

Selected by name from dict literals (docs/architecture.md, style rule 4); the heavy module
is imported only when its backend is selected, so ``import mage_core.backends``
costs nothing beyond torch.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

#: generator backend name -> (module, class). Implements ``mage_core.generation.Generator``.
GENERATORS = {
    "hf": ("mage_core.backends.hf", "HFGenerator"),
    "vllm": ("mage_core.backends.vllm_generator", "VLLMGenerator"),
    "openai": ("mage_core.backends.openai_generator", "OpenAIGenerator"),
}
#: train engine name -> (module, class). Implements ``base.TrainEngine``.
ENGINES = {
    "torch": ("mage_core.backends.torch_engine", "TorchEngine"),
    "deepspeed": ("mage_core.backends.deepspeed_engine", "DeepSpeedEngine"),
}
#: backend name -> the package it needs, and how to install it.
PACKAGES = {"hf": "transformers", "torch": "torch", "vllm": "vllm", "deepspeed": "deepspeed",
            "openai": "urllib"}  # the endpoint client is the standard library's
INSTALL = {
    "vllm": "pip install -e '.[gpu]' on a CUDA machine (on a CPU, the test environment: make vllm-env)",
    "deepspeed": "pip install -e '.[deepspeed]' (CPU or GPU)",
}


class BackendUnavailable(ImportError):
    """A selected backend's package is not installed here (the message says how to install it)."""


def require_built(generator: str, engine: str | None = None) -> None:
    """Stop before any work, naming the params key, if a selected backend's package
    is missing (BackendUnavailable, with the install command). Looks packages up
    without importing them."""
    for key, name in (("backend.generator", generator), ("backend.engine", engine)):
        if name is not None and importlib.util.find_spec(PACKAGES[name]) is None:
            raise BackendUnavailable(f"{key}: {name} needs the package {PACKAGES[name]}, which is not installed "
                                     f"in this environment: {INSTALL.get(name, 'pip install ' + PACKAGES[name])}")


def generator_class(name: str) -> Any:
    """The Generator class registered as ``name`` (imports its module now)."""
    if name not in GENERATORS:
        raise ValueError(f"unknown generator backend {name!r}; choose one of {', '.join(GENERATORS)}")
    module, cls = GENERATORS[name]
    return getattr(importlib.import_module(module), cls)
