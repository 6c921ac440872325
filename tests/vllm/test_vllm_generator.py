"""VLLMGenerator (generation.Generator on vLLM's offline engine) against HF references.

Real vLLM (the CPU build of the test environment: ``make vllm-env``, ``make
test-vllm``), no mocks. The references are those of test_hf_generator.py: one
unpadded float64 full forward of the HF model per sequence, plus
``HFGenerator`` itself. Each engine costs ~20 s to build, so one engine per
model is shared by the module: the untied model (10x output layer, so greedy
chains and stop tokens are not vacuous) and the tied default layout of the
embedded model.

Tolerances (float32): 1e-4 on every log-probability; measured maxima are
printed at the end of the run (``measured`` fixture).
"""

from __future__ import annotations

import pytest

vllm = pytest.importorskip("vllm", reason="needs the vLLM CPU test environment (make vllm-env; make test-vllm)")

import copy  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

from mage_core.backends.base import LossSettings, Sample  # noqa: E402
from mage_core.generation import Generator, SamplingParams  # noqa: E402
from mage_core.backends.hf import HFGenerator  # noqa: E402
from mage_core.backends.torch_engine import TorchEngine  # noqa: E402
from mage_core.backends.vllm_generator import VLLMGenerator  # noqa: E402
from mage_core.policy.model import TinyModelSpec, build_tiny_qwen3, save_policy  # noqa: E402
from mage_core.policy.tokenizer import build_tokenizer  # noqa: E402
from tests.generatorcases import (  # noqa: E402
    BOS,
    EOS,
    PAD,
    PROMPTS,
    check_a_stop_token_on_the_last_step_counts_as_finished,
    check_stop_tokens_end_rows_and_the_rest_go_on,
    ref_greedy,
    ref_logprobs,
)
from tests.generatorcases import max_diff as _max_diff  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.usefixtures("one_thread")]

VOCAB = 160  # > 128: score() splits a context's tokens over two requests
SPEC = dict(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32, intermediate_size=128)
TOL = 1e-4


def _model(seed: int, tied: bool):
    """A tiny Qwen3 vLLM's CPU attention accepts (head_dim 32). Untied with a 10x
    output layer (as in test_hf_generator.py), or tied as the embedded default."""
    model = build_tiny_qwen3(TinyModelSpec(tie_word_embeddings=tied, **SPEC), vocab_size=VOCAB, pad_token_id=PAD,
                             bos_token_id=BOS, eos_token_id=EOS, seed=seed)
    if not tied:
        with torch.no_grad():
            model.lm_head.weight.mul_(10.0)
    return model


def _save(model, directory) -> str:
    tokenizer = build_tokenizer(["the tiny test corpus of the vllm generator tests"])
    return str(save_policy(model, tokenizer, directory))


@pytest.fixture(scope="module")
def model():
    return _model(0, tied=False)


@pytest.fixture(scope="module")
def gen(model, tmp_path_factory):
    start = time.perf_counter()
    generator = VLLMGenerator(_save(model, tmp_path_factory.mktemp("untied") / "policy"), max_model_len=256)
    generator.build_seconds = time.perf_counter() - start
    yield generator
    generator.close()


@pytest.fixture(scope="module")
def tied_model():
    return _model(0, tied=True)


@pytest.fixture(scope="module")
def tied_gen(tied_model, tmp_path_factory):
    generator = VLLMGenerator(_save(tied_model, tmp_path_factory.mktemp("tied") / "policy"), max_model_len=256)
    yield generator
    generator.close()


def _score_diff(got: list[list[list[float]]], want: list[list[list[float]]]) -> float:
    assert [[len(c) for c in row] for row in got] == [[len(c) for c in row] for row in want]
    return max(_max_diff(a, b) for row_a, row_b in zip(got, want) for a, b in zip(row_a, row_b))


def _ref_score(model, prompts, cands) -> list[list[list[float]]]:
    return [[ref_logprobs(model, prompt, c) for c in row] for prompt, row in zip(prompts, cands)]


# -- construction ----------------------------------------------------------------


def test_it_is_a_generator_and_reads_the_engine_config(gen, measured) -> None:
    assert isinstance(gen, Generator)
    assert gen.vocab_size == VOCAB and gen.max_model_len == 256 and gen.dtype == torch.float32
    measured("engine build seconds (LLM() on the tiny model)", gen.build_seconds)


