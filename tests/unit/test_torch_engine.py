"""The plain-torch TrainEngine on a tiny Qwen3 (docs/method.md section 6).

Log-probabilities are checked against a straightforward per-sample forward
pass, the PPO step against a straightforward reference implementation of the
whole update, and the state round trip bit for bit.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from mage_core.backends.base import LossSettings, Sample, TrainEngine
from mage_core.backends.torch_engine import TorchEngine, _plan, micro_batches, prefix_groups

pytestmark = pytest.mark.unit
torch.set_num_threads(1)

VOCAB = 50


def tiny_model(seed: int = 0) -> Qwen3ForCausalLM:
    torch.manual_seed(seed)  # HF initializes from the global generator (test code only)
    cfg = Qwen3Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=128)
    return Qwen3ForCausalLM(cfg)


def mixed_samples(n: int = 12, seed: int = 1) -> list[Sample]:
    """Free samples, single-token and multi-token constrained samples, prompts of 2..19 tokens."""
    g = torch.Generator().manual_seed(seed)

    def ints(k: int) -> list[int]:
        return torch.randint(1, VOCAB, (k,), generator=g).tolist()

    out = []
    for i in range(n):
        prompt = ints(int(torch.randint(2, 20, (1,), generator=g)))
        adv = float(torch.randn(1, generator=g))
        if i % 3 == 0:
            out.append(Sample(prompt=prompt, advantage=adv, response=ints(int(torch.randint(1, 6, (1,), generator=g)))))
        elif i % 3 == 1:
            out.append(Sample(prompt=prompt, advantage=adv, candidates=[[t] for t in ints(2 + i % 2)], choice=i % 2))
        else:
            out.append(Sample(prompt=prompt, advantage=adv, candidates=[ints(2), ints(1), ints(3)], choice=2))
    return out


# -- straightforward references: one sample, one full forward ---------------------------------------

@torch.no_grad()
def reference_logprobs(model: torch.nn.Module, s: Sample) -> tuple[torch.Tensor, torch.Tensor]:
    def token_logps(prompt: list[int], cont: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        logits = model(torch.tensor([prompt + cont])).logits[0].double()
        logp = torch.log_softmax(logits, -1)
        rows = [len(prompt) - 1 + t for t in range(len(cont))]
        picked = torch.stack([logp[r, tok] for r, tok in zip(rows, cont)])
        ent = torch.stack([-(logp[r].exp() * logp[r]).sum() for r in rows])
        return picked, ent

    if s.response is not None:
        return token_logps(s.prompt, s.response)
    assert s.candidates is not None and s.choice is not None
    scores = torch.stack([token_logps(s.prompt, c)[0].sum() for c in s.candidates])
    logp = torch.log_softmax(scores, 0)
    return logp[s.choice: s.choice + 1], -(logp.exp() * logp).sum().reshape(1)


@pytest.mark.equivalence
@pytest.mark.parametrize("budget", [1, 64, 10**6])
def test_logprobs_match_per_sample_forward(budget: int) -> None:
    model = tiny_model()
    engine = TorchEngine(model, 1e-3, max_tokens_per_micro_batch=budget)
    samples = mixed_samples()
    logps, entropies = engine.score_samples(samples)
    assert entropies is not None
    for s, lp, ent in zip(samples, logps, entropies):
        want_lp, want_ent = reference_logprobs(model, s)
        assert lp.shape == (len(s.response) if s.response is not None else 1,)
        assert (lp.double() - want_lp).abs().max().item() < 1e-5
        assert (ent.double() - want_ent).abs().max().item() < 1e-5
    # logprobs() is the same numbers
    for a, b in zip(engine.logprobs(samples), logps):
        assert torch.equal(a, b)


def chain_samples(seed: int = 3) -> list[Sample]:
    """Meta-episode-like batch: chains of single-token constrained samples whose
    prompts grow append-only (each a prefix of the next), mixed with samples that
    must keep their own rows: a free one and a multi-token constrained one on a
    chain's prompt, an unrelated single-token one breaking a chain in the given
    order, and a chain forking (two extensions of one prompt, neither a prefix of
    the other)."""
    g = torch.Generator().manual_seed(seed)

    def ints(k: int) -> list[int]:
        return torch.randint(1, VOCAB, (k,), generator=g).tolist()

    def choice(prompt: list[int], n: int = 2) -> Sample:
        return Sample(prompt=list(prompt), advantage=float(torch.randn(1, generator=g)),
                      candidates=[[t] for t in ints(n)], choice=n - 1)

    out = []
    for m in range(5):
        prompt = [1, 2, 3, 10 + m % 3]  # meta-episodes 0 and 3 start alike: their first prompts are equal
        for d in range(3 + m % 3):
            out.append(choice(prompt, 2 + d % 2))
            if m == 1 and d == 1:  # breaks the chain in the given order
                out.append(choice(ints(6)))
            if m == 2 and d == 0:  # own rows whatever their prompts
                out.append(Sample(prompt=list(prompt), advantage=0.5, response=ints(3)))
                out.append(Sample(prompt=list(prompt), advantage=-0.5, candidates=[ints(2), ints(1)], choice=0))
            prompt = prompt + ints(int(torch.randint(2, 5, (1,), generator=g)))
        if m == 4:  # a fork: a sibling of the last prompt
            out.append(choice(out[-1].prompt[:-1] + [out[-1].prompt[-1] % (VOCAB - 1) + 1]))
    return out


def test_prefix_groups_cover_all_with_the_fewest_rows() -> None:
    prompts = [[1, 2], [5], [1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 9], [1, 2], [1], [5, 6, 7], [2]]
    for order in ([*range(9)], [8, 3, 0, 6, 2, 7, 4, 1, 5]):
        groups = prefix_groups([prompts[i] for i in order])
        groups = [[order[k] for k in group] for group in groups]
        assert sorted(i for group in groups for i in group) == list(range(9))
        for group in groups:
            row = prompts[group[-1]]
            assert all(row[: len(prompts[i])] == prompts[i] for i in group)
        # one row per prompt that no other prompt extends: [1,2,3,4], [1,2,3,9], [5,6,7], [2]
        assert sorted(tuple(prompts[group[-1]]) for group in groups) == [(1, 2, 3, 4), (1, 2, 3, 9), (2,), (5, 6, 7)]
    assert prefix_groups([]) == []


def packed_rows(samples: list[Sample], pack: bool) -> int:
    return len(_plan(samples, pack).rows)


@pytest.mark.equivalence
@pytest.mark.parametrize("budget", [1, 40, 10**6])
def test_prefix_packing_matches_per_sample_forward(budget: int) -> None:
    model = tiny_model()
    samples = chain_samples()
    packed = TorchEngine(model, 1e-3, max_tokens_per_micro_batch=budget)
    plain = TorchEngine(model, 1e-3, max_tokens_per_micro_batch=budget, pack_prefixes=False)
    if budget == 10**6:  # packing does happen: 5 meta-episodes (the multi-token sample's candidates as tails of
        # its meta-episode's row), 1 fork, 1 stray, the free sample's own row
        assert packed_rows(samples, True) == 5 + 1 + 1 + 1 < packed_rows(samples, False) == len(samples) + 1
    logps, entropies = packed.score_samples(samples)
    plain_logps, plain_entropies = plain.score_samples(samples)
    assert entropies is not None and plain_entropies is not None
    for s, lp, ent, lp0, ent0 in zip(samples, logps, entropies, plain_logps, plain_entropies):
        want_lp, want_ent = reference_logprobs(model, s)
        assert lp.shape == want_lp.shape
        assert (lp.double() - want_lp).abs().max().item() < 1e-5
        assert (ent.double() - want_ent).abs().max().item() < 1e-5
        assert (lp - lp0).abs().max().item() < 1e-5 and (ent - ent0).abs().max().item() < 1e-5
    # the grouping does not depend on the order of the samples (a shuffled mini-batch packs too)
    perm = torch.randperm(len(samples), generator=torch.Generator().manual_seed(0)).tolist()
    shuffled = packed.logprobs([samples[i] for i in perm])
    for k, i in enumerate(perm):
        assert (shuffled[k] - logps[i]).abs().max().item() < 1e-5


def test_micro_batches_keep_prefix_groups_whole_and_count_them_once() -> None:
    samples = chain_samples() + mixed_samples(9)
    for budget in (1, 30, 100, 10**6):
        batches = micro_batches(samples, budget)
        assert sorted(i for b in batches for i in b) == list(range(len(samples)))
        for b in batches:
            part = [samples[i] for i in b]
            rows = _plan(part).rows
            # no group is split: re-grouping inside the micro-batch finds no more rows than it was
            # counted for; a unit over the budget (one sample or one packed row) goes alone
            assert len(rows) == 1 or len(b) == 1 or len(rows) * max(len(r) for r in rows) <= budget
    assert len(micro_batches(samples, 10**6)) == 1
    unpacked = micro_batches(samples, 1, pack_prefixes=False)
    assert len(unpacked) == len(samples) > len(micro_batches(samples, 1))


@pytest.mark.equivalence
def test_packed_step_matches_the_unpacked_step() -> None:
    base = tiny_model()
    packed = TorchEngine(copy.deepcopy(base), 1e-3, max_grad_norm=0.5, max_tokens_per_micro_batch=60,
                         reference_model="copy")
    plain = TorchEngine(copy.deepcopy(base), 1e-3, max_grad_norm=0.5, max_tokens_per_micro_batch=60,
                        reference_model="copy", pack_prefixes=False)
    samples = chain_samples()
    loss = LossSettings(clip_ratio=0.2, entropy_coef=0.01, kl_coef=0.1)
    ref = plain.logprobs(samples, policy="reference")
    old = [lp + 0.3 * torch.randn(lp.shape, generator=torch.Generator().manual_seed(i))
           for i, lp in enumerate(plain.logprobs(samples))]
    shuffled = torch.randperm(len(samples), generator=torch.Generator().manual_seed(1)).tolist()
    for order in (list(range(len(samples))), shuffled):
        part, part_old, part_ref = [samples[i] for i in order], [old[i] for i in order], [ref[i] for i in order]
        m_packed = packed.step(part, part_old, part_ref, loss)
        m_plain = plain.step(part, part_old, part_ref, loss)
        assert 0 < m_plain["clip_frac"] < 1
        for key in m_plain:
            assert m_packed[key] == pytest.approx(m_plain[key], abs=1e-6, rel=1e-5), key
        for (name, a), b in zip(packed.model.named_parameters(), plain.model.parameters()):
            torch.testing.assert_close(a, b, atol=2e-6, rtol=0, msg=name)
    # and the plain path itself is the plain reference update (one step, fresh copies)
    model, by_hand = copy.deepcopy(base), copy.deepcopy(base)
    TorchEngine(model, 1e-3, max_grad_norm=0.5).step(samples, old, ref, loss)
    reference_update(by_hand, samples, old, ref, loss, lr=1e-3, max_grad_norm=0.5)
    for (name, a), b in zip(model.named_parameters(), by_hand.parameters()):
        torch.testing.assert_close(a, b, atol=2e-6, rtol=0, msg=name)


def command_chains(seed: int = 5) -> list[Sample]:
    """Meta-episodes whose every decision picks among commands read word by word:
    candidates of 1 to 4 tokens, some sharing their first words (``go to cabinet 1``,
    ``go to cabinet 2``), prompts growing append-only; one meta-episode forks."""
    g = torch.Generator().manual_seed(seed)

    def ints(k: int) -> list[int]:
        return torch.randint(1, VOCAB, (k,), generator=g).tolist()

    out = []
    for m in range(3):
        prompt = [1, 2, 3 + m]
        for d in range(4):
            stem = ints(2)
            cands = [stem + ints(1), stem + ints(2), ints(1), ints(int(torch.randint(1, 5, (1,), generator=g)))]
            out.append(Sample(prompt=list(prompt), advantage=float(torch.randn(1, generator=g)), candidates=cands,
                              choice=d % len(cands)))
            prompt = prompt + ints(int(torch.randint(2, 6, (1,), generator=g)))
    out.append(Sample(prompt=out[-1].prompt[:-1] + [(out[-1].prompt[-1] % (VOCAB - 1)) + 1], advantage=0.3,
                      candidates=[ints(3), ints(2)], choice=1))
    return out


@pytest.mark.equivalence
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_candidate_tails_pack_a_meta_episode_in_one_row(attention: str) -> None:
    model = tiny_model()
    model.config._attn_implementation = attention
    samples = command_chains()
    plan = _plan(samples)
    # one row per meta-episode plus the fork; each tail is every candidate but its last token
    assert len(plan.rows) == 3 + 1
    assert sum(n for tails in plan.tails for _, n, _ in tails) == sum(len(c) - 1 for s in samples
                                                                      for c in s.candidates or [])
    assert len(_plan(samples, pack_prefixes=False).rows) == sum(len(s.candidates or []) for s in samples)
    engine = TorchEngine(model, 1e-3)
    logps, entropies = engine.score_samples(samples)
    assert entropies is not None
    for s, lp, ent in zip(samples, logps, entropies):
        want_lp, want_ent = reference_logprobs(model, s)
        assert (lp.double() - want_lp).abs().max().item() < 1e-5
        assert (ent.double() - want_ent).abs().max().item() < 1e-5
    # order-free, and under any token budget
    perm = torch.randperm(len(samples), generator=torch.Generator().manual_seed(2)).tolist()
    for k, lp in zip(perm, TorchEngine(model, 1e-3, max_tokens_per_micro_batch=30).logprobs(
            [samples[i] for i in perm])):
        assert (lp - logps[k]).abs().max().item() < 1e-5


@pytest.mark.equivalence
def test_candidate_tails_step_matches_the_unpacked_step() -> None:
    from mage_core.backends.logprobs import evaluate_flat

    base = tiny_model()
    samples = command_chains()
    # the gradients of a loss over log-probs and entropies, packed and unpacked (compared before
    # any optimizer, whose normalisation would blow float noise on a near-zero gradient up to lr)
    grads = []
    for pack in (True, False):
        model = copy.deepcopy(base)
        logp, entropy = evaluate_flat(model, samples, with_entropy=True, pack_prefixes=pack)
        assert entropy is not None
        (logp * torch.linspace(-1, 1, len(logp))).sum().add(0.1 * entropy.sum()).backward()
        grads.append({name: p.grad for name, p in model.named_parameters()})
    for name, g in grads[0].items():
        torch.testing.assert_close(g, grads[1][name], atol=1e-6, rtol=1e-4, msg=name)
    # and the engine's step reads the same numbers either way
    packed = TorchEngine(copy.deepcopy(base), 1e-3, max_grad_norm=0.5, reference_model="copy")
    plain = TorchEngine(copy.deepcopy(base), 1e-3, max_grad_norm=0.5, reference_model="copy", pack_prefixes=False)
    loss = LossSettings(clip_ratio=0.2, entropy_coef=0.01, kl_coef=0.1)
    ref = plain.logprobs(samples, policy="reference")
    old = [lp + 0.3 * torch.randn(lp.shape, generator=torch.Generator().manual_seed(i))
           for i, lp in enumerate(plain.logprobs(samples))]
    m_packed, m_plain = packed.step(samples, old, ref, loss), plain.step(samples, old, ref, loss)
    for key in m_plain:
        assert m_packed[key] == pytest.approx(m_plain[key], abs=1e-6, rel=1e-5), key


def test_candidate_tails_mask_and_positions_and_refusal() -> None:
    from types import SimpleNamespace

    from mage_core.backends.logprobs import tail_inputs
    rows = [[7, 8, 9, 4, 5, 6], [1, 2]]  # row 0: the prompt [7, 8, 9], then two tails
    tails = [[(3, 2, 2), (5, 1, 3)], []]  # [4, 5] extends the first 2 tokens, [6] the first 3
    got = tail_inputs(tiny_model(), rows, tails, 6, torch.device("cpu"))
    allowed = got["attention_mask"][:, 0]
    assert allowed.dtype == torch.bool  # sdpa
    assert allowed[0, 3].tolist() == [True, True, False, True, False, False]
    assert allowed[0, 4].tolist() == [True, True, False, True, True, False]
    assert allowed[0, 5].tolist() == [True, True, True, False, False, True]
    assert torch.equal(allowed[1], torch.ones(6, 6, dtype=torch.bool).tril())  # no tails: causal
    assert got["position_ids"].tolist() == [[0, 1, 2, 2, 3, 3], [0, 1, 2, 3, 4, 5]]
    assert tail_inputs(tiny_model(), rows, [[], []], 6, torch.device("cpu")) == {}  # the plain causal path
    flash = SimpleNamespace(config=SimpleNamespace(_attn_implementation="flash_attention_2"))
    with pytest.raises(ValueError, match="'flash_attention_2' attention.*pack_prefixes=False"):
        tail_inputs(flash, rows, tails, 6, torch.device("cpu"))


class _NoOutputEmbeddings(torch.nn.Module):
    """A causal LM that does not expose its output layer (the logits_to_keep fallback)."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, **kwargs):  # noqa: ANN003, ANN201
        return self.inner(**kwargs)


