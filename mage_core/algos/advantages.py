"""GRPO and GiGPO advantages over explicit group and anchor keys (docs/method.md section 5).

Every sample ``i`` is one policy decision (a play or a reflect turn) with a score
(the episode-level reward term), a step return, a group key and an anchor key.
The keys are built by the caller (``group_key``, ``anchor_key``), so that
agent-specific normalization is a property of the key, never of array layout.
Samples are never padded or duplicated here: duplicates would bias group means.

Shapes: ``N`` = number of samples; every input is 1-D of length ``N``.

Standard deviations are the unbiased sample std (``ddof=1``), as ``torch.std`` in
verl's ``compute_grpo_outcome_advantage`` and in verl-agent's GiGPO
(``gigpo/core_gigpo.py``), which MAGE inherits. A group or cluster of one sample
has no baseline but itself, so its advantage term is 0 here. (verl instead uses
mean 0, std 1 for a singleton GRPO group / GiGPO episode group, i.e. passes the raw
score through; for a singleton step cluster verl-agent also gives 0.)
"""

from __future__ import annotations

from typing import Hashable, NamedTuple, Sequence

import numpy as np

#: Anchor observation of every reflect sample (docs/method.md section 5).
REFLECTION_ANCHOR = "reflection"


class GiGPOAdvantages(NamedTuple):
    """GiGPO's advantage and its two terms; each of shape ``[N]``."""

    advantage: np.ndarray  # episode_term + step_weight * step_term
    episode_term: np.ndarray
    step_term: np.ndarray


# ---------------------------------------------------------------- keys


#: grouping name -> the fields a group key is made of (docs/method.md section 5).
GROUPINGS = {
    # MAGE's agent-specific normalization: the members share task seed, opponent and seat.
    "stationary": ("task_seed", "opponent", "seat"),
    # The ablation "non-stationary grouping": members share the task seed only.
    "non_stationary": ("task_seed",),
}
#: group scope -> whether the task seed is part of the key.
#: ``task`` (the paper): a group is the meta-episodes of one task seed.
#: ``batch`` (beyond the paper): a group spans the whole batch, every member with
#: its own task seed; with stationary grouping that is one group per (opponent,
#: seat), still one opponent identity per group, and a wider, lower-variance
#: baseline where the task seed draws luck no decision controls (fresh Kuhn deals).
GROUP_SCOPES = {"task": True, "batch": False}


def group_key(task_seed: Hashable, opponent: Hashable, seat: Hashable, grouping: str = "stationary",
              scope: str = "task") -> tuple:
    """The GRPO/GiGPO group of a sample (docs/method.md section 5): the fields that
    ``GROUPINGS[grouping]`` names, without the task seed in ``batch`` scope.
    Single-agent tasks pass ``opponent=None, seat=None``.
    """
    if grouping not in GROUPINGS:
        raise ValueError(f"unknown grouping {grouping!r}; choose one of {', '.join(GROUPINGS)}")
    if scope not in GROUP_SCOPES:
        raise ValueError(f"unknown group scope {scope!r}; choose one of {', '.join(GROUP_SCOPES)}")
    fields = {"task_seed": task_seed, "opponent": opponent, "seat": seat}
    return tuple(fields[name] for name in GROUPINGS[grouping] if GROUP_SCOPES[scope] or name != "task_seed")


def anchor_key(
    observation: str,
    episode_index: int,
    opponent: Hashable,
    global_anchor: bool = True,
    stationary: bool = True,
) -> tuple:
    """The anchor state of a sample, for GiGPO's step term (docs/method.md section 5).

    ``observation`` is the exact text of the state without history
    (``REFLECTION_ANCHOR`` for reflect samples). Global anchor (MAGE's default)
    ignores the episode index, so the same state in episodes 1..K is one cluster;
    ``global_anchor=False`` (local; ref code ``use_trial_norm``) keeps it apart.
    The opponent is part of the key so a cluster holds one opponent identity;
    ``stationary=False`` drops it, to match non-stationary grouping.
    """
    if not isinstance(observation, str):
        raise ValueError(f"observation must be the anchor text, got {type(observation).__name__}")
    key: tuple = (observation,)
    if stationary:
        key += (opponent,)
    if not global_anchor:
        key += (int(episode_index),)
    return key


# ---------------------------------------------------------------- helpers


