"""Scoring multi-token candidates: packed (tails of one row) against one row per candidate.

A decision among K commands of n tokens each (ALFWorld's commands read word by word) costs,
unpacked, K rows of the prompt plus the candidate; packed (``backends/logprobs.py``), one row:
the prompt and every candidate's tokens but its last, under a 4-D attention mask. This times
a training step's forward and backward over mini-batches of such decisions, both ways, on the
same embedded-size Qwen3 and the same samples in one run, and checks that the two give the
same log-probabilities. Usage::

    python benchmarks/bench_candidate_tails.py                    # 64 decisions, K=25, n=4, prompts of 400
    python benchmarks/bench_candidate_tails.py --candidates 10 --prompt 1500 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from mage_core.backends.base import Sample
from mage_core.backends.logprobs import _plan, evaluate_flat


def decisions(n: int, k: int, tokens: int, prompt: int, vocab: int, seed: int = 0) -> list[Sample]:
    """``n`` decisions of unrelated prompts (a shuffled mini-batch), ``k`` candidates each of
    1 to ``tokens`` tokens, sharing their first two (``go to ...``)."""
    g = torch.Generator().manual_seed(seed)

    def ints(m: int) -> list[int]:
        return torch.randint(1, vocab, (m,), generator=g).tolist()

    out = []
    for _ in range(n):
        stem = ints(2)
        cands = [stem + ints(int(torch.randint(0, tokens - 1, (1,), generator=g))) for _ in range(k)]
        out.append(Sample(prompt=ints(prompt), advantage=1.0, candidates=cands, choice=0))
    return out


def timed(model: torch.nn.Module, samples: list[Sample], pack: bool, micro: int) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    logps = []
    for i in range(0, len(samples), micro):
        logp, _ = evaluate_flat(model, samples[i: i + micro], with_entropy=True, pack_prefixes=pack)
        logp.sum().backward()
        logps.append(logp.detach())
    return time.perf_counter() - start, torch.cat(logps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=64)
    ap.add_argument("--candidates", type=int, default=25)
    ap.add_argument("--tokens", type=int, default=4, help="the longest candidate, in tokens")
    ap.add_argument("--prompt", type=int, default=400, help="prompt tokens")
    ap.add_argument("--micro", type=int, default=8, help="decisions a forward pass")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      max_position_embeddings=args.prompt + args.candidates * args.tokens + 8)
    model = Qwen3ForCausalLM(cfg)
    samples = decisions(args.decisions, args.candidates, args.tokens, args.prompt, cfg.vocab_size)
    packed_rows, plain_rows = _plan(samples[: args.micro]).rows, _plan(samples[: args.micro], False).rows
    print(f"{args.decisions} decisions, {args.candidates} candidates of 1-{args.tokens} tokens, prompts of "
          f"{args.prompt}; a forward of {args.micro} decisions: packed {len(packed_rows)} rows x "
          f"{max(map(len, packed_rows))} tokens, unpacked {len(plain_rows)} rows x {max(map(len, plain_rows))}")
    times: dict[bool, list[float]] = {True: [], False: []}
    logps: dict[bool, torch.Tensor] = {}
    for _ in range(args.repeats):
        for pack in (True, False):  # alternated, so that both see the same machine
            seconds, logps[pack] = timed(model, samples, pack, args.micro)
            times[pack].append(seconds)
    gap = (logps[True] - logps[False]).abs().max().item()
    packed, plain = statistics.median(times[True]), statistics.median(times[False])
    print(f"forward + backward, median of {args.repeats}: packed {packed:.3f} s, unpacked {plain:.3f} s, "
          f"unpacked / packed {plain / packed:.1f}x; largest log-prob difference {gap:.1e}")


if __name__ == "__main__":
    main()
