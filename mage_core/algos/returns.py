"""Per-step rewards and returns of one meta-episode (docs/method.md sections 3-4).

A meta-episode is a time-ordered list of T policy decisions: play steps and
reflect steps. Each step carries the index of the episode it belongs to; a
reflect step sits between episodes k-1 and k and belongs to episode k (the one
it prepares), so the episode indices run 0..K'-1, non-decreasing, and within an
episode every reflect step comes before its play steps. K' may be smaller than K
when the meta-episode stopped early (docs/method.md section 1).

Shapes: ``T`` = number of steps of the meta-episode, ``K'`` = number of episodes
played. All arrays are 1-D numpy arrays; outputs are float64.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

# ---------------------------------------------------------------- validation


def _as_steps(
    task_rewards: np.ndarray, episode: np.ndarray, is_play: np.ndarray, rewards_name: str = "task_rewards"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check one meta-episode's step arrays and return them as float/int/bool arrays."""
    rewards = np.asarray(task_rewards, dtype=np.float64)
    episode_arr = np.asarray(episode)
    play = np.asarray(is_play)
    for name, arr in ((rewards_name, rewards), ("episode", episode_arr), ("is_play", play)):
        if arr.ndim != 1:
            raise ValueError(f"{name} must be 1-D (one entry per step), got shape {arr.shape}")
    num_steps = rewards.shape[0]
    if episode_arr.shape[0] != num_steps or play.shape[0] != num_steps:
        raise ValueError(
            f"{rewards_name}, episode and is_play must have the same length, got "
            f"{num_steps}, {episode_arr.shape[0]} and {play.shape[0]}"
        )
    if num_steps == 0:
        raise ValueError("a meta-episode needs at least one step")
    if not np.all(np.isfinite(rewards)):
        raise ValueError(f"{rewards_name} must be finite")
    if play.dtype != np.bool_:
        if not np.all((play == 0) | (play == 1)):
            raise ValueError("is_play must be boolean (True for play steps, False for reflect steps)")
        play = play.astype(bool)
    if not np.issubdtype(episode_arr.dtype, np.integer):
        if not np.all(np.mod(episode_arr, 1) == 0):
            raise ValueError("episode must hold integer episode indices")
        episode_arr = episode_arr.astype(np.int64)
    if episode_arr[0] != 0:
        raise ValueError(f"episode indices must start at 0, got {episode_arr[0]}")
    steps = np.diff(episode_arr)
    if np.any((steps != 0) & (steps != 1)):
        bad = int(np.flatnonzero((steps != 0) & (steps != 1))[0]) + 1
        raise ValueError(
            f"episode indices must be in time order and contiguous (0, 0, 1, 1, 2, ...); "
            f"step {bad} jumps from {episode_arr[bad - 1]} to {episode_arr[bad]}"
        )
    num_episodes = int(episode_arr[-1]) + 1
    for k in range(num_episodes):
        in_k = episode_arr == k
        play_k = play[in_k]
        if not play_k.any():
            raise ValueError(f"episode {k} has no play step (a reflect step belongs to the episode after it)")
        # Reflect steps precede the play steps of their episode: once play starts, no reflect.
        first_play = int(np.argmax(play_k))
        if not play_k[first_play:].all():
            raise ValueError(f"episode {k} has a reflect step after its first play step; reflect steps "
                             f"belong to the episode AFTER them")
    if not play[0]:
        raise ValueError("episode 0 cannot start with a reflect step: there is no earlier episode to reflect on")
    if np.any(rewards[~play] != 0):
        raise ValueError(f"{rewards_name} of reflect steps must be 0 (reflections earn no task reward; "
                         f"their penalties belong to the sample's score)")
    return rewards, episode_arr, play


def _check_gamma(name: str, gamma: float) -> float:
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {gamma}")
    return float(gamma)


# ------------------------------------------------------------ reward placing


