"""HFGenerator (generation.Generator on HF transformers) against straightforward references.

The references run one unpadded sequence at a time through a full forward pass
(no KV cache, no padding, no batching), so they share nothing with the batched,
left-padded, cached code paths under test.
"""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from mage_core.backends import generator_class
from mage_core.generation import Generator, SamplingParams
from mage_core.backends.hf import HFGenerator, _filtered_scores, _sample
from mage_core.policy.model import TinyModelSpec, build_tiny_qwen3
from tests.generatorcases import (
    BOS,
    EOS,
    PAD,
    PROMPTS,
    check_a_stop_token_on_the_last_step_counts_as_finished,
    check_stop_tokens_end_rows_and_the_rest_go_on,
    ref_greedy,
    ref_logprobs,
)
from tests.generatorcases import max_diff as _max_diff

pytestmark = [pytest.mark.equivalence, pytest.mark.usefixtures("one_thread")]

VOCAB = 48


def _model(seed: int, tied: bool = False):
    """A fresh tiny Qwen3. Untied with a 10x output layer by default: a random
    tied model's greedy chain just repeats its last input token and its
    distribution is nearly uniform, which would make greedy/stop tests vacuous."""
    model = build_tiny_qwen3(TinyModelSpec(tie_word_embeddings=tied), vocab_size=VOCAB, pad_token_id=PAD,
                             bos_token_id=BOS, eos_token_id=EOS, seed=seed)
    if not tied:
        with torch.no_grad():
            model.lm_head.weight.mul_(10.0)
    return model


@pytest.fixture(scope="module")
def model():
    return _model(0)


@pytest.fixture
def gen(model) -> HFGenerator:
    return HFGenerator(model, pad_token_id=PAD)


# -- score ---------------------------------------------------------------------


def test_it_is_a_generator_and_registered_by_name(gen) -> None:
    assert isinstance(gen, Generator)
    assert generator_class("hf") is HFGenerator
    with pytest.raises(ValueError, match="choose one of hf"):
        generator_class("nope")


def test_score_single_token_candidates_equal_full_forward(gen, model) -> None:
    cands = [[[4], [5], [47]], [[9], [10]], [[1]], [[3], [3]]]
    out = gen.score(PROMPTS, cands)
    assert [[len(c) for c in row] for row in out] == [[1, 1, 1], [1, 1], [1], [1, 1]]
    for prompt, row, got in zip(PROMPTS, cands, out):
        for cand, values in zip(row, got):
            assert _max_diff(values, ref_logprobs(model, prompt, cand)) < 1e-5


def test_score_multi_token_candidates_equal_full_forward(gen, model) -> None:
    cands = [[[4, 5, 6], [7]], [[9, 10], [11, 12, 13, 14, 15], [16]], [[17], [18]], [[19, 19, 19, 19]]]
    out = gen.score(PROMPTS, cands)
    for prompt, row, got in zip(PROMPTS, cands, out):
        assert [len(v) for v in got] == [len(c) for c in row]
        for cand, values in zip(row, got):
            assert _max_diff(values, ref_logprobs(model, prompt, cand)) < 1e-5


def test_score_in_chunks_and_alone_equals_one_batch(model) -> None:
    cands = [[[4, 5], [6]], [[7]], [[8, 9, 10]], [[11], [12, 13]]]
    whole = HFGenerator(model, PAD).score(PROMPTS, cands)
    chunked = HFGenerator(model, PAD, max_batch_size=3).score(PROMPTS, cands)
    alone = [HFGenerator(model, PAD).score([p], [c])[0] for p, c in zip(PROMPTS, cands)]
    for a, b, c in zip(whole, chunked, alone):
        for x, y, z in zip(a, b, c):
            assert _max_diff(x, y) < 1e-5 and _max_diff(x, z) < 1e-5