def test_constructor_errors(model, tmp_path) -> None:
    """Every check runs before vLLM is started (each case returns at once)."""
    good = _save(model, tmp_path / "policy")
    cases = [
        (dict(model_dir=tmp_path / "nope"), "model_dir .* is not a directory"),
        (dict(model_dir=tmp_path), "holds no config.json"),
        (dict(model_dir=good, dtype="float64"), "dtype must be one of"),
        (dict(model_dir=good, dtype=torch.int8), "dtype must be one of"),
        (dict(model_dir=good, seed=1.5), "seed must be an int"),
        (dict(model_dir=good, gpu_memory_utilization=0), r"gpu_memory_utilization must lie in \(0, 1\]"),
        (dict(model_dir=good, gpu_memory_utilization=1.5), "gpu_memory_utilization"),
        (dict(model_dir=good, max_model_len=1), "max_model_len must be None or an int >= 2"),
        (dict(model_dir=good, max_batch_size=0), "max_batch_size must be None or an int >= 1"),
        (dict(model_dir=good, weight_sync="nccl"), "weight_sync must be one of shm, rpc"),
        (dict(model_dir=good, weight_sync_chunk_bytes=0), "weight_sync_chunk_bytes"),
        (dict(model_dir=good, logprobs_mode="processed_logprobs"), "logprobs_mode are set by VLLMGenerator"),
        (dict(model_dir=good, max_batch_size=4, max_num_seqs=4), "max_batch_size or max_num_seqs"),
        (dict(model_dir=good, enable_sleep_mode=True), "enable_sleep_mode: vLLM's sleep mode needs CUDA"),
    ]
    if torch.cuda.is_available():  # the sleep-mode case only fails without a GPU
        cases.pop()
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            VLLMGenerator(**kwargs)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match=r"holds no \*.safetensors"):
        VLLMGenerator(tmp_path / "empty")
    small = build_tiny_qwen3(TinyModelSpec(hidden_size=64, num_heads=4, num_kv_heads=2, head_dim=16), vocab_size=VOCAB,
                             pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS, seed=0)
    with pytest.raises(ValueError, match="head_dim 16 is not one that vLLM's CPU attention supports"):
        VLLMGenerator(_save(small, tmp_path / "hd16"))


# -- score -----------------------------------------------------------------------


def test_score_single_and_multi_token_candidates_equal_the_references(gen, model, measured) -> None:
    cands = [[[4], [5, 6, 7], [47], [4, 5]], [[9], [10, 11]], [[1]], [[3], [3], [19, 19, 19, 19]]]
    got = gen.score(PROMPTS, cands)
    ref = _ref_score(model, PROMPTS, cands)
    hf = HFGenerator(model, PAD).score(PROMPTS, cands)
    d_ref, d_hf = _score_diff(got, ref), _score_diff(got, hf)
    measured("score: max |vLLM - float64 full forward| (float32 engine)", d_ref)
    measured("score: max |vLLM - HFGenerator.score| (float32)", d_hf)
    assert d_ref < TOL and d_hf < TOL
    single = [[[4], [5], [47]], [[9], [10]], [[1]], [[3], [3]]]
    got_single = gen.score(PROMPTS, single)
    assert _score_diff(got_single, _ref_score(model, PROMPTS, single)) < TOL
    assert _score_diff(got_single, HFGenerator(model, PAD).score(PROMPTS, single)) < TOL


@torch.no_grad()
def test_score_reads_more_than_128_tokens_at_one_context(gen, model) -> None:
    """All VOCAB tokens after one prompt: two requests (128 + 32 ids); the
    probabilities sum to 1."""
    got = [v[0] for v in gen.score([PROMPTS[0]], [[[t] for t in range(VOCAB)]])[0]]
    want = torch.log_softmax(model(input_ids=torch.tensor([PROMPTS[0]])).logits[0, -1].double(), -1).tolist()
    assert _max_diff(got, want) < TOL
    assert abs(torch.tensor(got, dtype=torch.float64).logsumexp(0).item()) < 1e-4


