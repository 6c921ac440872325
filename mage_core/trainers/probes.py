"""What the policy's play reveals beyond its success rate, for tasks that declare it.

The analyses themselves are the game's, in its own folder, reached through its task
(``Task.exact_values``, ``Task.strategy_probes``: Kuhn Poker's ``envs/kuhn_poker/``); they read
the policy through ``TrainerView``, this layer's ``envs.policy_view.PolicyView``. Here: when
each applies, and the trainer they read.

- ``exact_greedy_values``: the greedy policy's exact value against deterministic opponents
  (``chips_exact_ep{k}``);
- ``policy_strategy``: the policy read as a strategy of its game (Kuhn: its first hand as a
  behaviour strategy; what the league, ``train.league``, grows from), and
  ``strategy_metrics`` its figures (Kuhn: exploitability);
- ``suite_probes``: one evaluation suite's figures (Kuhn: opening bets, hand-2 bets).

Each takes the trainer (``MetaRLTrainer``) whose policy it reads and returns nothing for a
task that does not declare the capability. The iteration loop (``trainers/meta_rl.py``) and
``mage evaluate`` call them; ``mage kuhn probe`` builds a ``TrainerView`` itself. This module
imports nothing of ``meta_rl`` (the loop imports it), so the two form no circle.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from mage_core.envs.registry import resolve, task
from mage_core.generation import SamplingParams
from mage_core.opponents.population import PopulationEntry
from mage_core.rollout.meta_episode import MetaEpisode, MetaEpisodeSpec, Request, Response
from mage_core.rollout.runner import meta_episode_seeds


class TrainerView:
    """A trainer's policy as a game's analyses read it (``envs.policy_view.PolicyView``):
    meta-episodes built and played by ``trainer`` (a ``MetaRLTrainer``) with its evaluation
    settings, read from its generator's scores."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.cfg = trainer.cfg
        self.game: str = trainer.game

    @property
    def settings(self) -> Any:
        return self.trainer.eval_settings

    def opponent_settings(self) -> Any:
        return self.trainer.opponent_settings()

    def meta_episodes(self, pairs: Sequence[tuple[str, int]]) -> list[MetaEpisode]:
        specs = [MetaEpisodeSpec(self.game, opponent, seat, 0, i) for i, (opponent, seat) in enumerate(pairs)]
        return self.trainer.build(specs, self.trainer.eval_settings)

    def force(self, meta: MetaEpisode, request: Request, action: str) -> None:
        meta.apply(request, Response(action, 0.0, choice=(request.candidate_texts or []).index(action)))

    def probabilities(self, requests: Sequence[Request], action: str) -> list[float]:
        scores = self.trainer.generator.score([r.prompt_ids for r in requests], [r.candidate_ids for r in requests])
        temperature = self.cfg.evaluation.temperature
        out = []
        for request, per_candidate in zip(requests, scores):
            totals = torch.tensor([sum(token_logprobs) for token_logprobs in per_candidate], dtype=torch.float64)
            probs = (torch.nn.functional.one_hot(totals.argmax(), len(totals)).double() if temperature == 0
                     else torch.softmax(totals / temperature, dim=0))
            out.append(sum(float(q) for q, candidate in zip(probs, request.candidate_texts or [])
                           if candidate == action))  # candidates are the legal actions, canonical
        return out

    def play_greedy(self, metas: Sequence[MetaEpisode]) -> list[MetaEpisode]:
        trainer = self.trainer
        greedy = SamplingParams(temperature=0.0, max_new_tokens=self.cfg.policy.max_new_tokens,
                                stop_token_ids=trainer.codec.stop_token_ids)
        seeds = meta_episode_seeds(torch.Generator().manual_seed(0), len(metas))  # greedy: never drawn
        return trainer.play(metas, trainer.actor(greedy), seeds)


def exact_greedy_values(trainer: Any, entries: Sequence[PopulationEntry] | None = None) -> dict[str, float]:
    """A task with exact values (``Task.exact_values.greedy_values``), against a population of
    deterministic opponents (default: the training population): the greedy policy's exact
    value by episode index, every (opponent, seat) and chance outcome enumerated, as
    ``eval/.../chips_exact_ep{k}``. Empty for other tasks and for populations with a
    stochastic opponent. Not for the memory baselines: their shared memory bank ties the
    enumerated meta-episodes together, so the weighted sum would not be an exact value."""
    exact = task(trainer.game).exact_values
    if not exact or trainer.eval_settings.retrieval != "none":
        return {}
    entries = trainer.cfg.population.entries(trainer.game) if entries is None else entries
    values = resolve(exact.greedy_values)(TrainerView(trainer), entries)
    return {f"eval/{key}": v for key, v in values.items()}


def policy_strategy(trainer: Any) -> Any:
    """The policy read as a strategy of its game (``Task.strategy_probes.strategy``: Kuhn's
    first hand as a behaviour strategy), or None where it cannot be read (another task,
    free-text actions)."""
    probes = task(trainer.game).strategy_probes
    if not probes:
        return None
    return resolve(probes.strategy)(TrainerView(trainer))


def strategy_metrics(trainer: Any) -> dict[str, float]:
    """``eval/...`` figures of ``policy_strategy`` (``Task.strategy_probes.metrics``: Kuhn's
    first-hand exploitability and P(BET) per information set); empty where it cannot be read."""
    strategy = policy_strategy(trainer)
    if strategy is None:
        return {}
    return resolve(task(trainer.game).strategy_probes.metrics)(strategy)  # type: ignore[union-attr]


def suite_probes(trainer: Any, entries: Sequence[PopulationEntry]) -> dict[str, float]:
    """One evaluation suite's probe figures (``Task.strategy_probes.suite``: Kuhn's opening
    bets and hand-2 bets); empty for a task without strategy probes."""
    probes = task(trainer.game).strategy_probes
    if not probes:
        return {}
    return resolve(probes.suite)(TrainerView(trainer), entries)