def test_models_without_output_embeddings_score_the_same() -> None:
    model = tiny_model()
    samples = chain_samples() + mixed_samples(6)
    want = TorchEngine(model, 1e-3).logprobs(samples)
    got = TorchEngine(_NoOutputEmbeddings(model), 1e-3).logprobs(samples)
    for a, b in zip(got, want):
        assert (a - b).abs().max().item() < 1e-5


def test_constrained_choice_logprob_is_log_softmax_over_candidates() -> None:
    """Hand check on the choice: two candidates with probabilities p0, p1 of the
    next token give log(p_choice / (p0 + p1))."""
    model = tiny_model()
    s = Sample(prompt=[3, 4, 5], advantage=0.0, candidates=[[7], [9]], choice=1)
    with torch.no_grad():
        p = torch.softmax(model(torch.tensor([[3, 4, 5]])).logits[0, -1].double(), -1)
    engine = TorchEngine(model, 1e-3)
    lp = engine.logprobs([s])[0]
    assert lp.item() == pytest.approx(math.log(p[9].item() / (p[7].item() + p[9].item())), abs=1e-6)


def test_micro_batches_respect_the_budget_and_cover_all() -> None:
    samples = mixed_samples(30)
    for budget in (1, 40, 200, 10**6):
        batches = micro_batches(samples, budget)
        assert sorted(i for b in batches for i in b) == list(range(30))
        for b in batches:
            rows = []
            for i in b:
                s = samples[i]
                if s.response is not None:
                    rows.append(len(s.prompt) + len(s.response) - 1)
                else:  # packed: one row, the prompt and every candidate but its last token
                    rows.append(len(s.prompt) + sum(len(c) - 1 for c in s.candidates or []))
            assert len(b) == 1 or len(rows) * max(rows) <= budget
    assert len(micro_batches(samples, 10**6)) == 1
    assert len(micro_batches(samples, 1)) == 30


