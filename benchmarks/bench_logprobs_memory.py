"""Peak memory and time of one micro-batch's forward + backward: dense logits vs chunked.

    python benchmarks/bench_logprobs_memory.py [--rows 4] [--response 512] [--vocab 151936]
                                               [--chunks 0 1024 256] [--threads 2]

One PPO micro-batch of free-text samples (``--rows`` rows of a 64-token prompt and a
``--response``-token response: rows x response queried positions) on a Qwen3 with
Qwen3-4B's vocabulary (151,936) and a tiny body (hidden 64, 2 layers), so that the
logits dominate as they do at paper scale. For each ``--chunks`` value (0: the dense
path, all [Q, V] logits at once; N: ``backend.logits_chunk_tokens: N``) a fresh
process builds the engine, runs one warm-up step on a one-row batch, then one
``TorchEngine.step`` on the micro-batch, and reports the peak resident memory above
what it held before that step (``ru_maxrss``: the process's high-water mark), the
step's time, and the dense logits' size for scale. Peak RSS is what the operating
system saw, so it includes the allocator's slack; on a GPU the same structure holds
for the CUDA allocator's peak.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

from rich.console import Console
from rich.table import Table

MIB = 1024**2


def child(rows: int, response: int, vocab: int, chunk: int, threads: int) -> dict[str, float]:
    import torch

    from mage_core.backends.base import LossSettings, Sample
    from mage_core.backends.torch_engine import TorchEngine
    from mage_core.policy.model import TinyModelSpec, build_tiny_qwen3

    torch.set_num_threads(threads)
    spec = TinyModelSpec(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16,
                         intermediate_size=128, max_position_embeddings=4096)
    model = build_tiny_qwen3(spec, vocab, pad_token_id=0, bos_token_id=1, eos_token_id=2, seed=0)
    engine = TorchEngine(model, 1e-5, max_tokens_per_micro_batch=10**9, logits_chunk_tokens=chunk)
    g = torch.Generator().manual_seed(0)

    def batch(n: int) -> list[Sample]:
        return [Sample(prompt=torch.randint(3, vocab, (64,), generator=g).tolist(), advantage=1.0 - 2 * (i % 2),
                       response=torch.randint(3, vocab, (response,), generator=g).tolist()) for i in range(n)]

    loss = LossSettings(clip_ratio=0.2, entropy_coef=0.001)
    warm = batch(1)
    engine.step(warm, engine.logprobs(warm), None, loss)
    samples = batch(rows)
    old = engine.logprobs(samples)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss_now = _rss_kib()
    started = time.perf_counter()
    engine.step(samples, old, None, loss)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"peak_above_start_mib": (max(peak, before) - rss_now) / 1024, "step_s": seconds,
            "params": float(sum(p.numel() for p in model.parameters()))}


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--response", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--chunks", type=int, nargs="+", default=[0, 1024, 256])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.rows, args.response, args.vocab, args.child, args.threads)))
        return 0
    queries = args.rows * args.response
    dense_mib = queries * args.vocab * 4 / MIB
    table = Table(title=f"one micro-batch: {args.rows} rows x {args.response} response tokens = {queries} queries, "
                        f"vocabulary {args.vocab} (fp32 logits at once: {dense_mib:.0f} MiB)")
    for column in ("logits", "peak RSS above start (MiB)", "step (s)"):
        table.add_column(column, justify="right")
    for chunk in args.chunks:
        out = subprocess.run([sys.executable, __file__, "--rows", str(args.rows), "--response", str(args.response),
                              "--vocab", str(args.vocab), "--threads", str(args.threads), "--child", str(chunk)],
                             check=True, capture_output=True, text=True)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        name = "dense" if chunk == 0 else f"chunks of {chunk}"
        table.add_row(name, f"{figures['peak_above_start_mib']:.0f}", f"{figures['step_s']:.2f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
