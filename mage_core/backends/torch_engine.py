"""The plain-torch TrainEngine: policy, frozen reference, AdamW (CPU default).

Implements ``mage_core.backends.base.TrainEngine`` for any HF causal LM (the
embedded default is a tiny ``Qwen3ForCausalLM``). docs/method.md section 6: PPO
clipped surrogate, token-mean aggregation, entropy bonus, KL loss to the
reference policy.

The log-probabilities themselves (free and constrained samples, prefix
packing, chunked logits) are computed in ``mage_core.backends.logprobs``;
its names are re-exported here.

A free sample contributes len(response) tokens to the token-mean, a
constrained one exactly one. Samples are packed into micro-batches by a token
budget (rows x padded length); gradients are accumulated with each
micro-batch's loss scaled by its share of the mini-batch's tokens, so the
update does not depend on the budget (up to float rounding).

The model is kept in eval mode (dropout off) so that the log-probs of
``logprobs`` and those of ``step`` come from the same function: the first PPO
step of an iteration sees a ratio of exactly 1.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Mapping, Sequence

import torch

from mage_core.algos.losses import kl_penalty, masked_mean, ppo_clip_loss
from mage_core.backends.base import LossSettings, Sample
from mage_core.backends.logprobs import (
    _plan,
    chunked_token_logprobs,
    evaluate_flat,
    evaluate_samples,
    micro_batches,
    num_tokens,
    prefix_groups,
    query_logits,
    right_padded,
)

#: What other modules import from here (``_plan``: the tests and benchmarks).
__all__ = [
    "POLICIES", "TorchEngine", "_plan", "chunked_token_logprobs", "evaluate_flat", "evaluate_samples",
    "micro_batches", "num_tokens", "prefix_groups", "query_logits", "right_padded",
]

POLICIES = ("current", "reference")


def _validate(samples: Sequence[Sample], what: str) -> None:
    if not samples:
        raise ValueError(f"{what}: samples is empty")
    for i, s in enumerate(samples):
        if not s.prompt:
            raise ValueError(f"{what}: samples[{i}].prompt is empty; a prompt needs at least one token "
                             "(e.g. BOS) to condition the first action token on")


class TorchEngine:
    """``TrainEngine`` on one device with plain torch (docs/architecture.md, "Backends behind protocols").

    ``reference_model``: None (no KL; ``logprobs(policy="reference")`` raises),
    "copy" (a frozen deepcopy of the initial policy) or a module to use as is
    (frozen here). ``max_grad_norm`` None or <= 0 disables clipping.
    ``pack_prefixes``: read constrained samples whose prompt is a prefix of
    another's from that longer row, multi-token candidates as tails of it under a
    4-D attention mask (``logprobs`` module docstring); False gives every sample
    its own row(s) (same results up to float rounding).
    ``logits_chunk_tokens``: 0 computes a micro-batch's logits at once; N > 0
    N queried positions at a time (``chunked_token_logprobs``: the same values,
    at most N x vocabulary logits in memory; ``backend.logits_chunk_tokens``).
    """

    #: Whether a process holds only slices of the weights (the DeepSpeed engine at ZeRO-3).
    sharded_weights = False

    def __init__(
        self,
        model: torch.nn.Module,
        learning_rate: float,
        weight_decay: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        max_grad_norm: float | None = 1.0,
        max_tokens_per_micro_batch: int = 16384,
        reference_model: None | str | torch.nn.Module = None,
        pack_prefixes: bool = True,
        logits_chunk_tokens: int = 0,
    ) -> None:
        if not learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {learning_rate}")
        if max_tokens_per_micro_batch < 1:
            raise ValueError(f"max_tokens_per_micro_batch must be >= 1, got {max_tokens_per_micro_batch}")
        self.model = model
        self.model.eval()  # dropout off: see the module docstring
        if reference_model is None:
            self.reference: torch.nn.Module | None = None
        elif isinstance(reference_model, str):
            if reference_model != "copy":
                raise ValueError(f"reference_model must be None, 'copy' or a module, got {reference_model!r}")
            self.reference = copy.deepcopy(model)
        else:
            self.reference = reference_model
        if self.reference is not None:
            self.reference.eval()
            self.reference.requires_grad_(False)
        self.max_grad_norm = max_grad_norm
        self.max_tokens_per_micro_batch = max_tokens_per_micro_batch
        self.pack_prefixes = pack_prefixes
        if not isinstance(logits_chunk_tokens, int) or logits_chunk_tokens < 0:
            raise ValueError(f"logits_chunk_tokens must be an int >= 0 (0: all at once), got {logits_chunk_tokens!r}")
        self.logits_chunk_tokens = logits_chunk_tokens
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=learning_rate, betas=betas,
                                           weight_decay=weight_decay)
        self.num_steps = 0
        self.num_skipped_steps = 0  # steps whose gradient was not finite (no update)

    # -- log-probabilities --------------------------------------------------------------------

    def _model(self, policy: str) -> torch.nn.Module:
        if policy == "current":
            return self.model
        if policy == "reference":
            if self.reference is None:
                raise ValueError("logprobs(policy='reference'): this engine has no reference model; "
                                 "build it with reference_model='copy' to use a KL loss")
            return self.reference
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")

    @torch.no_grad()
    def score_samples(
        self, samples: Sequence[Sample], policy: str = "current", with_entropy: bool = True
    ) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
        """Per-sample log-probs and entropies (as ``evaluate_samples``), micro-batched,
        in the order of ``samples``, without gradients, on the CPU."""
        _validate(samples, "logprobs")
        model = self._model(policy)
        logps: list[torch.Tensor | None] = [None] * len(samples)
        entropies: list[torch.Tensor | None] = [None] * len(samples)
        batches = micro_batches(samples, self.max_tokens_per_micro_batch, self.pack_prefixes)
        for k in range(self._forward_passes(len(batches), policy)):
            # A pass beyond this rank's micro-batches keeps step with a rank that has more
            # (ZeRO-3 gathers the weights collectively at every forward); its result is dropped.
            batch = batches[k] if k < len(batches) else batches[0]
            lp, ent = evaluate_samples(model, [samples[i] for i in batch], with_entropy, self.pack_prefixes,
                                       self.logits_chunk_tokens)
            if k >= len(batches):
                continue
            for j, i in enumerate(batch):
                logps[i] = lp[j].detach().cpu()
                if ent is not None:
                    entropies[i] = ent[j].detach().cpu()
        return logps, (entropies if with_entropy else None)  # type: ignore[return-value]

    def logprobs(self, samples: Sequence[Sample], policy: str = "current") -> list[torch.Tensor]:
        return self.score_samples(samples, policy, with_entropy=False)[0]

    # -- the update ---------------------------------------------------------------------------

    def set_learning_rate(self, learning_rate: float) -> None:
        if not learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {learning_rate}")
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate

    def _check_step_inputs(self, samples: Sequence[Sample], old_logprobs: Sequence[torch.Tensor],
                           ref_logprobs: Sequence[torch.Tensor] | None, loss: LossSettings) -> None:
        _validate(samples, "step")
        if len(old_logprobs) != len(samples):
            raise ValueError(f"step: {len(old_logprobs)} old_logprobs for {len(samples)} samples")
        if ref_logprobs is not None and len(ref_logprobs) != len(samples):
            raise ValueError(f"step: {len(ref_logprobs)} ref_logprobs for {len(samples)} samples")
        if loss.kl_coef > 0 and ref_logprobs is None:
            raise ValueError(f"step: loss.kl_coef is {loss.kl_coef} but ref_logprobs is None; "
                             "pass engine.logprobs(samples, policy='reference')")
        for name, seq in (("old_logprobs", old_logprobs), ("ref_logprobs", ref_logprobs)):
            for i, (s, t) in enumerate(zip(samples, seq or [])):
                if tuple(t.shape) != (num_tokens(s),):
                    raise ValueError(f"step: {name}[{i}] has shape {tuple(t.shape)}, expected "
                                     f"({num_tokens(s)},) for a {s.mode}-mode sample")

    def step(
        self,
        samples: Sequence[Sample],
        old_logprobs: Sequence[torch.Tensor],
        ref_logprobs: Sequence[torch.Tensor] | None,
        loss: LossSettings,
    ) -> dict[str, float]:
        """One AdamW step on one PPO mini-batch (docs/method.md section 6).

        loss = ppo_clip_loss - entropy_coef * entropy + kl_coef * kl, each a
        token-mean over the whole mini-batch; with ``loss.objective`` imitation,
        minus the token-mean log-probability of the taken actions takes the
        surrogate's place (``old_logprobs`` then only checked for shape). Returns floats: loss, pg_loss,
        entropy, kl (when ref_logprobs is given), clip_frac, approx_kl,
        grad_norm (before clipping), num_tokens, skipped (1.0 when the gradient
        was not finite and no update was made).
        """
        self._check_step_inputs(samples, old_logprobs, ref_logprobs, loss)
        device = next(self.model.parameters()).device
        total = sum(num_tokens(s) for s in samples)
        sums = {"loss": 0.0, "pg_loss": 0.0, "entropy": 0.0, "clip_frac": 0.0, "approx_kl": 0.0}
        if ref_logprobs is not None:
            sums["kl"] = 0.0
        self.optimizer.zero_grad(set_to_none=True)
        batches = list(micro_batches(samples, self.max_tokens_per_micro_batch, self.pack_prefixes))
        passes, scale = self._gradient_plan(len(batches), total)
        for k in range(passes):
            # A data-parallel rank with fewer micro-batches than another keeps step with
            # it by running its first micro-batch again with weight 0: a real forward,
            # so the gradients become ready in the same order on every rank (ZeRO
            # buckets them in that order).
            real = k < len(batches)
            batch = batches[k] if real else batches[0]
            part = [samples[i] for i in batch]
            self._before_forward()
            logp, entropy = evaluate_flat(self.model, part, with_entropy=True, pack_prefixes=self.pack_prefixes,
                                          logits_chunk=self.logits_chunk_tokens)  # [n_m] each
            assert entropy is not None
            mask = torch.ones_like(logp)
            share = logp.numel() / total if real else 0.0  # this micro-batch's share of the token-mean
            if loss.objective == "imitation":  # behaviour cloning: the expert's action, all weight 1
                pg_loss, clip_frac, approx_kl = -masked_mean(logp, mask), logp.new_zeros(()), logp.new_zeros(())
            else:
                old = torch.cat([old_logprobs[i] for i in batch]).to(device, torch.float32)  # [n_m]
                adv = torch.tensor([samples[i].advantage for i in batch], dtype=torch.float32).repeat_interleave(
                    torch.tensor([num_tokens(samples[i]) for i in batch])).to(device)  # [n_m]
                pg_loss, clip_frac, approx_kl = ppo_clip_loss(logp, old, adv, mask, loss.clip_ratio)
            entropy_mean = masked_mean(entropy, mask)
            objective = pg_loss - loss.entropy_coef * entropy_mean
            if ref_logprobs is not None:
                ref = torch.cat([ref_logprobs[i] for i in batch]).to(device, torch.float32)  # [n_m]
                kl_mean = masked_mean(kl_penalty(logp, ref, loss.kl_estimator), mask)
                objective = objective + loss.kl_coef * kl_mean
                sums["kl"] += share * kl_mean.item()
            self._backward(objective * (share * scale), last=k == passes - 1)
            sums["loss"] += share * objective.item()
            sums["pg_loss"] += share * pg_loss.item()
            sums["entropy"] += share * entropy_mean.item()
            sums["clip_frac"] += share * clip_frac.item()
            sums["approx_kl"] += share * approx_kl.item()
        grad_norm, applied = self._apply_update()
        if applied:
            self.num_steps += 1
        else:  # as verl: a non-finite gradient would poison AdamW's moments
            self.num_skipped_steps += 1
        return {**sums, "grad_norm": grad_norm, "num_tokens": float(total), "skipped": float(not applied)}

    def _forward_passes(self, num_micro_batches: int, policy: str) -> int:
        """Forward passes ``score_samples`` runs for this many micro-batches: as many
        (one process; a sharded-weights engine agrees on the most across ranks)."""
        return num_micro_batches

    def _gradient_plan(self, num_micro_batches: int, num_tokens: int) -> tuple[int, float]:
        """(backward passes to run, factor on each micro-batch's loss). One process:
        every micro-batch once, factor 1. Data-parallel engines agree on these
        across ranks (the DeepSpeed engine)."""
        return num_micro_batches, 1.0

    def _before_forward(self) -> None:
        """Bookkeeping before a training micro-batch's forward pass (none here)."""

    def _backward(self, loss: torch.Tensor, last: bool) -> None:
        """Accumulate one micro-batch's gradient (``last``: the mini-batch's final one)."""
        loss.backward()

    def _apply_update(self) -> tuple[float, bool]:
        """Clip and apply the accumulated gradient; returns (norm before clipping, applied).
        A non-finite norm skips the update; the gradient is cleared either way."""
        clip = self.max_grad_norm if self.max_grad_norm and self.max_grad_norm > 0 else math.inf
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, clip))
        applied = math.isfinite(grad_norm)
        if applied:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm, applied

    # -- state --------------------------------------------------------------------------------

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        """The live policy weights (detached views, not copies): sync them into a
        generator right away, or clone them to keep them."""
        return {k: v.detach() for k, v in self.model.state_dict().items()}

    def state_dict(self) -> dict[str, Any]:
        """A snapshot (copies) of policy, reference, optimizer and counters."""
        return {
            "policy": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "reference": (None if self.reference is None
                          else {k: v.detach().clone() for k, v in self.reference.state_dict().items()}),
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),
            "num_steps": self.num_steps,
            "num_skipped_steps": self.num_skipped_steps,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a ``state_dict()``; a missing "reference" key means no reference."""
        missing = [k for k in ("policy", "optimizer", "num_steps") if k not in state]
        if missing:
            raise ValueError(f"TorchEngine.load_state_dict: state lacks {missing}")
        reference = state["reference"] if "reference" in state else None
        if (reference is None) != (self.reference is None):
            has = "has" if reference is not None else "has no"
            this = "has" if self.reference is not None else "has no"
            raise ValueError(f"TorchEngine.load_state_dict: the state {has} reference model but this engine "
                             f"{this}; build the engine with the same reference_model setting")
        self.model.load_state_dict(state["policy"])
        if self.reference is not None:
            self.reference.load_state_dict(reference)
        self.optimizer.load_state_dict(state["optimizer"])
        self.num_steps = int(state["num_steps"])
        self.num_skipped_steps = int(state.get("num_skipped_steps", 0))