def test_score_edge_cases_and_errors(gen) -> None:
    assert gen.score([], []) == []
    assert gen.score([[BOS, 4]], [[]]) == [[]]
    with pytest.raises(ValueError, match=r"candidates\[0\]\[1\] is empty"):
        gen.score([[BOS]], [[[4], []]])
    with pytest.raises(ValueError, match="2 prompts but 1 candidate lists"):
        gen.score([[BOS], [BOS]], [[[4]]])
    with pytest.raises(ValueError, match=r"prompts\[1\] is empty"):
        gen.score([[BOS], []], [[[4]], [[4]]])
    with pytest.raises(ValueError, match=rf"prompts\[0\] holds ids outside \[0, {VOCAB}\)"):
        gen.score([[BOS, VOCAB]], [[[4]]])
    with pytest.raises(ValueError, match=rf"candidates\[0\]\[0\]: {VOCAB} is not a token id"):
        gen.score([[BOS]], [[[VOCAB]]])
    with pytest.raises(ValueError, match=r"prompts\[0\] \+ candidates\[0\]\[0\] has 257 tokens, more than "
                                         "max_model_len=256"):
        gen.score([[BOS] * 250], [[[4] * 7]])


# -- generate --------------------------------------------------------------------


@pytest.mark.parametrize(
    "sampling",
    [SamplingParams(temperature=1.0, max_new_tokens=10),
     SamplingParams(temperature=0.7, top_p=0.8, top_k=20, max_new_tokens=10),
     SamplingParams(temperature=1.3, top_k=5, max_new_tokens=10)],
    ids=["t1", "eval", "topk5"],
)
def test_generate_returns_temperature_one_logprobs_of_its_tokens(gen, model, sampling, measured) -> None:
    """vLLM's sampled-token log-probs are those of the raw logits (logprobs_mode
    raw_logprobs), not of the tempered/filtered distribution."""
    out = gen.generate(PROMPTS, sampling, torch.Generator().manual_seed(11))
    assert len(out) == len(PROMPTS)
    hf = HFGenerator(model, PAD)
    for prompt, g in zip(PROMPTS, out):
        assert len(g.token_ids) == len(g.logprobs) == 10 and not g.finished
        d_ref = _max_diff(g.logprobs, ref_logprobs(model, prompt, g.token_ids))
        d_hf = _max_diff(g.logprobs, hf.score([prompt], [[g.token_ids]])[0][0])
        measured("generate: max |sampled-token logprob - float64 full forward| (float32)", d_ref)
        measured("generate: max |sampled-token logprob - HFGenerator.score| (float32)", d_hf)
        assert d_ref < TOL and d_hf < TOL
    if sampling.temperature != 1.0:  # the processed (tempered) log-probs differ by far more
        gaps = []
        for prompt, g in zip(PROMPTS, out):
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([prompt + g.token_ids])).logits[0].double()
            tempered = torch.log_softmax(logits / sampling.temperature, -1)
            gaps += [abs(tempered[len(prompt) - 1 + t, tok].item() - lp)
                     for t, (tok, lp) in enumerate(zip(g.token_ids, g.logprobs))]
        assert max(gaps) > 1e-2


def test_same_generator_state_same_samples_other_state_other_samples(gen) -> None:
    sampling = SamplingParams(max_new_tokens=12)
    a = gen.generate(PROMPTS, sampling, torch.Generator().manual_seed(5))
    b = gen.generate(PROMPTS, sampling, torch.Generator().manual_seed(5))
    c = gen.generate(PROMPTS, sampling, torch.Generator().manual_seed(6))
    assert [g.token_ids for g in a] == [g.token_ids for g in b]
    assert [g.logprobs for g in a] == [g.logprobs for g in b]
    assert [g.token_ids for g in a] != [g.token_ids for g in c]
    # The generator advances: a second call on the same generator samples anew.
    g = torch.Generator().manual_seed(5)
    first, second = gen.generate(PROMPTS, sampling, g), gen.generate(PROMPTS, sampling, g)
    assert [x.token_ids for x in first] == [x.token_ids for x in a]
    assert [x.token_ids for x in second] != [x.token_ids for x in a]


