"""What the trainer needs from a model backend (docs/architecture.md, "Backends behind protocols").

- ``Generator`` (``mage_core.generation``, below the rollout that uses it) samples
  responses and scores continuations, in token ids. Implementations: HF transformers
  (CPU/GPU, default), vLLM, an OpenAI-compatible server.
- ``TrainEngine`` owns the trainable policy, a frozen reference copy and the
  optimizer; it turns a batch of samples into log-probabilities and updates.
  Implementations: plain torch (default), DeepSpeed ZeRO (issue 5).

After every update the trainer copies ``engine.policy_state_dict()`` into the
generator with ``generator.load_policy_state(...)`` (weight sync).

Samples come in two *action modes* (docs/architecture.md, "The embedded default"):

- ``free``: the response is generated text; its log-probability is the sum of
  its tokens' log-probabilities and PPO works per token.
- ``constrained``: the policy chooses among the legal actions' token sequences
  (``candidates``); the choice's probability is the softmax over candidates of
  their summed token log-probabilities, and PPO works per choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import torch


#: What ``Generator.generate`` draws from: one generator for the whole batch, or one per prompt.


def check_state_shapes(state: Mapping[str, torch.Tensor], shapes: Mapping[str, Sequence[int]]) -> None:
    """``load_policy_state``'s weights, checked against the model's ``shapes``
    (name -> shape): no unknown key, no other shape. (Which keys may be left
    out depends on the backend's weight tying.)"""
    unexpected = sorted(k for k in state if k not in shapes)
    if unexpected:
        raise ValueError(f"load_policy_state: keys the model does not have: {', '.join(unexpected[:5])}")
    mismatched = [f"{k} {tuple(state[k].shape)} vs {tuple(shapes[k])}"
                  for k in state if tuple(state[k].shape) != tuple(shapes[k])]
    if mismatched:
        raise ValueError(f"load_policy_state: shape mismatch: {', '.join(mismatched[:5])}")


@dataclass
class Sample:
    """One policy decision, ready for the loss.

    ``prompt`` is the full context; exactly one of the two action forms is set:
    ``response`` (free mode) or ``candidates`` + ``choice`` (constrained mode).
    ``advantage`` is per sample (broadcast over the response's tokens).
    """

    prompt: list[int]
    advantage: float
    response: list[int] | None = None
    candidates: list[list[int]] | None = None
    choice: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        free = self.response is not None
        constrained = self.candidates is not None
        if free == constrained:
            raise ValueError("a Sample has either a response (free) or candidates + choice (constrained)")
        if constrained:
            assert self.candidates is not None
            if self.choice is None or not 0 <= self.choice < len(self.candidates):
                raise ValueError(f"choice {self.choice!r} is not an index into {len(self.candidates)} candidates")
            if any(len(c) == 0 for c in self.candidates):
                raise ValueError("every candidate needs at least one token")
        elif not self.response:
            raise ValueError("a free-mode response needs at least one token")

    @property
    def mode(self) -> str:
        return "free" if self.response is not None else "constrained"


@dataclass
class LossSettings:
    """PPO settings (docs/method.md section 6). ``objective``: ``ppo`` (the clipped
    surrogate) or ``imitation`` (minus the token-mean log-probability of the taken
    action, the samples' advantages and old log-probabilities unused: behaviour
    cloning of an expert's choices, ``mage sft``)."""

    clip_ratio: float = 0.2
    entropy_coef: float = 0.001
    kl_coef: float = 0.0
    kl_estimator: str = "low_var_kl"
    objective: str = "ppo"

    def __post_init__(self) -> None:
        if self.objective not in ("ppo", "imitation"):
            raise ValueError(f"LossSettings.objective: {self.objective!r} is not one of ppo, imitation")


@runtime_checkable
class TrainEngine(Protocol):
    """Training-side model: policy + frozen reference + optimizer."""

    def logprobs(self, samples: Sequence[Sample], policy: str = "current") -> list[torch.Tensor]:
        """Without gradients: per-sample log-probabilities of the taken action, per
        token in free mode (shape [len(response)]), or shape [1] in constrained
        mode (log-softmax of the choice among the candidates). ``policy`` is
        "current" or "reference"."""
        ...

    def step(
        self,
        samples: Sequence[Sample],
        old_logprobs: Sequence[torch.Tensor],
        ref_logprobs: Sequence[torch.Tensor] | None,
        loss: LossSettings,
    ) -> dict[str, float]:
        """One optimizer step on these samples (one PPO mini-batch); returns
        metrics such as ``loss``, ``pg_loss``, ``entropy``, ``kl``, ``clip_frac``,
        ``grad_norm``."""
        ...

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        """The policy weights, for weight sync to a Generator."""
        ...

    def set_learning_rate(self, learning_rate: float) -> None:
        """The optimizer's rate from the next step on (the trainer's schedule)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: policy, reference, optimizer, step count."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


def collective_device() -> torch.device:
    """Where the tensors of a collective (``all_reduce``) live: the rank's GPU under NCCL, which
    takes no host tensors, else the host (gloo)."""
    if torch.distributed.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")
