"""The DeepSpeed ZeRO TrainEngine (GPUs; also runs on CPU with gloo).

Implements ``mage_core.backends.base.TrainEngine`` as a ``TorchEngine`` whose
optimizer, gradient reduction and step belong to a DeepSpeed engine
(``deepspeed.initialize``). Everything the loss depends on is shared with the
torch engine: the packed log-probabilities, the micro-batches by token budget
(``train.max_tokens_per_micro_batch``), each micro-batch's share of the token
mean, the PPO/entropy/KL terms, clipping at ``train.max_grad_norm`` and AdamW
with the same hyper-parameters (a torch ``AdamW`` given to DeepSpeed as its
client optimizer; ``DeepSpeedCPUAdam`` when the optimizer state is offloaded).
So on the same batches the two engines give the same parameters up to float
rounding (``tests/integration/test_deepspeed_engine.py``).

- ZeRO stages 0-3 (params ``backend.zero_stage``): 1 shards the optimizer
  state over the data-parallel ranks, 2 also the gradients, 3 also the weights.
  At stage 3 a rank holds only its slice of every weight between forward
  passes, so whatever reads whole weights gathers them with DeepSpeed's
  ``GatheredParameters`` (a collective: every rank calls it): the weight sync
  (``policy_state_dict``), checkpoints (the consolidated policy next to each
  rank's optimizer shard) and ``best/``; a resume scatters the saved weights
  back. Every forward pass gathers each layer's weights from all ranks, so
  every rank runs as many passes as the rank with the most micro-batches,
  scoring and training alike (``_forward_passes``, ``_gradient_plan``). The
  frozen reference policy stays a whole copy on every rank.
- Gradient accumulation is ours: DeepSpeed is told where the mini-batch ends
  (``set_gradient_accumulation_boundary``), so it reduces and steps once per
  mini-batch whatever the number of micro-batches.
- ``precision``: "fp32", or "bf16" with fp32 master weights in the optimizer.
- A non-finite gradient norm skips the step (DeepSpeed's overflow check), as
  the torch engine does.
- Checkpoints go through the same ``state_dict()`` protocol: the policy and
  reference weights, and DeepSpeed's optimizer state for this rank with its
  objects (loss scaler, parameter slice map) left out, as they are rebuilt from
  the engine on load. A checkpoint resumes at the same data-parallel size.

Distributed set-up: when no process group exists, one is initialized with
gloo (CPU) or nccl (GPU). Launched without a launcher, the process is rank 0
of 1 on 127.0.0.1 and a free port. Under ``torchrun`` or the ``deepspeed``
launcher the usual ``RANK``/``WORLD_SIZE``/``MASTER_*`` variables are used.
On a machine without CUDA, ``DS_ACCELERATOR=cpu`` is set before DeepSpeed is
imported. The first run compiles a small C++ communication op (~25 s on 2
cores), cached under ``TORCH_EXTENSIONS_DIR`` (default ~/.cache/torch_extensions).
"""

from __future__ import annotations

import math
import os
import socket
from typing import Any, Mapping

import torch

from mage_core.backends.base import collective_device
from mage_core.backends.torch_engine import TorchEngine

#: ZeRO stages this engine supports (``backend.zero_stage``).
ZERO_STAGES = (0, 1, 2, 3)
PRECISIONS = ("fp32", "bf16")
# Entries of a ZeRO optimizer state_dict that ``torch.load(weights_only=True)``
# refuses (Python objects) and that the live engine rebuilds: not saved.
_REBUILT_KEYS = ("loss_scaler", "param_slice_mappings")


def _snapshot(value: Any) -> Any:
    """A deep copy whose tensors are detached clones (ZeRO's state holds views of
    its flat buffers, which ``copy.deepcopy`` refuses)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_snapshot(v) for v in value)
    return value


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def import_deepspeed() -> Any:
    """Import DeepSpeed for this machine (CPU accelerator when there is no CUDA)."""
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    try:
        import deepspeed
    except ImportError as exc:
        raise ImportError("backend.engine: deepspeed needs the DeepSpeed package: "
                          "pip install -e '.[deepspeed]' (or '.[gpu]' on a GPU machine)") from exc
    return deepspeed


def init_distributed(deepspeed: Any) -> None:
    """A process group for DeepSpeed: the launcher's, or rank 0 of 1 on a free local port."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return
    if "WORLD_SIZE" not in os.environ:
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo",
                               verbose=False)