def test_per_prompt_generators_make_each_row_independent_of_the_batch(gen) -> None:
    """Row i's sample depends only on generator i: alone, in a batch, in another
    order, with another batch size (vLLM seeds each request)."""
    sampling = SamplingParams(max_new_tokens=12)

    def gens(seeds):
        return [torch.Generator().manual_seed(s) for s in seeds]

    batch = gen.generate(PROMPTS, sampling, gens([1, 2, 3, 4]))
    alone = [gen.generate([p], sampling, gens([s]))[0] for p, s in zip(PROMPTS, [1, 2, 3, 4])]
    reordered = gen.generate(PROMPTS[::-1], sampling, gens([4, 3, 2, 1]))[::-1]
    for b, a, r in zip(batch, alone, reordered):
        assert b.token_ids == a.token_ids == r.token_ids
        assert _max_diff(b.logprobs, a.logprobs) < 1e-5 and _max_diff(b.logprobs, r.logprobs) < 1e-5
    # One torch.Generator for the batch draws one seed per prompt in batch order;
    # the generators of a list each advance by one draw.
    listed = gens([7, 8, 9, 10])
    gen.generate(PROMPTS, sampling, listed)
    assert [int(torch.randint(0, 10**9, (1,), generator=g)) for g in listed] == \
        [int(torch.randint(0, 10**9, (1,), generator=g)) for g in [
            _advanced(s) for s in [7, 8, 9, 10]]]
    with pytest.raises(ValueError, match="4 prompts but 3 generators"):
        gen.generate(PROMPTS, sampling, gens([1, 2, 3]))
    with pytest.raises(TypeError, match=r"generator\[1\] is a int"):
        gen.generate(PROMPTS[:2], sampling, [torch.Generator(), 3])


def _advanced(seed: int) -> torch.Generator:
    g = torch.Generator().manual_seed(seed)
    torch.randint(0, 2**62, (1,), generator=g)
    return g


def test_greedy_equals_the_argmax_chain_and_hf_greedy(gen, model) -> None:
    greedy = gen.generate(PROMPTS, SamplingParams(temperature=0.0, max_new_tokens=8), torch.Generator())
    hf = HFGenerator(model, PAD).generate(PROMPTS, SamplingParams(temperature=0.0, max_new_tokens=8),
                                          torch.Generator())
    top1 = gen.generate(PROMPTS, SamplingParams(temperature=1.0, top_k=1, max_new_tokens=8),
                        torch.Generator().manual_seed(3))
    for prompt, g, h, t in zip(PROMPTS, greedy, hf, top1):
        assert g.token_ids == h.token_ids == ref_greedy(model, prompt, 8)
        assert t.token_ids == g.token_ids
        assert _max_diff(g.logprobs, h.logprobs) < TOL
    # Greedy draws nothing from the generator (as HFGenerator).
    g = torch.Generator().manual_seed(0)
    state = g.get_state()
    gen.generate(PROMPTS, SamplingParams(temperature=0.0, max_new_tokens=2), g)
    assert torch.equal(g.get_state(), state)


def test_stop_tokens_end_rows_and_the_rest_go_on(gen) -> None:
    check_stop_tokens_end_rows_and_the_rest_go_on(gen)


def test_a_stop_token_on_the_last_step_counts_as_finished(gen) -> None:
    check_a_stop_token_on_the_last_step_counts_as_finished(gen)


def test_generate_errors(gen) -> None:
    sampling = SamplingParams(max_new_tokens=2)
    assert gen.generate([], sampling, torch.Generator()) == []
    with pytest.raises(TypeError, match="torch.Generator"):
        gen.generate([[BOS]], sampling, 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="SamplingParams"):
        gen.generate([[BOS]], {"temperature": 1.0}, torch.Generator())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stop_token_ids: 999"):
        gen.generate([[BOS]], SamplingParams(stop_token_ids=(999,)), torch.Generator())
    with pytest.raises(ValueError, match=r"prompts\[0\] is empty"):
        gen.generate([[]], sampling, torch.Generator())
    with pytest.raises(ValueError, match=rf"prompts\[1\] holds ids outside \[0, {VOCAB}\)"):
        gen.generate([[BOS], [-1]], sampling, torch.Generator())
    with pytest.raises(ValueError, match=r"prompts\[0\] has 250 tokens: with max_new_tokens=7 it exceeds "
                                         "max_model_len=256"):
        gen.generate([[BOS] * 250], SamplingParams(max_new_tokens=7), torch.Generator())
    with pytest.raises(RuntimeError, match="enable_sleep_mode=False"):
        gen.sleep()
    with pytest.raises(RuntimeError, match="enable_sleep_mode=False"):
        gen.wake_up()


# -- weight sync -----------------------------------------------------------------


def _samples() -> list[Sample]:
    """A few free and constrained samples on the test prompts."""
    return [
        Sample(prompt=PROMPTS[0], advantage=1.0, response=[4, 5, 6]),
        Sample(prompt=PROMPTS[1], advantage=-1.0, response=[9]),
        Sample(prompt=PROMPTS[2], advantage=0.5, candidates=[[10], [11], [12]], choice=1),
        Sample(prompt=PROMPTS[3], advantage=-0.5, candidates=[[13, 14], [15]], choice=0),
    ]


