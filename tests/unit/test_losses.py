"""PPO losses against hand-computed numbers (docs/method.md section 6)."""

from __future__ import annotations

import math

import pytest
import torch

from mage_core.algos.losses import KL_ESTIMATORS, entropy_from_logits, kl_penalty, masked_mean, ppo_clip_loss

pytestmark = pytest.mark.unit


def test_masked_mean_counts_only_valid_tokens() -> None:
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = torch.tensor([[1, 1, 0], [0, 0, 1]])
    assert masked_mean(values, mask).item() == pytest.approx((1 + 2 + 6) / 3)
    assert masked_mean(values, mask.bool()).item() == pytest.approx(3.0)


def test_masked_mean_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="shape"):
        masked_mean(torch.zeros(3), torch.ones(2))
    with pytest.raises(ValueError, match="no token"):
        masked_mean(torch.zeros(3), torch.zeros(3))


def _clip_case() -> tuple[torch.Tensor, ...]:
    # ratio 1.3 / 1.3 / 0.7 / 0.7 with A = +1, -1, +2, -2; the fifth token is masked.
    ratios = torch.tensor([1.3, 1.3, 0.7, 0.7, 50.0])
    old = torch.tensor([-1.0, -2.0, -0.5, -3.0, -1.0])
    logp = (old + ratios.log()).requires_grad_(True)
    adv = torch.tensor([1.0, -1.0, 2.0, -2.0, 5.0])
    mask = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0])
    return logp, old, adv, mask


def test_ppo_clip_loss_hand_computed() -> None:
    logp, old, adv, mask = _clip_case()
    loss, clip_fraction, approx_kl = ppo_clip_loss(logp, old, adv, mask, clip_ratio=0.2)
    # token 0: r=1.3, A>0 -> clipped at 1.2: -1.2
    # token 1: r=1.3, A<0 -> unclipped (the pessimistic term): +1.3
    # token 2: r=0.7, A>0 -> unclipped: -1.4
    # token 3: r=0.7, A<0 -> clipped at 0.8: +1.6
    assert loss.item() == pytest.approx((-1.2 + 1.3 - 1.4 + 1.6) / 4, abs=1e-6)
    assert clip_fraction.item() == pytest.approx(0.5)
    assert approx_kl.item() == pytest.approx(-(2 * math.log(1.3) + 2 * math.log(0.7)) / 4, abs=1e-6)
    loss.backward()
    # d/dlogp of -A r is -A r on unclipped tokens, 0 on clipped and masked ones; /4 tokens.
    expected = torch.tensor([0.0, 1.3 / 4, -1.4 / 4, 0.0, 0.0])
    torch.testing.assert_close(logp.grad, expected, atol=1e-6, rtol=0)


def test_ppo_clip_loss_ratio_one_is_minus_mean_advantage() -> None:
    logp = torch.tensor([[-1.0, -2.0], [-0.3, -4.0]])
    adv = torch.tensor([[1.0, 1.0], [-3.0, 7.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    loss, clip_fraction, approx_kl = ppo_clip_loss(logp, logp.clone(), adv, mask, 0.2)
    assert loss.item() == pytest.approx(-(1 + 1 - 3) / 3)
    assert clip_fraction.item() == 0.0
    assert approx_kl.item() == 0.0


def test_ppo_clip_loss_validates() -> None:
    x = torch.zeros(3)
    with pytest.raises(ValueError, match="clip_ratio"):
        ppo_clip_loss(x, x, x, torch.ones(3), 0.0)
    with pytest.raises(ValueError, match="advantages shape"):
        ppo_clip_loss(x, x, torch.zeros(2), torch.ones(3), 0.2)


def test_kl_estimators_hand_computed() -> None:
    logp = torch.tensor([math.log(0.5)])
    ref = torch.tensor([math.log(0.25)])
    d = math.log(2.0)  # logp - ref
    assert kl_penalty(logp, ref, "kl").item() == pytest.approx(d)
    assert kl_penalty(logp, ref, "abs").item() == pytest.approx(d)
    assert kl_penalty(ref, logp, "abs").item() == pytest.approx(d)
    assert kl_penalty(logp, ref, "mse").item() == pytest.approx(0.5 * d * d)
    # k3: x = ref - logp = -ln 2; e^x - x - 1 = 0.5 + ln 2 - 1
    assert kl_penalty(logp, ref, "low_var_kl").item() == pytest.approx(0.5 + d - 1, abs=1e-7)


def test_low_var_kl_zero_for_equal_and_clamped() -> None:
    logp = torch.tensor([-0.1, -2.0, -7.0])
    torch.testing.assert_close(kl_penalty(logp, logp.clone(), "low_var_kl"), torch.zeros(3))
    # ref far below: x clamped to -20 -> e^-20 + 19 > 10 -> 10; ref far above: e^15 - 16 -> 10
    out = kl_penalty(torch.tensor([0.0, -15.0]), torch.tensor([-30.0, 0.0]), "low_var_kl")
    torch.testing.assert_close(out, torch.tensor([10.0, 10.0]))


def test_k1_and_k3_are_unbiased_for_kl_by_enumeration() -> None:
    # E_{x~p}[k(x)] = KL(p || q) exactly, for k1 and k3 (sum over all outcomes).
    gen = torch.Generator().manual_seed(3)
    p = torch.softmax(torch.randn(6, generator=gen, dtype=torch.float64), 0)
    q = torch.softmax(torch.randn(6, generator=gen, dtype=torch.float64), 0)
    kl = (p * (p.log() - q.log())).sum().item()
    for estimator in ("kl", "low_var_kl"):
        assert (p * kl_penalty(p.log(), q.log(), estimator)).sum().item() == pytest.approx(kl, rel=1e-9)


def test_kl_unknown_estimator_lists_valid() -> None:
    with pytest.raises(ValueError, match="low_var_kl"):
        kl_penalty(torch.zeros(1), torch.zeros(1), "k9")
    assert {"kl", "abs", "mse", "low_var_kl"} <= set(KL_ESTIMATORS)


def test_entropy_from_logits() -> None:
    assert entropy_from_logits(torch.zeros(7)).item() == pytest.approx(math.log(7))
    # p = (1/4, 3/4), shifted by a huge constant (stability; float64 so that the
    # shifted logits still hold ln 3 exactly enough)
    expected = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    for shift in (0.0, 1e6, -1e6):
        logits = torch.tensor([[0.0, math.log(3.0)]], dtype=torch.float64) + shift
        assert entropy_from_logits(logits).item() == pytest.approx(expected, abs=1e-9)
    # a masked (-inf) entry contributes nothing
    assert entropy_from_logits(torch.tensor([0.0, 0.0, -math.inf])).item() == pytest.approx(math.log(2))
    # per position: [2, 3, V] -> [2, 3]
    assert entropy_from_logits(torch.zeros(2, 3, 5)).shape == (2, 3)