def test_score_edge_cases_and_errors(gen) -> None:
    assert gen.score([], []) == []
    assert gen.score([[BOS, 4]], [[]]) == [[]]
    with pytest.raises(ValueError, match=r"candidates\[0\]\[1\] is empty"):
        gen.score([[BOS]], [[[4], []]])
    with pytest.raises(ValueError, match="2 prompts but 1 candidate lists"):
        gen.score([[BOS], [BOS]], [[[4]]])
    with pytest.raises(ValueError, match=r"prompts\[1\] is empty"):
        gen.score([[BOS], []], [[[4]], [[4]]])
    with pytest.raises(ValueError, match=r"prompts\[0\] holds ids outside \[0, 48\)"):
        gen.score([[BOS, VOCAB]], [[[4]]])
    with pytest.raises(ValueError, match=r"candidates\[0\]\[0\]: 48 is not a token id"):
        gen.score([[BOS]], [[[VOCAB]]])


# -- generate ------------------------------------------------------------------


@pytest.mark.parametrize(
    "sampling",
    [SamplingParams(temperature=1.0, max_new_tokens=10),
     SamplingParams(temperature=0.7, top_p=0.8, top_k=20, max_new_tokens=10),
     SamplingParams(temperature=1.3, top_k=5, max_new_tokens=10)],
    ids=["t1", "eval", "topk5"],
)
def test_generate_returns_temperature_one_logprobs_of_its_tokens(gen, model, sampling) -> None:
    out = gen.generate(PROMPTS, sampling, torch.Generator().manual_seed(11))
    assert len(out) == len(PROMPTS)
    for prompt, g in zip(PROMPTS, out):
        assert len(g.token_ids) == len(g.logprobs) == 10 and not g.finished
        assert _max_diff(g.logprobs, ref_logprobs(model, prompt, g.token_ids)) < 1e-4


def test_same_seed_same_samples_other_seed_other_samples(gen) -> None:
    sampling = SamplingParams(max_new_tokens=12)
    a = gen.generate(PROMPTS, sampling, torch.Generator().manual_seed(5))
    b = gen.generate(PROMPTS, sampling, torch.Generator().manual_seed(5))
    c = gen.generate(PROMPTS, sampling, torch.Generator().manual_seed(6))
    assert [g.token_ids for g in a] == [g.token_ids for g in b]
    assert [g.logprobs for g in a] == [g.logprobs for g in b]
    assert [g.token_ids for g in a] != [g.token_ids for g in c]


# -- one generator per row ---------------------------------------------------------


def _row_generators(seeds: list[int]) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(s) for s in seeds]


def _stops(gen, sampling: SamplingParams) -> tuple[int, ...]:
    """Stop tokens that end the rows of PROMPTS at different lengths (so that
    rows finish while others go on: a finished row must stop drawing)."""
    free = gen.generate(PROMPTS, sampling, _row_generators([1, 2, 3, 4]))
    return tuple(sorted({g.token_ids[2] for g in free[:2]} | {g.token_ids[5] for g in free[2:]}))


@pytest.mark.parametrize(
    "sampling",
    [SamplingParams(temperature=1.0, max_new_tokens=10), SamplingParams(temperature=0.7, top_p=0.8, top_k=20,
                                                                         max_new_tokens=10)],
    ids=["t1", "eval"],
)
def test_a_rows_sample_with_its_own_generator_ignores_the_other_rows(gen, sampling) -> None:
    sampling = SamplingParams(**{**sampling.__dict__, "stop_token_ids": _stops(gen, sampling)})
    seeds = [11, 12, 13, 14]
    batch = gen.generate(PROMPTS, sampling, _row_generators(seeds))
    assert len({len(g.token_ids) for g in batch}) > 1, "rows should finish at different steps"
    assert any(g.finished for g in batch)
    order = [2, 0, 3, 1]
    reordered = gen.generate([PROMPTS[i] for i in order], sampling, _row_generators([seeds[i] for i in order]))
    chunked = HFGenerator(gen.model, PAD, max_batch_size=3).generate(PROMPTS, sampling, _row_generators(seeds))
    pair = gen.generate(PROMPTS[1:3], sampling, _row_generators(seeds[1:3]))
    for i, (prompt, seed, b) in enumerate(zip(PROMPTS, seeds, batch)):
        alone_generator = torch.Generator().manual_seed(seed)
        alone = gen.generate([prompt], sampling, [alone_generator])[0]
        others = [reordered[order.index(i)], chunked[i]] + ([pair[i - 1]] if i in (1, 2) else [])
        for other in [alone, *others]:
            assert other.token_ids == b.token_ids and other.finished == b.finished
            assert _max_diff(other.logprobs, b.logprobs) < 1e-5
        # ... and it draws the same amount: the row's generator ends in the same state.
        batch_generator = torch.Generator().manual_seed(seed)
        rows = list(PROMPTS)
        generators = _row_generators(seeds)
        generators[i] = batch_generator
        gen.generate(rows, sampling, generators)
        assert torch.equal(batch_generator.get_state(), alone_generator.get_state())