def _trained(model) -> TorchEngine:
    """A TorchEngine on a copy of ``model`` after one large step (lr 0.05)."""
    engine = TorchEngine(copy.deepcopy(model), learning_rate=0.05, max_grad_norm=None)
    samples = _samples()
    engine.step(samples, engine.logprobs(samples), None, LossSettings())
    return engine


@pytest.mark.parametrize("mode", ["shm", "rpc"])
@pytest.mark.parametrize("layout", ["untied", "tied"])
def test_weight_sync_from_a_torch_engine_step(layout, mode, gen, model, tied_gen, tied_model, measured) -> None:
    """After one TorchEngine step, load_policy_state moves vLLM's score and
    sampled-token log-probs to the new weights' HF values (and away from the old
    ones); syncing the old weights back restores the old values. Both transports
    (a /dev/shm file, bytes through vLLM's RPC in several chunks)."""
    generator, base = (gen, model) if layout == "untied" else (tied_gen, tied_model)
    generator.weight_sync, chunk_bytes = mode, generator.weight_sync_chunk_bytes
    generator.weight_sync_chunk_bytes = 64 * 1024  # the rpc mode sends several chunks
    cands = [[[4], [5, 6, 7]], [[9], [10, 11]], [[12]], [[13, 14], [15]]]
    old_ref = _ref_score(base, PROMPTS, cands)
    assert _score_diff(generator.score(PROMPTS, cands), old_ref) < TOL  # fills the prefix cache too
    engine = _trained(base)
    new_ref = _ref_score(engine.model, PROMPTS, cands)
    moved = _score_diff(new_ref, old_ref)
    assert moved > 100 * TOL  # the step changed the policy well beyond the tolerance
    start = time.perf_counter()
    try:
        generator.load_policy_state(engine.policy_state_dict())
    finally:
        generator.weight_sync_chunk_bytes = chunk_bytes
    measured(f"weight sync seconds ({layout} tiny model, {mode})", time.perf_counter() - start)
    assert generator.last_sync_mode == mode
    got = generator.score(PROMPTS, cands)
    measured(f"weight sync: max |vLLM score - new weights' float64 forward| ({layout}, {mode})",
             _score_diff(got, new_ref))
    measured(f"weight sync: max |new - old| reference log-prob ({layout})", moved)
    assert _score_diff(got, new_ref) < TOL
    assert _score_diff(got, old_ref) > moved - TOL
    sampled = generator.generate(PROMPTS, SamplingParams(max_new_tokens=6), torch.Generator().manual_seed(2))
    for prompt, g in zip(PROMPTS, sampled):
        assert _max_diff(g.logprobs, ref_logprobs(engine.model, prompt, g.token_ids)) < TOL
    generator.load_policy_state(base.state_dict())
    assert _score_diff(generator.score(PROMPTS, cands), old_ref) < TOL
    generator.weight_sync = "shm"


def test_load_policy_state_rejects_bad_states_before_sending(gen, model) -> None:
    good = model.state_dict()
    with pytest.raises(ValueError, match="keys the model does not have: extra"):
        gen.load_policy_state({**good, "extra": torch.zeros(1)})
    with pytest.raises(ValueError, match="shape mismatch: model.norm.weight"):
        gen.load_policy_state({**good, "model.norm.weight": torch.zeros(3)})
    with pytest.raises(ValueError, match="missing keys: model.norm.weight"):
        gen.load_policy_state({k: v for k, v in good.items() if k != "model.norm.weight"})
    with pytest.raises(ValueError, match="missing keys: lm_head.weight"):  # untied: lm_head is its own
        gen.load_policy_state({k: v for k, v in good.items() if k != "lm_head.weight"})
    cands = [[[4], [5, 6]]]
    assert _score_diff(gen.score(PROMPTS[:1], cands), _ref_score(model, PROMPTS[:1], cands)) < TOL


def test_tied_state_may_leave_out_the_lm_head(tied_gen, tied_model) -> None:
    state = {k: v for k, v in _trained(tied_model).policy_state_dict().items() if k != "lm_head.weight"}
    other = copy.deepcopy(tied_model)
    other.load_state_dict(state, strict=False)
    tied_gen.load_policy_state(state)
    cands = [[[4], [5, 6]]] * len(PROMPTS)
    assert _score_diff(tied_gen.score(PROMPTS, cands), _ref_score(other, PROMPTS, cands)) < TOL
    tied_gen.load_policy_state(tied_model.state_dict())
