"""Batched rollouts: every active meta-episode's turn goes to the model in one call.

``PolicyActor`` turns requests into responses with a ``Generator``: in
constrained mode it scores the legal actions' token sequences and samples one
from their softmax (temperature-scaled); in free mode it samples text. The
stored log-probability is always the policy's at temperature 1, which is what
PPO's ratio compares against.

Randomness: every meta-episode draws its policy samples from its own
``torch.Generator``, seeded from (the caller's generator, its index in the
call) by ``meta_episode_seeds``. So a meta-episode's sampled path depends on
neither the other meta-episodes of its batch nor how the batch is split:
rollout workers that each play a contiguous share of the meta-episodes
(``mage_core.rollout.pool``) return exactly what one process returns.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import torch

from mage_core.generation import Generator, RowGenerators, SamplingParams
from mage_core.rollout.meta_episode import MetaEpisode, Request, Response


class PolicyActor:
    def __init__(self, generator: Generator, decode: Callable[[list[int]], str], sampling: SamplingParams) -> None:
        self.generator = generator
        self.decode = decode
        self.sampling = sampling

    def decide(self, requests: Sequence[Request], rng: RowGenerators) -> list[Response]:
        """One response per request. ``rng``: one ``torch.Generator`` that every
        request draws from in order (constrained ones first), or one per request
        (request ``i`` draws only from ``rng[i]``)."""
        per_request = not isinstance(rng, torch.Generator)
        if per_request and len(rng) != len(requests):  # type: ignore[arg-type]
            raise ValueError(f"decide got {len(requests)} requests but {len(rng)} generators")  # type: ignore[arg-type]

        def rng_of(i: int) -> torch.Generator:
            return rng[i] if per_request else rng  # type: ignore[index,return-value]

        responses: list[Response | None] = [None] * len(requests)
        constrained = [i for i, r in enumerate(requests) if r.candidate_ids is not None]
        free = [i for i, r in enumerate(requests) if r.candidate_ids is None]
        if constrained:
            scores = self.generator.score([requests[i].prompt_ids for i in constrained],
                                          [requests[i].candidate_ids for i in constrained])  # type: ignore[misc]
            choices, logprobs = self._choose([[math.fsum(tokens) for tokens in per_candidate]
                                              for per_candidate in scores], [rng_of(i) for i in constrained])
            for i, choice, logprob in zip(constrained, choices, logprobs):
                texts = requests[i].candidate_texts
                assert texts is not None
                responses[i] = Response(texts[choice], logprob, choice=choice)
        if free:
            generators: RowGenerators = [rng_of(i) for i in free] if per_request else rng  # type: ignore[assignment]
            generations = self.generator.generate([requests[i].prompt_ids for i in free], self.sampling, generators)
            for i, g in zip(free, generations):
                responses[i] = Response(self.decode(g.token_ids), math.fsum(g.logprobs), token_ids=g.token_ids,
                                        token_logprobs=list(g.logprobs))
        assert all(r is not None for r in responses)
        return responses  # type: ignore[return-value]

    def _choose(self, totals: list[list[float]], rngs: list[torch.Generator]) -> tuple[list[int], list[float]]:
        """Sample one candidate per row from softmax(totals / T) (T = 0: greedy),
        all rows at once; returns the choices and their log-probabilities at
        temperature 1 (what PPO's ratio compares against). ``totals[i]``: row i's
        candidate scores; row i draws one uniform from ``rngs[i]`` (the same
        generator object may serve several rows: it is then drawn in row order)
        and takes the first candidate whose cumulative probability exceeds it
        (inverse CDF), so its draw depends on nothing but its own generator."""
        width = max(len(t) for t in totals)
        table = torch.tensor([t + [-math.inf] * (width - len(t)) for t in totals], dtype=torch.float64)  # [B, C]
        logp = torch.log_softmax(table, dim=1)  # [B, C]; missing candidates get -inf
        temperature = self.sampling.temperature
        if temperature == 0:
            choice = table.argmax(dim=1)
        else:
            cumulative = torch.softmax(table / temperature, dim=1).cumsum(dim=1)  # [B, C]
            uniform = torch.cat([torch.rand(1, generator=g, dtype=torch.float64, device=g.device).cpu()
                                 for g in rngs])  # [B]
            counts = torch.tensor([len(t) for t in totals])
            choice = torch.minimum((cumulative < uniform[:, None]).sum(dim=1), counts - 1)
        picked = logp.gather(1, choice[:, None])[:, 0]
        return choice.tolist(), picked.tolist()


def meta_episode_seeds(rng: torch.Generator, count: int) -> list[int]:
    """One seed per meta-episode of a call, from ONE draw of ``rng`` (so the
    caller's generator advances by the same amount whatever ``count`` is, and a
    checkpoint of it fixes every seed of the next call).

    Seed ``i`` hashes (that draw, ``i``) through ``np.random.SeedSequence``.
    torch's CPU generator (mt19937) keeps only the low 32 bits of a seed, so the
    seeds are 32-bit and made distinct within the call (a collision, chance
    ~count^2 / 2^33, re-hashes with an attempt counter), so no two meta-episodes
    of a batch share a stream."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    base = int(torch.randint(0, 2**62, (1,), generator=rng, device=rng.device))
    seeds: list[int] = []
    taken: set[int] = set()
    for index in range(count):
        attempt = 0
        while True:
            key = [base, index] if attempt == 0 else [base, index, attempt]
            seed = int(np.random.SeedSequence(key).generate_state(1, dtype=np.uint32)[0])
            if seed not in taken:
                break
            attempt += 1
        taken.add(seed)
        seeds.append(seed)
    return seeds


def seeded_generators(seeds: Sequence[int], device: str | torch.device = "cpu") -> list[torch.Generator]:
    """One ``torch.Generator`` per seed, on ``device``."""
    return [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]


def run_meta_episodes(
    metas: Sequence[MetaEpisode],
    actor: PolicyActor,
    rng: torch.Generator,
    on_turn: Callable[[int], None] | None = None,
) -> None:
    """Drive every meta-episode to its end, one batched policy call per turn.
    Meta-episode ``i`` samples from its own generator, seeded with
    ``meta_episode_seeds(rng, len(metas))[i]``."""
    seeds = meta_episode_seeds(rng, len(metas))
    run_seeded_meta_episodes(metas, actor, seeded_generators(seeds, rng.device), on_turn)


def run_seeded_meta_episodes(
    metas: Sequence[MetaEpisode],
    actor: PolicyActor,
    generators: Sequence[torch.Generator],
    on_turn: Callable[[int], None] | None = None,
) -> None:
    """``run_meta_episodes`` with the meta-episodes' own generators given
    (``generators[i]`` for ``metas[i]``): what a rollout worker runs on its share."""
    if len(generators) != len(metas):
        raise ValueError(f"{len(metas)} meta-episodes but {len(generators)} generators")
    while True:
        active = [i for i, m in enumerate(metas) if not m.done]
        if not active:
            return
        requests = [metas[i].request() for i in active]
        responses = actor.decide(requests, [generators[i] for i in active])
        for i, request, response in zip(active, requests, responses):
            metas[i].apply(request, response)
        if on_turn is not None:
            on_turn(len(active))