def test_per_row_generators_give_the_temperature_one_logprobs_and_greedy_needs_no_draws(gen, model) -> None:
    out = gen.generate(PROMPTS, SamplingParams(max_new_tokens=6), _row_generators([5, 6, 7, 8]))
    for prompt, g in zip(PROMPTS, out):
        assert _max_diff(g.logprobs, ref_logprobs(model, prompt, g.token_ids)) < 1e-4
    generators = _row_generators([5, 6, 7, 8])
    states = [g.get_state() for g in generators]
    greedy = gen.generate(PROMPTS, SamplingParams(temperature=0.0, max_new_tokens=6), generators)
    assert all(torch.equal(g.get_state(), s) for g, s in zip(generators, states))
    for prompt, g in zip(PROMPTS, greedy):
        assert g.token_ids == ref_greedy(model, prompt, 6)


def test_per_row_generator_errors(gen) -> None:
    sampling = SamplingParams(max_new_tokens=2)
    with pytest.raises(ValueError, match="2 prompts but 1 generators"):
        gen.generate([[BOS], [BOS]], sampling, [torch.Generator()])
    with pytest.raises(TypeError, match=r"generator\[1\] is a int"):
        gen.generate([[BOS], [BOS]], sampling, [torch.Generator(), 3])  # type: ignore[list-item]
    assert gen.generate([], sampling, []) == []


def test_generation_does_not_touch_the_global_rng(gen) -> None:
    torch.manual_seed(0)
    expected = torch.rand(2)
    torch.manual_seed(0)
    gen.generate(PROMPTS, SamplingParams(max_new_tokens=4), torch.Generator().manual_seed(1))
    assert torch.equal(torch.rand(2), expected)


def test_greedy_is_the_argmax_chain_and_top_k_one_is_greedy(gen, model) -> None:
    greedy = gen.generate(PROMPTS, SamplingParams(temperature=0.0, max_new_tokens=8), torch.Generator())
    top1 = gen.generate(PROMPTS, SamplingParams(temperature=1.0, top_k=1, max_new_tokens=8),
                        torch.Generator().manual_seed(3))
    for prompt, g, t in zip(PROMPTS, greedy, top1):
        assert g.token_ids == ref_greedy(model, prompt, 8)
        assert t.token_ids == g.token_ids
        assert _max_diff(g.logprobs, ref_logprobs(model, prompt, g.token_ids)) < 1e-4


def test_batch_result_equals_per_prompt_results(gen) -> None:
    sampling = SamplingParams(temperature=0.0, max_new_tokens=8)
    batch = gen.generate(PROMPTS, sampling, torch.Generator())
    chunked = HFGenerator(gen.model, PAD, max_batch_size=2).generate(PROMPTS, sampling, torch.Generator())
    for prompt, b, c in zip(PROMPTS, batch, chunked):
        alone = gen.generate([prompt], sampling, torch.Generator())[0]
        assert b.token_ids == alone.token_ids == c.token_ids
        assert _max_diff(b.logprobs, alone.logprobs) < 1e-5 and _max_diff(b.logprobs, c.logprobs) < 1e-5


def test_stop_tokens_end_rows_and_the_rest_go_on(gen) -> None:
    check_stop_tokens_end_rows_and_the_rest_go_on(gen)


def test_a_stop_token_on_the_last_step_counts_as_finished(gen) -> None:
    check_a_stop_token_on_the_last_step_counts_as_finished(gen)


