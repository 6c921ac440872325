"""What the rollout needs from a model: the ``Generator`` protocol and its sampling types.

A ``Generator`` samples responses and scores continuations, in token ids (no text).
Implementations live in ``mage_core/backends`` (HF transformers, vLLM, an OpenAI-compatible
server: docs/architecture.md, "Backends behind protocols"); the rollout, the trainer and
the evaluation are written against this module only, which sits below all of them
(docs/architecture.md, "Layers"). The ``check_*`` functions are the input checks every
implementation shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol, Sequence, Union, runtime_checkable

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
