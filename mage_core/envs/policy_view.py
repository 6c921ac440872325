"""What a game's own analyses may ask of a policy (docs/architecture.md, "Tasks").

A game's strategy probes (``Task.strategy_probes``) and its greedy policy's exact value
(``Task.exact_values``) read a policy, and the policy, its generator and the rollout live
layers above the games. So those analyses are written against ``PolicyView``, declared
here on the games' layer, and the trainers' layer implements it
(``mage_core.trainers.probes.TrainerView``) and passes one in: the game's folder imports
nothing above its layer, and the arrow points down (the games own the interface, the
trainer fills it in).

A view's meta-episodes are the rollout's (``MetaEpisode``), used by duck typing: ``request()``,
``episodes``, ``decisions``, ``done`` and ``env`` (the game's own environment, e.g. Kuhn's
``fix_deals``); a request's ``phase`` and ``candidate_texts``.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence


class PolicyView(Protocol):
    """A policy under evaluation, as a game's analyses read it.

    ``cfg``: the run's configuration, read only (as ``TaskData.problems`` reads it);
    ``game``: the task's name."""

    cfg: Any
    game: str

    @property
    def settings(self) -> Any:
        """How the evaluation plays a meta-episode (the rollout's ``MetaSettings``:
        ``num_episodes``, ``restart``, ``early_stop``, ``reflect``, ``reflections``, ``retrieval``)."""

    def opponent_settings(self) -> Any:
        """The opponents the policy meets (``OpponentSettings``: the configured ones and
        ``train.league``'s members)."""

    def meta_episodes(self, pairs: Sequence[tuple[str, int]]) -> list[Any]:
        """Fresh meta-episodes under ``settings``, one per (opponent, agent seat); the i-th
        has task seed 0 and group i. Nothing is played yet."""

    def force(self, meta: Any, request: Any, action: str) -> None:
        """Answer ``request`` of ``meta`` with ``action`` (one of its candidate texts), as if
        the policy had chosen it."""

    def probabilities(self, requests: Sequence[Any], action: str) -> list[float]:
        """The policy's probability of ``action`` at each request, read from its scores of
        the candidates at the evaluation temperature (greedy at 0): what the rollout samples
        from. Constrained actions only (``policy.action_mode: constrained``)."""

    def play_greedy(self, metas: Sequence[Any]) -> list[Any]:
        """Play ``metas`` to the end with the greedy policy (temperature 0), in this process;
        the played meta-episodes."""
