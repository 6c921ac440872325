"""The chunked log-probability path (``backend.logits_chunk_tokens``) against the dense one.

The dense path computes the queried logits of a micro-batch at once ([Q, V]);
the chunked path N queries at a time inside a checkpointed region. The two
must give the same log-probabilities, entropies and gradients (float32
rounding apart), for every kind of sample, every chunk size (one query, a size
that does not divide Q, more than Q), with and without prefix packing; and an
engine built with chunks must take the same PPO step as a dense one.
"""

from __future__ import annotations

import copy

import pytest
import torch

from mage_core.backends.base import LossSettings
from mage_core.backends.torch_engine import TorchEngine, evaluate_flat
from tests.unit.test_torch_engine import mixed_samples, tiny_model

pytestmark = pytest.mark.unit
torch.set_num_threads(1)


def objective(logp: torch.Tensor, entropy: torch.Tensor) -> torch.Tensor:
    """A loss that weighs every entry differently, so a misplaced entry changes the gradient."""
    weights = torch.linspace(-1.0, 2.0, logp.numel())
    return (weights * logp).sum() + 0.3 * (weights.flip(0) * entropy).sum()


def grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.equivalence
@pytest.mark.parametrize("chunk", [1, 5, 7, 10**6])
@pytest.mark.parametrize("pack", [True, False])
def test_chunked_values_and_gradients_equal_the_dense_ones(chunk: int, pack: bool) -> None:
    samples = mixed_samples(n=15, seed=3)
    dense_model = tiny_model()
    chunk_model = copy.deepcopy(dense_model)

    logp_d, ent_d = evaluate_flat(dense_model, samples, with_entropy=True, pack_prefixes=pack)
    logp_c, ent_c = evaluate_flat(chunk_model, samples, with_entropy=True, pack_prefixes=pack, logits_chunk=chunk)
    assert ent_d is not None and ent_c is not None
    assert logp_c.shape == logp_d.shape and ent_c.shape == ent_d.shape
    torch.testing.assert_close(logp_c, logp_d, rtol=0, atol=1e-5)
    torch.testing.assert_close(ent_c, ent_d, rtol=0, atol=1e-5)

    objective(logp_d, ent_d).backward()
    objective(logp_c, ent_c).backward()
    g_dense, g_chunk = grads(dense_model), grads(chunk_model)
    assert g_dense.keys() == g_chunk.keys() and g_dense
    for name in g_dense:
        torch.testing.assert_close(g_chunk[name], g_dense[name], rtol=1e-4, atol=1e-6, msg=name)


def test_chunked_scores_without_gradients_or_entropy() -> None:
    samples = mixed_samples(n=9, seed=4)
    model = tiny_model()
    with torch.no_grad():
        dense, _ = evaluate_flat(model, samples, with_entropy=False)
        chunked, entropy = evaluate_flat(model, samples, with_entropy=False, logits_chunk=2)
    assert entropy is None
    torch.testing.assert_close(chunked, dense, rtol=0, atol=1e-5)


def test_the_output_layer_is_restored_after_a_chunked_pass() -> None:
    model = tiny_model()
    head = model.get_output_embeddings()
    evaluate_flat(model, mixed_samples(n=4), logits_chunk=3)
    assert "forward" not in vars(head)
    ids = torch.tensor([[1, 2, 3]])
    assert model(input_ids=ids).logits.shape == (1, 3, model.config.vocab_size)


def test_an_engine_with_chunks_takes_the_dense_engines_step() -> None:
    samples = mixed_samples(n=12, seed=5)
    dense = TorchEngine(tiny_model(), 1e-2, max_tokens_per_micro_batch=64)
    chunked = TorchEngine(tiny_model(), 1e-2, max_tokens_per_micro_batch=64, logits_chunk_tokens=4)
    old = dense.logprobs(samples)
    torch.testing.assert_close(torch.cat(chunked.logprobs(samples)), torch.cat(old), rtol=0, atol=1e-5)
    loss = LossSettings(clip_ratio=0.2, entropy_coef=0.01)
    m_dense = dense.step(samples, old, None, loss)
    m_chunk = chunked.step(samples, old, None, loss)
    for key in ("loss", "pg_loss", "entropy", "grad_norm"):
        assert m_chunk[key] == pytest.approx(m_dense[key], rel=1e-4, abs=1e-6), key
    for (name, a), (_, b) in zip(dense.model.named_parameters(), chunked.model.named_parameters()):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("bad", [-1, 1.5, "4"])
def test_a_bad_chunk_size_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="logits_chunk_tokens"):
        TorchEngine(tiny_model(), 1e-3, logits_chunk_tokens=bad)  # type: ignore[arg-type]


def test_a_soft_capping_model_is_refused() -> None:
    model = tiny_model()
    model.config.final_logit_softcapping = 30.0
    with pytest.raises(ValueError, match="soft-caps"):
        evaluate_flat(model, mixed_samples(n=3), logits_chunk=2)