def episode_returns(task_rewards: np.ndarray, episode: np.ndarray, is_play: np.ndarray) -> np.ndarray:
    """``R_k`` = sum of the task rewards of episode k's play steps; shape ``[K']``.

    docs/method.md section 3. ``task_rewards``, ``episode``, ``is_play``: shape ``[T]``.
    """
    rewards, episode_arr, play = _as_steps(task_rewards, episode, is_play)
    num_episodes = int(episode_arr[-1]) + 1
    return np.bincount(episode_arr[play], weights=rewards[play], minlength=num_episodes).astype(np.float64)


def _last_play_steps(episode: np.ndarray, play: np.ndarray) -> np.ndarray:
    """Index of the last play step of each episode; shape ``[K']``."""
    num_episodes = int(episode[-1]) + 1
    steps = np.arange(episode.shape[0])
    return np.array([steps[play & (episode == k)][-1] for k in range(num_episodes)])


def _differential(rewards: np.ndarray, episode: np.ndarray, play: np.ndarray) -> np.ndarray:
    # d_0 = R_0, d_k = R_k - R_{k-1}, on the LAST play step of episode k (docs/method.md section 4).
    num_episodes = int(episode[-1]) + 1
    totals = np.bincount(episode[play], weights=rewards[play], minlength=num_episodes)
    placed = np.zeros_like(rewards)
    placed[_last_play_steps(episode, play)] = np.diff(totals, prepend=0.0)
    return placed


def _raw(rewards: np.ndarray, episode: np.ndarray, play: np.ndarray) -> np.ndarray:
    # The cumulative, LaMer's and the single-episode returns use the raw per-step rewards; they
    # differ in how the returns cross episode boundaries (CROSSINGS).
    return np.where(play, rewards, 0.0)


def _final(rewards: np.ndarray, episode: np.ndarray, play: np.ndarray) -> np.ndarray:
    # R_{K'-1} on the last play step, 0 elsewhere; with no discount (FINAL_GAMMAS)
    # every step's return is the final episode's reward.
    placed = np.zeros_like(rewards)
    last = int(episode[-1])
    placed[_last_play_steps(episode, play)[-1]] = rewards[play & (episode == last)].sum()
    return placed


#: How a return crosses an episode boundary (docs/method.md section 4):
#: ``recursive``: one backward recursion over the play steps, ``gamma_traj`` once at each
#: boundary, so a later episode's return also carries ``gamma_step`` for every step left in the
#: current one (MAGE's and LaMer's public code); ``none``: the return restarts at each boundary;
#: ``episode_start``: LaMer's published formula, the in-episode return ``g_t`` plus
#: ``sum_{m > n} gamma_traj^(m - n) g_0^(m)``, each later episode's return from its first step,
#: discounted by the episode boundaries only.
CROSSINGS = ("recursive", "none", "episode_start")

#: reward variant -> (how rewards are placed, how returns cross episode boundaries).
VARIANTS: dict[str, tuple[Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray], str]] = {
    "differential": (_differential, "recursive"),
    # The cumulative return as MAGE's and LaMer's public code compute it (the MAGE paper's
    # "Cumulative Return (LAMER-style)" ablation, run in MAGE's code).
    "cumulative": (_raw, "recursive"),
    "single_episode": (_raw, "none"),
    # Beyond the paper (issue 12): the objective MAGE's differential rewards telescope
    # to, R_{K'-1}, given whole to every step, undiscounted. MAGE's discounted
    # differential return credits the last episode with R_{K-1} - R_{K-2} only and
    # the first with 0.4 R_0 + 0.24 R_1 + 0.36 R_2 (K = 3, gamma_traj 0.6).
    "final": (_final, "recursive"),
    # LaMer's published return (arXiv 2512.16848): the raw rewards, each later episode's return
    # added from its first step, discounted by gamma_traj per boundary and never by gamma_step
    # (rewards (0, 0, -10 | +10), 0.95 / 0.6: -3.025, -3.5, -4 | 10, where the recursion gives -3.61).
    "lamer": (_raw, "episode_start"),
}
#: The discounts the "final" variant uses whatever gamma_step/gamma_traj say.
FINAL_GAMMAS = (1.0, 1.0)