def test_generate_errors(gen) -> None:
    sampling = SamplingParams(max_new_tokens=2)
    assert gen.generate([], sampling, torch.Generator()) == []
    with pytest.raises(TypeError, match="torch.Generator"):
        gen.generate([[BOS]], sampling, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stop_token_ids: 99"):
        gen.generate([[BOS]], SamplingParams(stop_token_ids=(99,)), torch.Generator())
    with pytest.raises(ValueError, match=r"prompts\[0\] is empty"):
        gen.generate([[]], sampling, torch.Generator())
    with pytest.raises(ValueError, match="pad_token_id"):
        HFGenerator(gen.model, pad_token_id=VOCAB)


# -- sampling filters ----------------------------------------------------------


@pytest.mark.parametrize(("temperature", "top_k", "top_p"),
                         [(1.0, 0, 1.0), (0.7, 20, 0.8), (1.0, 3, 1.0), (0.5, 0, 0.3), (2.0, 7, 0.95)])
def test_filters_match_hf_logits_warpers(temperature, top_k, top_p) -> None:
    logits = torch.randn(6, 40, generator=torch.Generator().manual_seed(0)) * 3
    logits[0, :5] = logits[0, 5]  # ties at the top-k boundary
    expected = TemperatureLogitsWarper(temperature)(None, logits.clone())
    if top_k:
        expected = TopKLogitsWarper(top_k)(None, expected)
    if top_p < 1:
        expected = TopPLogitsWarper(top_p)(None, expected)
    got = _filtered_scores(logits, SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p))
    assert torch.equal(torch.isinf(got), torch.isinf(expected))
    assert torch.allclose(got[~torch.isinf(got)], expected[~torch.isinf(expected)])


def test_top_p_keeps_the_smallest_set_reaching_the_mass_and_samples_in_proportion(gen) -> None:
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = probs.log()[None].repeat(4000, 1)
    kept = _filtered_scores(logits[:1], SamplingParams(top_p=0.8))
    assert torch.isinf(kept[0]).tolist() == [False, False, True, True]
    draws = _sample(logits, SamplingParams(top_p=0.8), torch.Generator().manual_seed(0))
    counts = torch.bincount(draws, minlength=4).tolist()
    assert counts[2] == counts[3] == 0
    assert abs(counts[0] / 4000 - 0.5 / 0.8) < 0.03  # 4 standard errors


# -- weight sync ---------------------------------------------------------------


@pytest.mark.parametrize("tied", [False, True])
def test_load_policy_state_copies_in_place(tied: bool) -> None:
    model = _model(0, tied)
    gen = HFGenerator(_model(0, tied), PAD)
    other = _model(1, tied)
    pointers = {k: v.data_ptr() for k, v in gen.model.state_dict().items()}
    state = other.state_dict()
    if tied:  # a tied tensor may be left out of the state
        state = {k: v for k, v in state.items() if k != "lm_head.weight"}
    gen.load_policy_state(state)
    assert {k: v.data_ptr() for k, v in gen.model.state_dict().items()} == pointers
    assert not gen.model.training
    cands = [[[4, 5], [6]]] * len(PROMPTS)
    got = gen.score(PROMPTS, cands)
    for prompt, row in zip(PROMPTS, got):
        assert _max_diff(row[0], ref_logprobs(other, prompt, [4, 5])) < 1e-5
        assert _max_diff(row[0], ref_logprobs(model, prompt, [4, 5])) > 1e-3


def test_load_policy_state_rejects_bad_states_before_copying() -> None:
    gen = HFGenerator(_model(0), PAD)
    before = {k: v.clone() for k, v in gen.model.state_dict().items()}
    good = _model(1).state_dict()
    with pytest.raises(ValueError, match="keys the model does not have: extra"):
        gen.load_policy_state({**good, "extra": torch.zeros(1)})
    with pytest.raises(ValueError, match="shape mismatch: model.norm.weight"):
        gen.load_policy_state({**good, "model.norm.weight": torch.zeros(3)})
    with pytest.raises(ValueError, match="missing keys: model.norm.weight"):
        gen.load_policy_state({k: v for k, v in good.items() if k != "model.norm.weight"})
    after = gen.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
