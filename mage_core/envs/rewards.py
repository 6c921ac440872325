"""Penalties added to the task reward (METHOD.md section 3, paper Appendix A).

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