def _variant(variant: str) -> tuple[Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray], str]:
    if variant not in VARIANTS:
        raise ValueError(f"unknown reward variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    return VARIANTS[variant]


def place_rewards(variant: str, task_rewards: np.ndarray, episode: np.ndarray, is_play: np.ndarray) -> np.ndarray:
    """The per-step rewards ``r_t`` the returns consume; shape ``[T]``.

    - ``differential`` (MAGE): ``d_k = R_k - R_{k-1}`` (``d_0 = R_0``) on the last play
      step of episode k, 0 elsewhere; the sum telescopes to ``R_{K'-1}``.
    - ``cumulative``, ``lamer`` and ``single_episode``: the raw task rewards.
    - ``final`` (beyond the paper): ``R_{K'-1}`` on the last play step, 0 elsewhere.
    Reflect steps always get 0 (docs/method.md section 4).
    """
    place, _ = _variant(variant)
    rewards, episode_arr, play = _as_steps(task_rewards, episode, is_play)
    return place(rewards, episode_arr, play)


# ------------------------------------------------------------------- returns


def step_returns(
    rewards: np.ndarray,
    episode: np.ndarray,
    is_play: np.ndarray,
    gamma_step: float,
    gamma_traj: float,
    crossing: str = "recursive",
) -> np.ndarray:
    """Discounted step returns of one meta-episode; shape ``[T]`` (docs/method.md section 4).

    Backwards over the steps: a play step gets ``G = r_t + g * G`` with
    ``g = gamma_step`` inside an episode and, with ``crossing="recursive"``, ``g = gamma_traj``
    once at each episode boundary; a reflect step gets the return of the next play step (the
    first play step of its own episode). ``crossing="none"`` (single-episode variant) restarts
    ``G`` at 0 at each boundary, so ``gamma_traj`` is unused; ``crossing="episode_start"``
    (LaMer's published formula) adds to that in-episode return ``C_n = gamma_traj * (g_0^(n+1)
    + C_{n+1})``, ``g_0^(m)`` being episode m's in-episode return from its first play step.
    ``rewards`` are the placed rewards (``place_rewards``), shape ``[T]``.
    """
    gamma_step = _check_gamma("gamma_step", gamma_step)
    gamma_traj = _check_gamma("gamma_traj", gamma_traj)
    if crossing not in CROSSINGS:
        raise ValueError(f"unknown crossing {crossing!r}; choose one of {', '.join(CROSSINGS)}")
    placed, episode_arr, play = _as_steps(rewards, episode, is_play, rewards_name="rewards")
    returns = np.zeros_like(placed)
    running = 0.0
    current = int(episode_arr[-1])
    later = 0.0  # C_n of the episode being swept (episode_start)
    for t in range(placed.shape[0] - 1, -1, -1):
        if play[t]:
            k = int(episode_arr[t])
            if k == current:
                discount = gamma_step
            elif crossing == "recursive":
                discount = gamma_traj
            else:
                if crossing == "episode_start":  # `running` is g_0 of episode current
                    later = gamma_traj * (running + later)
                discount = 0.0  # the later episode's return does not flow back through G
            running = placed[t] + discount * running
            current = k
        returns[t] = running + later
    return returns


def meta_episode_returns(
    variant: str,
    task_rewards: np.ndarray,
    episode: np.ndarray,
    is_play: np.ndarray,
    gamma_step: float,
    gamma_traj: float,
) -> np.ndarray:
    """``place_rewards`` then ``step_returns`` for one reward variant; shape ``[T]``.
    The ``final`` variant is undiscounted (every step's return is ``R_{K'-1}``)."""
    _, crossing = _variant(variant)
    if variant == "final":
        gamma_step, gamma_traj = FINAL_GAMMAS
    placed = place_rewards(variant, task_rewards, episode, is_play)
    return step_returns(placed, episode, is_play, gamma_step, gamma_traj, crossing=crossing)


# ------------------------------------------------------------ a whole batch


def batch_returns(
    variant: str,
    task_rewards: np.ndarray,
    episode: np.ndarray,
    is_play: np.ndarray,
    valid: np.ndarray,
    gamma_step: float,
    gamma_traj: float,
) -> tuple[np.ndarray, np.ndarray]:
    """``meta_episode_returns`` and ``episode_returns`` of M meta-episodes at once.

    Inputs are ``[M, T]`` arrays, meta-episode m's steps in row m left-aligned and
    ``valid`` marking them (the rest is padding, ignored). Every row must have the
    structure ``meta_episode_returns`` checks (what ``MetaEpisode`` records); only
    the cheap checks are repeated here (shapes, finite rewards, episode indices
    starting at 0 and stepping by 0 or 1). Returns (step returns ``[M, T]``, 0 on
    padding; episode totals ``R_k`` ``[M, K]`` with K the most episodes of any
    row, 0 past a row's last episode).

    One backward sweep over the T columns, vectorised over the rows: the same
    recursion as ``step_returns``, where ``current`` (the episode of the nearest
    later play step) also tells the last play step of each episode, which is where
    the differential variant places ``d_k`` (``_differential``)."""
    place, crossing = _variant(variant)
    gamma_step = _check_gamma("gamma_step", gamma_step)
    gamma_traj = _check_gamma("gamma_traj", gamma_traj)
    if variant == "final":
        gamma_step, gamma_traj = FINAL_GAMMAS
    rewards = np.asarray(task_rewards, dtype=np.float64)
    episode = np.asarray(episode, dtype=np.int64)
    play = np.asarray(is_play, dtype=bool)
    valid = np.asarray(valid, dtype=bool)
    if rewards.ndim != 2 or not rewards.shape == episode.shape == play.shape == valid.shape:
        raise ValueError(f"task_rewards, episode, is_play and valid must be [M, T] arrays of one shape, got "
                         f"{rewards.shape}, {episode.shape}, {play.shape} and {valid.shape}")
    num_rows, num_steps = rewards.shape
    if num_rows and not valid[:, 0].all():
        raise ValueError("every meta-episode needs at least one step (valid[:, 0] must be true)")
    if not np.all(np.isfinite(rewards[valid])):
        raise ValueError("task_rewards must be finite")
    if num_rows and np.any(episode[:, 0] != 0):
        raise ValueError("episode indices must start at 0 in every row")
    jumps = np.diff(episode, axis=1)
    inner = valid[:, 1:]
    if np.any(inner & (jumps != 0) & (jumps != 1)):
        raise ValueError("episode indices must be in time order and contiguous (0, 0, 1, 1, 2, ...) in every row")
    play = play & valid
    num_episodes = int(episode[valid].max()) + 1 if num_rows else 0
    totals = np.zeros((num_rows, num_episodes))
    rows = np.broadcast_to(np.arange(num_rows)[:, None], rewards.shape)
    np.add.at(totals, (rows[play], episode[play]), rewards[play])
    differential = place is _differential
    last_episode = np.where(valid, episode, 0).max(axis=1) if num_rows else np.zeros(0, dtype=np.int64)
    deltas = np.diff(totals, axis=1, prepend=0.0) if differential else None
    returns = np.zeros_like(rewards)
    running = np.zeros(num_rows)
    later = np.zeros(num_rows)  # C_n of the episode being swept (episode_start)
    current = np.full(num_rows, -1)
    index = np.arange(num_rows)
    for t in range(num_steps - 1, -1, -1):
        p, k = play[:, t], episode[:, t]
        if differential:
            assert deltas is not None
            reward = np.where(p & (current != k), deltas[index, np.minimum(k, num_episodes - 1)], 0.0)
        elif place is _final:  # R_{K'-1} on the last play step of the row (current is still -1)
            reward = np.where(p & (current == -1), totals[index, last_episode], 0.0)
        else:
            reward = np.where(p, rewards[:, t], 0.0)
        boundary = gamma_traj if crossing == "recursive" else 0.0
        if crossing == "episode_start":  # entering episode k from episode current: C_k
            later = np.where(p & (current != k) & (current != -1), gamma_traj * (running + later), later)
        discount = np.where(k == current, gamma_step, boundary)
        running = np.where(p, reward + discount * running, running)
        current = np.where(p, k, current)
        returns[:, t] = np.where(valid[:, t], running + later, 0.0)
    return returns, totals