class DeepSpeedEngine(TorchEngine):
    """``TrainEngine`` on DeepSpeed ZeRO (docs/architecture.md, "Backends behind protocols").

    Arguments as ``TorchEngine``, plus ``zero_stage`` (0, 1, 2), ``precision``
    ("fp32" or "bf16"), ``offload_optimizer`` (optimizer state in host memory,
    ``DeepSpeedCPUAdam``), ``micro_batch_size`` (DeepSpeed's
    ``train_micro_batch_size_per_gpu``, for its batch bookkeeping; the
    micro-batches themselves are cut by ``max_tokens_per_micro_batch``) and
    ``gradient_checkpointing`` (recompute activations in the backward pass).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        learning_rate: float,
        *args: Any,
        zero_stage: int = 2,
        precision: str = "fp32",
        offload_optimizer: bool = False,
        micro_batch_size: int = 8,
        gradient_checkpointing: bool = False,
        **kwargs: Any,
    ) -> None:
        if zero_stage not in ZERO_STAGES:
            raise ValueError(f"backend.zero_stage: must be one of {ZERO_STAGES}, got {zero_stage!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"backend.precision: must be one of {PRECISIONS}, got {precision!r}")
        if offload_optimizer and zero_stage == 0:
            raise ValueError("backend.offload_optimizer: needs backend.zero_stage 1, 2 or 3")
        if not isinstance(micro_batch_size, int) or micro_batch_size < 1:
            raise ValueError(f"backend.micro_batch_size: must be an int >= 1, got {micro_batch_size!r}")
        super().__init__(model, learning_rate, *args, **kwargs)
        weight_decay = self.optimizer.defaults["weight_decay"]
        betas = self.optimizer.defaults["betas"]
        max_grad_norm = self.max_grad_norm
        deepspeed = import_deepspeed()
        init_distributed(deepspeed)
        if gradient_checkpointing:
            if not hasattr(model, "gradient_checkpointing_enable"):
                raise ValueError("backend.gradient_checkpointing: the model has no gradient_checkpointing_enable()")
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if offload_optimizer:
            from deepspeed.ops.adam import DeepSpeedCPUAdam

            client = DeepSpeedCPUAdam(self.params, lr=learning_rate, betas=betas, weight_decay=weight_decay,
                                      adamw_mode=True)
        else:
            client = self.optimizer  # the torch engine's AdamW, handed over to DeepSpeed
        zero: dict[str, Any] = {"stage": zero_stage}
        if offload_optimizer:
            zero["offload_optimizer"] = {"device": "cpu", "pin_memory": torch.cuda.is_available()}
        self.ds_config: dict[str, Any] = {
            "train_micro_batch_size_per_gpu": micro_batch_size,
            "gradient_accumulation_steps": 1,  # ours: see set_gradient_accumulation_boundary
            # Stage 0 clips in _apply_update (DeepSpeed's stage 0 does not report the norm).
            "gradient_clipping": (float(max_grad_norm) if max_grad_norm and max_grad_norm > 0 and zero_stage > 0
                                  else 0.0),
            "zero_optimization": zero,
            "bf16": {"enabled": precision == "bf16"},
            "zero_allow_untested_optimizer": True,  # torch AdamW as the client optimizer
            "steps_per_print": 2**31 - 1,
            "wall_clock_breakdown": False,
        }
        self.ds, self.optimizer, _, _ = deepspeed.initialize(model=model, optimizer=client, config=self.ds_config)
        self.model = self.ds.module
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.zero_stage = zero_stage
        self.precision = precision

    @property
    def sharded_weights(self) -> bool:
        """Whether a rank holds only slices of the weights (ZeRO-3)."""
        return self.zero_stage == 3

    def _gathered(self, modifier_rank: int | None = None) -> Any:
        """A context in which every weight of the policy is whole on every rank
        (collective at ZeRO-3, nothing to do below it); with ``modifier_rank`` r, what
        rank r writes into the weights is what every rank keeps on leaving it."""
        import contextlib

        if not self.sharded_weights:
            return contextlib.nullcontext()
        from deepspeed.runtime.zero.partition_parameters import GatheredParameters

        return GatheredParameters(list(self.model.parameters()), modifier_rank=modifier_rank)

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        """The policy weights. ZeRO-3: gathered whole (collective) and copied; else as
        ``TorchEngine`` (live views)."""
        if not self.sharded_weights:
            return super().policy_state_dict()
        with self._gathered():
            return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def _forward_passes(self, num_micro_batches: int, policy: str) -> int:
        """ZeRO-3 with several ranks: the most micro-batches any rank scores (the
        reference policy is a whole local copy: no collective in its forward)."""
        if not self.sharded_weights or policy != "current" or torch.distributed.get_world_size() == 1:
            return num_micro_batches
        count = torch.tensor([num_micro_batches], dtype=torch.long, device=collective_device())
        torch.distributed.all_reduce(count, op=torch.distributed.ReduceOp.MAX)
        return int(count)

    # -- the hooks of TorchEngine.step ---------------------------------------------------------

    def _gradient_plan(self, num_micro_batches: int, num_tokens: int) -> tuple[int, float]:
        """With several ranks: every rank runs as many backward passes as the rank
        with the most micro-batches (ZeRO reduces gradients at every pass), and a
        rank's losses are scaled so that DeepSpeed's mean over ranks is the token
        mean over the whole data-parallel batch, however the tokens are split."""
        world = torch.distributed.get_world_size()
        if world == 1:
            return num_micro_batches, 1.0
        counts = torch.tensor([num_micro_batches], dtype=torch.long, device=collective_device())
        tokens = torch.tensor([num_tokens], dtype=torch.float64, device=collective_device())
        torch.distributed.all_reduce(counts, op=torch.distributed.ReduceOp.MAX)
        torch.distributed.all_reduce(tokens, op=torch.distributed.ReduceOp.SUM)
        return int(counts), world * num_tokens / float(tokens)

    def _before_forward(self) -> None:
        """What DeepSpeed's own ``engine.forward`` does first (the model is called
        directly here, with the output layer's hook): tell the ZeRO optimizer a new
        micro-batch starts. Without it ZeRO-3 copies each micro-batch's gradient over
        the last one's instead of adding to it (measured: only the final micro-batch of
        a mini-batch counted)."""
        clear = getattr(self.optimizer, "clear_backward_seen_flag", None)
        if clear is not None:
            clear()

    def _backward(self, loss: torch.Tensor, last: bool) -> None:
        self.ds.set_gradient_accumulation_boundary(last)
        self.ds.backward(loss)

    def _apply_update(self) -> tuple[float, bool]:
        if self.zero_stage == 0:
            # DeepSpeed's stage 0 in fp32 neither reports the norm nor skips a
            # non-finite gradient: clip and check as the torch engine does.
            clip = self.max_grad_norm if self.max_grad_norm and self.max_grad_norm > 0 else math.inf
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, clip))
            if not math.isfinite(grad_norm):
                self.ds.zero_grad()
                return grad_norm, False
            self.ds.step()
            return grad_norm, True
        self.ds.step()
        norm = self.ds.get_global_grad_norm()
        grad_norm = float("nan") if norm is None else float(norm)
        return grad_norm, bool(self.ds.was_step_applied())

    # -- state --------------------------------------------------------------------------------

    def _optimizer_state(self) -> dict[str, Any]:
        state = dict(self.optimizer.state_dict())
        for key in _REBUILT_KEYS:
            state.pop(key, None)
        if "zero_stage" in state:
            state["zero_stage"] = int(state["zero_stage"])
        return state

    def state_dict(self) -> dict[str, Any]:
        """A snapshot (copies) of policy, reference, optimizer state and counters.

        With several ranks this is collective (every rank must call it): each
        rank's optimizer state (its ZeRO shard) is gathered on rank 0, whose state
        holds them all under "optimizer" (a list in rank order, ``optimizer_shards``
        true); the other ranks' state has None there (rank 0 alone saves)."""
        optimizer: Any = _snapshot(self._optimizer_state())
        world = torch.distributed.get_world_size()
        if world > 1:
            shards: list[Any] | None = [None] * world if torch.distributed.get_rank() == 0 else None
            torch.distributed.gather_object(optimizer, shards, dst=0)
            optimizer = shards
        with self._gathered():
            policy = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        return {
            "policy": policy,
            "reference": (None if self.reference is None
                          else {k: v.detach().clone() for k, v in self.reference.state_dict().items()}),
            "optimizer": optimizer,
            "optimizer_shards": world > 1,
            "num_steps": self.num_steps,
            "num_skipped_steps": self.num_skipped_steps,
            "zero_stage": self.zero_stage,
            "world_size": world,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a ``state_dict()`` written by a DeepSpeed engine of the same ZeRO
        stage and data-parallel size (ZeRO 1 and 2 shard the optimizer state over the
        ranks; stage 0 keeps it whole on every rank, so it resumes on any count)."""
        world = torch.distributed.get_world_size()
        for key in ("zero_stage", "world_size"):
            if key not in state:
                raise ValueError(f"DeepSpeedEngine.load_state_dict: the state has no {key!r}: it was not written "
                                 "by the DeepSpeed engine (backend.engine must match the checkpoint's)")
        if state["zero_stage"] != self.zero_stage:
            raise ValueError(f"DeepSpeedEngine.load_state_dict: the checkpoint has zero_stage {state['zero_stage']}, "
                             f"this engine {self.zero_stage}; resume with backend.zero_stage: {state['zero_stage']}")
        if state["world_size"] != world and self.zero_stage > 0:
            raise ValueError(f"DeepSpeedEngine.load_state_dict: the checkpoint was written by {state['world_size']} "
                             f"rank(s), this run has {world}: ZeRO stage {self.zero_stage} shards the optimizer "
                             f"state over the ranks; resume with backend.ranks: {state['world_size']}")
        optimizer = state["optimizer"]
        if state.get("optimizer_shards"):
            shards = list(optimizer)
            optimizer = shards[torch.distributed.get_rank()] if self.zero_stage > 0 else shards[0]
        optimizer = dict(optimizer)
        if hasattr(self.optimizer, "loss_scaler"):  # a ZeRO optimizer: put back what was left out
            live = self.optimizer.state_dict()
            for key in _REBUILT_KEYS:
                if key in live:
                    optimizer[key] = live[key]
            if "zero_stage" in live:
                optimizer["zero_stage"] = live["zero_stage"]
            loaded = dict(state)
            loaded["optimizer"] = None  # loaded below, after the weights
            self._load_weights_and_counters(loaded)
            # ZeRO reads the entry of its own rank from a list of every rank's state.
            per_rank: list[Any] = [None] * world
            per_rank[torch.distributed.get_rank()] = optimizer
            self.optimizer.load_state_dict(per_rank, load_optimizer_states=True, load_from_fp32_weights=True)
        else:
            self._load_weights_and_counters(state)
            self.optimizer.load_state_dict(optimizer)

    def _load_weights_and_counters(self, state: Mapping[str, Any]) -> None:
        with self._gathered(modifier_rank=0):  # ZeRO-3: rank 0's whole weights, then each rank's slices
            if not self.sharded_weights or torch.distributed.get_rank() == 0:
                self.model.load_state_dict(state["policy"])
        reference = state.get("reference")
        if (reference is None) != (self.reference is None):
            raise ValueError("DeepSpeedEngine.load_state_dict: the checkpoint and this engine differ in having a "
                             "reference model; build the engine with the same reference_model setting")
        if self.reference is not None:
            self.reference.load_state_dict(reference)
        self.num_steps = int(state["num_steps"])
        self.num_skipped_steps = int(state.get("num_skipped_steps", 0))
