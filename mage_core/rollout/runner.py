"""Batched rollouts: every active meta-episode's turn goes to the model in one call.

``PolicyActor`` turns requests into responses with a ``Generator``: in
constrained mode it scores the legal actions' token sequences and samples one
from their softmax (temperature-scaled); in free mode it samples text. The
stored log-probability is always the policy's at temperature 1, which is what
PPO's ratio compares against.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch

from mage_core.backends.base import Generator, SamplingParams
from mage_core.rollout.meta_episode import MetaEpisode, Request, Response


class PolicyActor:
    def __init__(self, generator: Generator, decode: Callable[[list[int]], str], sampling: SamplingParams) -> None:
        self.generator = generator
        self.decode = decode
        self.sampling = sampling

    def decide(self, requests: Sequence[Request], rng: torch.Generator) -> list[Response]:
        responses: list[Response | None] = [None] * len(requests)
        constrained = [i for i, r in enumerate(requests) if r.candidate_ids is not None]
        free = [i for i, r in enumerate(requests) if r.candidate_ids is None]
        if constrained:
            scores = self.generator.score([requests[i].prompt_ids for i in constrained],
                                          [requests[i].candidate_ids for i in constrained])  # type: ignore[misc]
            for i, per_candidate in zip(constrained, scores):
                totals = torch.tensor([sum(tokens) for tokens in per_candidate], dtype=torch.float64)
                choice = self._choose(totals, rng)
                logprob = float(torch.log_softmax(totals, 0)[choice])
                texts = requests[i].candidate_texts
                assert texts is not None
                responses[i] = Response(texts[choice], logprob, choice=choice)
        if free:
            generations = self.generator.generate([requests[i].prompt_ids for i in free], self.sampling, rng)
            for i, g in zip(free, generations):
                responses[i] = Response(self.decode(g.token_ids), math.fsum(g.logprobs), token_ids=g.token_ids)
        assert all(r is not None for r in responses)
        return responses  # type: ignore[return-value]

    def _choose(self, totals: torch.Tensor, rng: torch.Generator) -> int:
        """Sample a candidate from softmax(totals / T); T = 0 is greedy."""
        temperature = self.sampling.temperature
        if temperature == 0:
            return int(torch.argmax(totals))
        probs = torch.softmax(totals / temperature, 0)
        return int(torch.multinomial(probs.float(), 1, generator=rng))


def run_meta_episodes(
    metas: Sequence[MetaEpisode],
    actor: PolicyActor,
    rng: torch.Generator,
    on_turn: Callable[[int], None] | None = None,
) -> None:
    """Drive every meta-episode to its end, one batched policy call per turn."""
    while True:
        active = [m for m in metas if not m.done]
        if not active:
            return
        requests = [m.request() for m in active]
        responses = actor.decide(requests, rng)
        for meta, request, response in zip(active, requests, responses):
            meta.apply(request, response)
        if on_turn is not None:
            on_turn(len(active))
