"""PPO losses: clipped surrogate, KL to the reference policy, entropy.

Pure tensor functions (docs/method.md section 6: PPO clip 0.2, token-mean loss
aggregation, entropy coefficient 0.001, KL loss with the ``low_var_kl``
estimator). The formulas follow verl's ``verl/trainer/ppo/core_algos.py``
(``compute_policy_loss_vanilla`` without its dual-clip branch, ``kl_penalty``,
``entropy_from_logits``) so that numbers are comparable with the reference code.

Shapes: ``[...]`` means any shape shared by all token-level arguments, e.g.
``[batch, response_len]`` or a flat ``[num_tokens]``. Masks are 0/1 (or bool)
tensors of the same shape; a token with mask 0 contributes nothing.
"""

from __future__ import annotations

import torch

# log-ratio clamp before exp(), as verl does, so that one wild token cannot
# overflow the ratio to inf (exp(20) ~ 5e8 is far beyond any clip range).
LOG_RATIO_LIMIT = 20.0
# low_var_kl (k3) is clamped to [-10, 10] in verl.
LOW_VAR_KL_LIMIT = 10.0


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token-mean: the mean of ``values`` over the positions where ``mask`` is 1.

    values [...], mask [...] -> scalar. All valid tokens of the batch weigh the
    same (token-mean aggregation, docs/method.md section 6), so a long response
    counts more than a short one.
    """
    if values.shape != mask.shape:
        raise ValueError(f"masked_mean: values shape {tuple(values.shape)} != mask shape {tuple(mask.shape)}")
    mask = mask.to(values.dtype)
    count = mask.sum()
    if count.item() <= 0:
        raise ValueError("masked_mean: mask selects no token (an empty mini-batch has no mean)")
    return (values * mask).sum() / count


def ppo_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_ratio: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO clipped surrogate (docs/method.md section 6), token-mean over ``mask``.

    logp, old_logp, advantages, mask: [...] (advantages already broadcast to
    tokens). Per token, with r = exp(logp - old_logp):
    ``loss_t = max(-A r, -A clip(r, 1 - clip_ratio, 1 + clip_ratio))``.

    Returns (loss, clip_fraction, approx_kl), all scalars:
    - loss: token-mean of loss_t (differentiable through ``logp``);
    - clip_fraction: share of tokens where the clipped term is the larger one
      (its gradient is zero there), as verl's ``pg_clipfrac``;
    - approx_kl: token-mean of old_logp - logp (k1 estimate of KL(old || new),
      verl's ``ppo_kl``), detached.
    """
    if not clip_ratio > 0:
        raise ValueError(f"clip_ratio must be > 0, got {clip_ratio}")
    for name, t in (("old_logp", old_logp), ("advantages", advantages), ("mask", mask)):
        if t.shape != logp.shape:
            raise ValueError(f"ppo_clip_loss: {name} shape {tuple(t.shape)} != logp shape {tuple(logp.shape)}")
    log_ratio = torch.clamp(logp - old_logp, -LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)  # [...]
    ratio = torch.exp(log_ratio)  # [...]
    unclipped = -advantages * ratio  # [...]
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_ratio, 1.0 + clip_ratio)  # [...]
    loss = masked_mean(torch.maximum(unclipped, clipped), mask)
    with torch.no_grad():
        clip_fraction = masked_mean(torch.gt(clipped, unclipped).to(logp.dtype), mask)
        approx_kl = masked_mean(-log_ratio, mask)
    return loss, clip_fraction, approx_kl


def _kl_k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    return logp - ref_logp


def _kl_abs(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    return (logp - ref_logp).abs()


def _kl_mse(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    return 0.5 * (logp - ref_logp).square()


def _kl_low_var(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    # k3 (Schulman 2020): with x = log(ref/pi), kl = e^x - x - 1 >= 0, unbiased for
    # KL(pi || ref) when tokens are sampled from pi, and of low variance.
    kl = torch.clamp(ref_logp - logp, -LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    return torch.clamp(torch.exp(kl) - kl - 1.0, -LOW_VAR_KL_LIMIT, LOW_VAR_KL_LIMIT)


KL_ESTIMATORS = {
    "kl": _kl_k1,
    "k1": _kl_k1,
    "abs": _kl_abs,
    "mse": _kl_mse,
    "k2": _kl_mse,
    "low_var_kl": _kl_low_var,
    "k3": _kl_low_var,
}


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token estimate of KL(policy || reference) from sampled tokens' log-probs.

    logp, ref_logp: [...] -> [...] (aggregate with ``masked_mean``). Estimators
    (verl's ``kl_penalty``): "kl"/"k1" logp - ref; "abs" |logp - ref|;
    "mse"/"k2" 0.5 (logp - ref)^2; "low_var_kl"/"k3" e^x - x - 1 with
    x = ref - logp clamped to [-20, 20], result clamped to [-10, 10].
    """
    try:
        fn = KL_ESTIMATORS[estimator]
    except KeyError:
        raise ValueError(f"unknown KL estimator {estimator!r}; valid: {sorted(KL_ESTIMATORS)}") from None
    if logp.shape != ref_logp.shape:
        raise ValueError(f"kl_penalty: ref_logp shape {tuple(ref_logp.shape)} != logp shape {tuple(logp.shape)}")
    return fn(logp, ref_logp)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax(logits) along the last axis: logits [..., V] -> [...].

    H = logsumexp(z) - sum_v softmax(z)_v z_v, which never takes the log of a
    probability (stable for very negative logits; -inf logits, i.e. masked
    entries, contribute 0).
    """
    probs = torch.softmax(logits, dim=-1)  # [..., V]
    weighted = torch.where(probs > 0, probs * logits, torch.zeros_like(logits)).sum(dim=-1)  # [...]
    return torch.logsumexp(logits, dim=-1) - weighted