def test_positive_advantage_raises_choice_probability() -> None:
    engine = TorchEngine(tiny_model(), 1e-2)
    s0 = Sample(prompt=[1, 2, 3], advantage=1.0, candidates=[[10], [11], [12]], choice=0)
    s1 = Sample(prompt=[5, 6], advantage=1.0, candidates=[[10, 4], [11], [12, 13, 14]], choice=0)
    before = [math.exp(t.item()) for t in engine.logprobs([s0, s1])]
    for _ in range(3):
        engine.step([s0, s1], engine.logprobs([s0, s1]), None, LossSettings(entropy_coef=0.0))
    after = [math.exp(t.item()) for t in engine.logprobs([s0, s1])]
    assert after[0] > before[0] + 0.01 and after[1] > before[1] + 0.01
    # and a negative advantage lowers it
    neg = Sample(prompt=[1, 2, 3], advantage=-1.0, candidates=[[10], [11], [12]], choice=0)
    engine.step([neg], engine.logprobs([neg]), None, LossSettings(entropy_coef=0.0))
    assert math.exp(engine.logprobs([neg])[0].item()) < after[0]


def test_first_step_has_ratio_one() -> None:
    engine = TorchEngine(tiny_model(), 1e-3, reference_model="copy")
    samples = mixed_samples(6)
    old = engine.logprobs(samples)
    ref = engine.logprobs(samples, policy="reference")
    _, entropies = engine.score_samples(samples)
    assert entropies is not None
    weights = [len(s.response) if s.response is not None else 1 for s in samples]
    total = sum(weights)
    metrics = engine.step(samples, old, ref, LossSettings(entropy_coef=0.01, kl_coef=0.1))
    assert metrics["clip_frac"] == 0.0
    assert metrics["approx_kl"] == pytest.approx(0.0, abs=1e-7)
    assert metrics["kl"] == pytest.approx(0.0, abs=1e-7)
    assert metrics["num_tokens"] == total
    # ratio 1: the surrogate is minus the token-mean advantage
    assert metrics["pg_loss"] == pytest.approx(-sum(w * s.advantage for w, s in zip(weights, samples)) / total,
                                               abs=1e-6)
    mean_entropy = sum(e.sum().item() for e in entropies) / total
    assert metrics["entropy"] == pytest.approx(mean_entropy, abs=1e-5)
    assert metrics["loss"] == pytest.approx(metrics["pg_loss"] - 0.01 * mean_entropy, abs=1e-5)
    assert metrics["grad_norm"] > 0 and metrics["skipped"] == 0.0
    assert engine.num_steps == 1


