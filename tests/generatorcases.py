"""References and contract checks shared by the Generator tests (HF and vLLM).

The references run one unpadded sequence at a time through a full forward pass
(no KV cache, no padding, no batching), so they share nothing with the batched,
cached code paths under test. The ``check_*`` functions are the parts of the
Generator contract every backend must meet; each test module calls them on its
own ``gen``.
"""

from __future__ import annotations

import pytest
import torch

from mage_core.generation import SamplingParams

PAD, BOS, EOS = 0, 2, 3
PROMPTS = [[BOS, 5, 9, 11, 7, 30, 31, 12, 40, 8, 17, 6], [BOS, 20], [BOS, 21, 22, 23, 24, 25], [BOS]]


@torch.no_grad()
def ref_logprobs(model, prompt: list[int], continuation: list[int]) -> list[float]:
    """log p(continuation[t] | prompt + continuation[:t]) from one full, unpadded float64 softmax."""
    logits = model(input_ids=torch.tensor([prompt + continuation])).logits[0].double()
    logp = torch.log_softmax(logits, dim=-1)
    return [logp[len(prompt) - 1 + t, token].item() for t, token in enumerate(continuation)]


@torch.no_grad()
def ref_greedy(model, prompt: list[int], num_tokens: int) -> list[int]:
    """Argmax chain, recomputing the whole sequence at every step."""
    seq = list(prompt)
    for _ in range(num_tokens):
        seq.append(int(model(input_ids=torch.tensor([seq])).logits[0, -1].argmax()))
    return seq[len(prompt):]


def max_diff(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b)
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0)


def check_stop_tokens_end_rows_and_the_rest_go_on(gen) -> None:
    free = gen.generate(PROMPTS, SamplingParams(temperature=0.0, max_new_tokens=8), torch.Generator())
    stop = free[0].token_ids[2]  # row 0 stops at its third token (or earlier if it occurs earlier)
    stopped = gen.generate(PROMPTS, SamplingParams(temperature=0.0, max_new_tokens=8, stop_token_ids=(stop,)),
                           torch.Generator())
    for f, s in zip(free, stopped):
        if stop in f.token_ids:
            n = f.token_ids.index(stop) + 1
            assert s.token_ids == f.token_ids[:n] and s.finished and s.token_ids[-1] == stop
            assert s.logprobs == pytest.approx(f.logprobs[:n], abs=1e-5)
        else:
            assert s.token_ids == f.token_ids and not s.finished
    assert len(stopped[0].token_ids) <= 3
    # Every row stops on its first token: one step, nothing padded in.
    firsts = tuple({g.token_ids[0] for g in free})
    once = gen.generate(PROMPTS, SamplingParams(temperature=0.0, max_new_tokens=8, stop_token_ids=firsts),
                        torch.Generator())
    assert [g.token_ids for g in once] == [[g.token_ids[0]] for g in free]
    assert all(g.finished for g in once)


def check_a_stop_token_on_the_last_step_counts_as_finished(gen) -> None:
    free = gen.generate([PROMPTS[2]], SamplingParams(temperature=0.0, max_new_tokens=3), torch.Generator())[0]
    last = free.token_ids[-1]
    assert last not in free.token_ids[:-1]  # else the test would stop earlier
    out = gen.generate([PROMPTS[2]], SamplingParams(temperature=0.0, max_new_tokens=3, stop_token_ids=(last,)),
                       torch.Generator())[0]
    assert out.token_ids == free.token_ids and out.finished
