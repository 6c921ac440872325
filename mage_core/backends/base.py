"""What the rollout and the trainer need from a model backend.

Two protocols (docs/architecture.md, "Backends behind protocols"):

- ``Generator`` samples responses and scores continuations, in token ids.
  Implementations: HF transformers (CPU/GPU, default), vLLM (issue 5).
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
from typing import Any, Mapping, Protocol, Sequence, Union, runtime_checkable

import torch


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings (docs/method.md section 6: train T=1.0; eval T=0.7, top-p 0.8, top-k 20)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = no top-k filter
    max_new_tokens: int = 64
    stop_token_ids: tuple[int, ...] = ()  # generation of a row ends after any of these

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@dataclass
class Generation:
    """One sampled response: its tokens and each token's log-probability under
    the model at temperature 1 (the policy that PPO optimizes), not under the
    tempered/filtered sampling distribution."""

    token_ids: list[int]
    logprobs: list[float]
    finished: bool  # ended on a stop token (False: hit max_new_tokens)


#: What ``Generator.generate`` draws from: one generator for the whole batch, or one per prompt.
RowGenerators = Union[torch.Generator, Sequence[torch.Generator]]


def check_token_id(token: object, vocab_size: int, where: str) -> None:
    """A token id must be a plain int in [0, vocab_size); ``where`` names the input."""
    if not isinstance(token, int) or isinstance(token, bool) or not 0 <= token < vocab_size:
        raise ValueError(f"{where}: {token!r} is not a token id in [0, {vocab_size})")


def check_generators(generator: object, num_prompts: int) -> torch.Generator | list[torch.Generator]:
    """``Generator.generate``'s ``generator``, checked: one ``torch.Generator``
    (returned as it is) or a sequence of one per prompt (returned as a list)."""
    if isinstance(generator, torch.Generator):
        return generator
    if isinstance(generator, (str, bytes)) or not isinstance(generator, Sequence):
        raise TypeError("generate needs a torch.Generator or a sequence of one torch.Generator per prompt, "
                        f"got {type(generator).__name__}")
    if len(generator) != num_prompts:
        raise ValueError(f"generate got {num_prompts} prompts but {len(generator)} generators")
    for i, g in enumerate(generator):
        if not isinstance(g, torch.Generator):
            raise TypeError(f"generator[{i}] is a {type(g).__name__}, not a torch.Generator")
    return list(generator)


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


def check_prompts(prompts: Sequence[Sequence[int]], vocab_size: int) -> list[list[int]]:
    """Prompts as lists of ints, checked: none empty, every id in the vocabulary."""
    rows = []
    for i, prompt in enumerate(prompts):
        if len(prompt) == 0:
            raise ValueError(f"prompts[{i}] is empty: every prompt needs at least one token")
        row = [int(t) for t in prompt]
        if min(row) < 0 or max(row) >= vocab_size:
            raise ValueError(f"prompts[{i}] holds ids outside [0, {vocab_size})")
        rows.append(row)
    return rows


def check_candidates(candidates: Sequence[Sequence[Sequence[int]]], num_prompts: int,
                     vocab_size: int) -> list[list[list[int]]]:
    """``Generator.score``'s candidates as lists of ints, checked: one list per
    prompt, no empty candidate, every id in the vocabulary."""
    if len(candidates) != num_prompts:
        raise ValueError(f"score got {num_prompts} prompts but {len(candidates)} candidate lists")
    out: list[list[list[int]]] = []
    for i, options in enumerate(candidates):
        checked = []
        for j, candidate in enumerate(options):
            candidate = [int(t) for t in candidate]
            if not candidate:
                raise ValueError(f"candidates[{i}][{j}] is empty: every candidate needs at least one token")
            if min(candidate) < 0 or max(candidate) >= vocab_size:  # checked one by one only to name it
                for token in candidate:
                    check_token_id(token, vocab_size, f"candidates[{i}][{j}]")
            checked.append(candidate)
        out.append(checked)
    return out


@runtime_checkable
class Generator(Protocol):
    """Rollout-side model. Token ids in, token ids out; no text."""

    def generate(
        self, prompts: Sequence[Sequence[int]], sampling: SamplingParams, generator: RowGenerators
    ) -> list[Generation]:
        """Sample one response per prompt, all prompts in one batch (KV-cached).

        ``generator`` is one ``torch.Generator`` (every row draws from it, in
        batch order: a row's sample depends on the rows before it) or a sequence
        of them, one per prompt (row ``i`` draws only from ``generator[i]``, and
        only while it is unfinished: its sample and the generator's state after
        the call depend on nothing but its own prompt, so they are the same in
        any batch, order or split; rollout workers rely on it)."""
        ...

    def score(
        self, prompts: Sequence[Sequence[int]], candidates: Sequence[Sequence[Sequence[int]]]
    ) -> list[list[list[float]]]:
        """Per-token log-probabilities of each candidate continuation of each prompt:
        ``out[i][j][t] = log p(candidates[i][j][t] | prompts[i] + candidates[i][j][:t])``."""
        ...

    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        """Weight sync: make the generator sample from these policy weights."""
        ...

    def close(self) -> None:
        """Free what the generator holds beyond Python objects (an engine's
        processes and device memory); nothing to do for an in-process model."""
        ...


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
    """PPO settings (docs/method.md section 6)."""

    clip_ratio: float = 0.2
    entropy_coef: float = 0.001
    kl_coef: float = 0.0
    kl_estimator: str = "low_var_kl"


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
