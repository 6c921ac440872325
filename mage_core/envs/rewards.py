"""Penalties added to the task reward (docs/method.md section 3, paper Appendix A).

Pure functions on numbers: no config objects, no game state.
"""

from __future__ import annotations


def length_penalty(num_response_tokens: int, max_response_tokens: int, coef: float) -> float:
    """``coef * clip((L - L_max/2) / (L_max/2), 0, 1)`` (paper eq. 13).

    Zero up to half the maximum response length, rising linearly to ``coef`` at
    the maximum. Returned as a non-negative number to subtract from the reward.
    """
    if max_response_tokens <= 0:
        raise ValueError(f"max_response_tokens must be positive, got {max_response_tokens}")
    if num_response_tokens < 0:
        raise ValueError(f"num_response_tokens must be >= 0, got {num_response_tokens}")
    half = max_response_tokens / 2
    fraction = (num_response_tokens - half) / half
    return coef * min(max(fraction, 0.0), 1.0)


def invalid_action_penalty(invalid: bool, penalty: float) -> float:
    """``penalty`` for a turn with no parsable legal action, else 0 (paper: 0.5)."""
    return penalty if invalid else 0.0


def stalled_timeout_reward(reward_so_far: float, turn_reward: float, legal_return_floor: float) -> float:
    """The task reward of the turn on which the turn limit ends an episode that had
    at least one invalid turn (docs/rewards.md, "Stalling").

    An invalid turn earns no task reward and the opponent does not move (docs/method.md
    section 2), so without this rule a policy could stall into a timeout and pay
    less than a legal loss (six invalid Kuhn turns cost 6 x 0.5 = 3 against 5 for
    a fold). The final turn pays what brings the episode's task-reward total to
    ``min(reward_so_far + turn_reward, legal_return_floor)``, where the floor is a
    lower bound on what legal play of the episode can earn: such an episode never
    pays more than the worst legal outcome, and its invalid-action penalties come
    on top.
    """
    return min(reward_so_far + turn_reward, legal_return_floor) - reward_so_far