def reference_update(model: torch.nn.Module, samples: list[Sample], old: list[torch.Tensor],
                     ref: list[torch.Tensor], loss: LossSettings, lr: float, max_grad_norm: float) -> None:
    """The whole PPO step written out plainly: per-sample forwards, one token-mean loss."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    terms = []
    for s, o, r in zip(samples, old, ref):
        if s.response is not None:
            logits = model(torch.tensor([s.prompt + s.response])).logits[0]
            logp_all = torch.log_softmax(logits[len(s.prompt) - 1: -1], -1)
            logp = logp_all.gather(1, torch.tensor(s.response)[:, None])[:, 0]
            ent = -(logp_all.exp() * logp_all).sum(-1)
        else:
            assert s.candidates is not None
            scores = []
            for c in s.candidates:
                lg = torch.log_softmax(model(torch.tensor([s.prompt + c])).logits[0], -1)
                scores.append(sum(lg[len(s.prompt) - 1 + t, tok] for t, tok in enumerate(c)))
            choice_logp = torch.log_softmax(torch.stack(scores), 0)
            logp = choice_logp[s.choice: s.choice + 1]
            ent = -(choice_logp.exp() * choice_logp).sum().reshape(1)
        ratio = torch.exp(logp - o)
        surrogate = torch.maximum(-s.advantage * ratio, -s.advantage * ratio.clamp(1 - loss.clip_ratio,
                                                                                   1 + loss.clip_ratio))
        x = r - logp
        k3 = x.exp() - x - 1
        terms.append(surrogate - loss.entropy_coef * ent + loss.kl_coef * k3)
    total = torch.cat(terms).mean()  # token-mean over the mini-batch
    opt.zero_grad()
    total.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    opt.step()


@pytest.mark.equivalence
def test_step_matches_a_plain_reference_update() -> None:
    model = tiny_model()
    plain = copy.deepcopy(model)
    engine = TorchEngine(model, 1e-3, max_grad_norm=0.5, max_tokens_per_micro_batch=48, reference_model="copy")
    samples = mixed_samples(9)
    loss = LossSettings(clip_ratio=0.2, entropy_coef=0.01, kl_coef=0.1, kl_estimator="low_var_kl")
    ref = engine.logprobs(samples, policy="reference")
    # Old log-probs off the current policy so that some ratios are clipped.
    old = [lp + 0.3 * torch.randn(lp.shape, generator=torch.Generator().manual_seed(i))
           for i, lp in enumerate(engine.logprobs(samples))]
    metrics = engine.step(samples, old, ref, loss)
    assert 0 < metrics["clip_frac"] < 1
    reference_update(plain, samples, old, ref, loss, lr=1e-3, max_grad_norm=0.5)
    for (name, a), b in zip(model.named_parameters(), plain.parameters()):
        torch.testing.assert_close(a, b, atol=2e-6, rtol=0, msg=name)


def test_step_does_not_depend_on_micro_batch_size() -> None:
    base = tiny_model()
    engines = [TorchEngine(copy.deepcopy(base), 1e-3, max_tokens_per_micro_batch=b, reference_model="copy")
               for b in (10**6, 40, 1)]
    assert [len(micro_batches(mixed_samples(), e.max_tokens_per_micro_batch)) for e in engines][::2] == [1, 12]
    samples = mixed_samples()
    loss = LossSettings(entropy_coef=0.01, kl_coef=0.1)
    for _ in range(3):
        old = engines[0].logprobs(samples)
        ref = engines[0].logprobs(samples, policy="reference")
        metrics = [e.step(samples, old, ref, loss) for e in engines]
        for m in metrics[1:]:
            for key in metrics[0]:
                assert m[key] == pytest.approx(metrics[0][key], abs=1e-6, rel=1e-5), key
    for e in engines[1:]:
        for a, b in zip(engines[0].model.parameters(), e.model.parameters()):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_state_dict_round_trip_continues_identically() -> None:
    a = TorchEngine(tiny_model(0), 1e-2, weight_decay=0.01, reference_model="copy")
    b = TorchEngine(tiny_model(7), 5e-3, weight_decay=0.01, reference_model="copy")
    batches = [mixed_samples(6, seed=k) for k in range(3)]
    loss = LossSettings(kl_coef=0.1)

    def go(engine: TorchEngine, batch: list[Sample]) -> dict[str, float]:
        return engine.step(batch, engine.logprobs(batch), engine.logprobs(batch, "reference"), loss)

    go(a, batches[0])
    a.set_learning_rate(1e-2)
    state = a.state_dict()
    b.load_state_dict(state)
    assert b.num_steps == 1
    for batch in batches[1:]:
        assert go(a, batch) == go(b, batch)
    for (name, pa), pb in zip(a.model.state_dict().items(), b.model.state_dict().values()):
        assert torch.equal(pa, pb), name
    for pa, pb in zip(a.reference.parameters(), b.reference.parameters()):  # type: ignore[union-attr]
        assert torch.equal(pa, pb)
    # the snapshot is a copy: later steps did not change it
    assert not torch.equal(state["policy"]["lm_head.weight"], a.model.lm_head.weight)


def test_engine_satisfies_the_protocol_and_reports_errors() -> None:
    engine = TorchEngine(tiny_model(), 1e-3)
    assert isinstance(engine, TrainEngine)
    s = Sample(prompt=[1, 2], advantage=1.0, response=[3, 4])
    with pytest.raises(ValueError, match="reference_model='copy'"):
        engine.logprobs([s], policy="reference")
    with pytest.raises(ValueError, match="policy must be one of"):
        engine.logprobs([s], policy="old")
    with pytest.raises(ValueError, match="ref_logprobs is None"):
        engine.step([s], engine.logprobs([s]), None, LossSettings(kl_coef=0.1))
    with pytest.raises(ValueError, match=r"old_logprobs\[0\] has shape \(1,\), expected \(2,\)"):
        engine.step([s], [torch.zeros(1)], None, LossSettings())
    with pytest.raises(ValueError, match="empty"):
        engine.logprobs([])
    with pytest.raises(ValueError, match="prompt is empty"):
        engine.logprobs([Sample(prompt=[], advantage=0.0, response=[1])])
    with pytest.raises(ValueError, match="reference model"):
        engine.load_state_dict(TorchEngine(tiny_model(), 1e-3, reference_model="copy").state_dict())
    state = engine.state_dict()
    del state["reference"]  # no reference: the key may be left out
    engine.load_state_dict(state)
    del state["optimizer"]
    with pytest.raises(ValueError, match=r"lacks \['optimizer'\]"):
        engine.load_state_dict(state)
    with pytest.raises(ValueError, match="reference_model must be"):
        TorchEngine(tiny_model(), 1e-3, reference_model="frozen")


def test_non_finite_gradient_skips_the_update() -> None:
    engine = TorchEngine(tiny_model(), 1e-3)
    s = Sample(prompt=[1, 2], advantage=math.inf, candidates=[[3], [4]], choice=0)
    before = [p.clone() for p in engine.model.parameters()]
    metrics = engine.step([s], engine.logprobs([s]), None, LossSettings(entropy_coef=0.0))
    assert metrics["skipped"] == 1.0 and not math.isfinite(metrics["grad_norm"])
    assert engine.num_steps == 0 and engine.num_skipped_steps == 1
    assert all(torch.equal(a, b) for a, b in zip(before, engine.model.parameters()))


@pytest.mark.equivalence
def test_an_imitation_step_is_plain_behaviour_cloning() -> None:
    """objective imitation: minus the token-mean log-probability of the taken actions (free
    tokens, or the choice's log-softmax among the candidates), written out per sample."""
    model = tiny_model()
    plain = copy.deepcopy(model)
    engine = TorchEngine(model, 1e-3, max_grad_norm=0.5, max_tokens_per_micro_batch=48)
    samples = mixed_samples(9)
    before = sum(lp.sum().item() for lp in engine.logprobs(samples))
    # Old log-probs that would clip every ratio under PPO: imitation must not read them.
    old = [lp - 5.0 for lp in engine.logprobs(samples)]
    metrics = engine.step(samples, old, None, LossSettings(entropy_coef=0.0, objective="imitation"))
    weights = [len(s.response) if s.response is not None else 1 for s in samples]
    assert metrics["pg_loss"] == pytest.approx(-before / sum(weights), abs=1e-5)
    assert metrics["clip_frac"] == 0.0 and metrics["approx_kl"] == 0.0

    opt = torch.optim.AdamW(plain.parameters(), lr=1e-3, weight_decay=0.0)
    terms = []
    for s in samples:
        if s.response is not None:
            logits = plain(torch.tensor([s.prompt + s.response])).logits[0]
            logp_all = torch.log_softmax(logits[len(s.prompt) - 1: -1], -1)
            terms.append(logp_all.gather(1, torch.tensor(s.response)[:, None])[:, 0])
        else:
            assert s.candidates is not None and s.choice is not None
            scores = []
            for c in s.candidates:
                lg = torch.log_softmax(plain(torch.tensor([s.prompt + c])).logits[0], -1)
                scores.append(sum(lg[len(s.prompt) - 1 + t, tok] for t, tok in enumerate(c)))
            terms.append(torch.log_softmax(torch.stack(scores), 0)[s.choice: s.choice + 1])
    opt.zero_grad()
    (-torch.cat(terms).mean()).backward()
    torch.nn.utils.clip_grad_norm_(plain.parameters(), 0.5)
    opt.step()
    for (name, a), b in zip(model.named_parameters(), plain.parameters()):
        torch.testing.assert_close(a, b, atol=2e-6, rtol=0, msg=name)
    assert sum(lp.sum().item() for lp in engine.logprobs(samples)) > before  # the expert's actions got likelier


def test_an_unknown_objective_is_named() -> None:
    with pytest.raises(ValueError, match="LossSettings.objective: 'bc' is not one of ppo, imitation"):
        LossSettings(objective="bc")
