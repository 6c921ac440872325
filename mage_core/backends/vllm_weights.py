"""Both sides of ``VLLMGenerator``'s weight sync, and the shapes a synced state is
checked against.

``stage_file`` and ``stage_chunks`` send a state to vLLM's worker (one safetensors
file in a shared folder, or safetensors bytes in chunks); ``MageWeightSync`` runs in
that worker (vLLM mixes it into its worker class), stages what arrives and loads it
into the running model in place. ``_checkpoint_shapes`` reads, from the checkpoint
on disk, the names and shapes ``load_policy_state`` checks a state against before
sending it. How and why (``/dev/shm`` or messages, the tied ``lm_head``): the module
docstring of ``vllm_generator``, which re-exports ``MageWeightSync``; vLLM loads the
extension by that name (``worker_extension_cls``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

import torch
from safetensors import safe_open
from safetensors.torch import load as _load_safetensors_bytes
from safetensors.torch import load_file as _load_safetensors_file
from safetensors.torch import save as _save_safetensors_bytes
from safetensors.torch import save_file as _save_safetensors_file


class MageWeightSync:
    """Worker extension (vLLM ``worker_extension_cls``): weight sync by name.

    vLLM mixes this class into its worker class, in the worker process, so its
    methods can be called with ``LLM.collective_rpc("mage_...")`` and see the
    worker as ``self``. Arguments are bytes (safetensors), which vLLM's
    serializers carry as they are.
    """

    def mage_stage_weights(self, blob: bytes) -> int:
        """Add one safetensors chunk to the staged state; returns the number of staged tensors."""
        return self._mage_stage(_load_safetensors_bytes(bytes(blob)))

    def mage_stage_file(self, path: str) -> int:
        """Add the tensors of one safetensors file (same host) to the staged state."""
        return self._mage_stage(_load_safetensors_file(path))

    def _mage_stage(self, tensors: dict[str, torch.Tensor]) -> int:
        staged = getattr(self, "_mage_staged", None)
        if staged is None:
            staged = self._mage_staged = {}
        staged.update(tensors)
        return len(staged)

    def mage_commit_weights(self) -> int:
        """Load the staged state into the running model in place; returns the number of tensors."""
        staged = getattr(self, "_mage_staged", None) or {}
        self._mage_staged = None
        if not staged:
            raise RuntimeError("mage_commit_weights: nothing staged")
        worker: Any = self  # a vLLM Worker once mixed in
        worker.reload_weights(weights_iterator=iter(list(staged.items())), is_checkpoint_format=True)
        _refresh_tied_embeddings(worker.model_runner.get_model())
        return len(staged)

    def mage_drop_staged(self) -> None:
        self._mage_staged = None


def _refresh_tied_embeddings(model: torch.nn.Module) -> None:
    """Re-run weight post-processing on modules that share their weight with
    another one (a tied ``lm_head``).

    vLLM's reload re-processes only the layers it loaded into, and the model's
    ``load_weights`` skips a tied ``lm_head``; on CPU the lm_head's GEMM
    (``dispatch_cpu_unquantized_gemm``) holds a packed copy of the old
    embeddings, so logits would stay stale (measured: off by 0.46 in log-prob
    after a sync). Unquantized embedding post-processing is idempotent (CPU:
    re-pack from the current weight; GPU: nothing to do).
    """
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod

    owners: dict[int, list[torch.nn.Module]] = {}
    for module in model.modules():
        weight = module._parameters.get("weight")
        if weight is not None:
            owners.setdefault(id(weight), []).append(module)
    for modules in owners.values():
        if len(modules) < 2:
            continue
        for module in modules:
            method = getattr(module, "quant_method", None)
            if isinstance(method, UnquantizedEmbeddingMethod):
                method.process_weights_after_loading(module)


def _checkpoint_shapes(
    shards: Sequence[Path], tied: bool
) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    """(tensor name -> shape) as stored in the safetensors shards, and the
    optional keys (a tied ``lm_head.weight`` the checkpoint leaves out)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for shard in shards:
        with safe_open(str(shard), framework="pt") as handle:
            for name in handle.keys():
                shapes[name] = tuple(handle.get_slice(name).get_shape())
    optional: dict[str, tuple[int, ...]] = {}
    if tied and "lm_head.weight" not in shapes and "model.embed_tokens.weight" in shapes:
        optional["lm_head.weight"] = shapes["model.embed_tokens.weight"]
    return shapes, optional


def stage_file(llm: Any, tensors: dict[str, torch.Tensor], folder: Path) -> None:
    """Stage ``tensors`` in ``llm``'s worker as one safetensors file in ``folder``
    (same host), deleted once the worker has read it."""
    handle, path = tempfile.mkstemp(prefix="mage-weights-", suffix=".safetensors", dir=folder)
    os.close(handle)
    try:
        _save_safetensors_file(tensors, path)
        llm.collective_rpc("mage_stage_file", args=(path,))
    finally:
        os.unlink(path)


def stage_chunks(llm: Any, tensors: dict[str, torch.Tensor], chunk_bytes: int) -> None:
    """Stage ``tensors`` in ``llm``'s worker as safetensors bytes through vLLM's
    messaging, in chunks of at most ``chunk_bytes`` (a larger tensor goes alone)."""
    chunk: dict[str, torch.Tensor] = {}
    size = 0
    for name, tensor in tensors.items():
        nbytes = tensor.numel() * tensor.element_size()
        if chunk and size + nbytes > chunk_bytes:
            llm.collective_rpc("mage_stage_weights", args=(_save_safetensors_bytes(chunk),))
            chunk, size = {}, 0
        chunk[name] = tensor
        size += nbytes
    llm.collective_rpc("mage_stage_weights", args=(_save_safetensors_bytes(chunk),))