def _as_values(name: str, values: np.ndarray) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one entry per sample), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty: advantages need at least one sample")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def _key_ids(name: str, keys: Sequence[Hashable], num_samples: int) -> np.ndarray:
    """Dense integer ids of hashable keys, in order of first appearance; shape ``[N]``."""
    if len(keys) != num_samples:
        raise ValueError(f"{name} must have one key per sample: got {len(keys)} keys for {num_samples} samples")
    ids: dict[Hashable, int] = {}
    out = np.empty(num_samples, dtype=np.int64)
    for i, key in enumerate(keys):
        try:
            out[i] = ids.setdefault(key, len(ids))
        except TypeError as err:
            raise ValueError(f"{name}[{i}] = {key!r} is not hashable") from err
    return out


def _centre(values: np.ndarray, ids: np.ndarray, scale_by_std: bool, eps: float, ddof: int) -> np.ndarray:
    """``values - mean_g`` (optionally ``/ (std_g + eps)``) per group id; singletons give 0."""
    counts = np.bincount(ids)
    means = np.bincount(ids, weights=values) / counts
    centred = values - means[ids]
    if scale_by_std:
        squares = np.bincount(ids, weights=centred**2)
        dof = np.maximum(counts - ddof, 1)
        stds = np.sqrt(squares / dof)
        centred = centred / (stds[ids] + eps)
    return np.where(counts[ids] > 1, centred, 0.0)


def _check(eps: float, ddof: int) -> None:
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps}")
    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 (population std) or 1 (sample std, as verl), got {ddof}")


# ---------------------------------------------------------------- advantages


def grpo_advantages(
    scores: np.ndarray,
    group_keys: Sequence[Hashable],
    eps: float = 1e-6,
    normalize_std: bool = True,
    ddof: int = 1,
) -> np.ndarray:
    """GRPO: ``(score_i - mean_g) / (std_g + eps)`` within each group; shape ``[N]``.

    ``normalize_std=False`` gives ``score_i - mean_g`` (Dr. GRPO). ``std`` uses
    ``ddof=1`` by default, as verl's ``torch.std``. A singleton group gets 0.
    """
    _check(eps, ddof)
    values = _as_values("scores", scores)
    ids = _key_ids("group_keys", group_keys, values.shape[0])
    return _centre(values, ids, normalize_std, eps, ddof)


#: episode_norm name -> whether both GiGPO terms are divided by (std + eps).
EPISODE_NORMS = {"mean_norm": False, "mean_std_norm": True}


def gigpo_advantages(
    scores: np.ndarray,
    returns: np.ndarray,
    group_keys: Sequence[Hashable],
    anchor_keys: Sequence[Hashable],
    step_weight: float = 1.0,
    episode_norm: str = "mean_norm",
    eps: float = 1e-6,
    ddof: int = 1,
) -> GiGPOAdvantages:
    """GiGPO: episode term + ``step_weight`` * step term; each of shape ``[N]``.

    - episode term: ``score_i`` minus the mean score over ALL samples of its group
      (``mean_norm``, the paper's setting), additionally divided by
      ``std + eps`` with ``mean_std_norm``.
    - step term: ``ret_i`` minus the mean return over the samples of its cluster,
      cluster = (group key, anchor key). As in verl-agent's ``step_norm_reward``,
      the step term follows the same mode: no std division with ``mean_norm``,
      division by ``std + eps`` with ``mean_std_norm``.
    A singleton group or cluster contributes 0 to its term.
    """
    if episode_norm not in EPISODE_NORMS:
        raise ValueError(f"unknown episode_norm {episode_norm!r}; choose one of {', '.join(EPISODE_NORMS)}")
    _check(eps, ddof)
    score_values = _as_values("scores", scores)
    return_values = _as_values("returns", returns)
    num_samples = score_values.shape[0]
    if return_values.shape[0] != num_samples:
        raise ValueError(f"scores and returns must have the same length, got {num_samples} and "
                         f"{return_values.shape[0]}")
    group_ids = _key_ids("group_keys", group_keys, num_samples)
    if len(anchor_keys) != num_samples:
        raise ValueError(f"anchor_keys must have one key per sample: got {len(anchor_keys)} keys for "
                         f"{num_samples} samples")
    cluster_ids = _key_ids("anchor_keys", [(int(g), a) for g, a in zip(group_ids, anchor_keys)], num_samples)
    scale = EPISODE_NORMS[episode_norm]
    episode_term = _centre(score_values, group_ids, scale, eps, ddof)
    step_term = _centre(return_values, cluster_ids, scale, eps, ddof)
    return GiGPOAdvantages(episode_term + step_weight * step_term, episode_term, step_term)
