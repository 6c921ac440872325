"""Per-update time of the torch engine against the DeepSpeed engine (ZeRO 0, 1, 2) on CPU.

Usage: ``python benchmarks/bench_engines.py [--repeats N] [--threads T]``.

One PPO mini-batch of free-text samples (prompt 192 tokens, response 32) on a
Qwen3 of the embedded default's shape but wider (hidden 256, 4 layers, vocab
512: ~3.4M parameters), the same batch and settings for every engine. Each
engine is warmed up with one step, then ``step()`` is timed ``--repeats``
times (median and min printed, plus the ratio to the torch engine). DeepSpeed
runs as one rank on gloo (``DS_ACCELERATOR=cpu``): this measures its
bookkeeping per step on one process, not the data-parallel speed-up it brings
on several GPUs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def samples(n: int, prompt: int, response: int, vocab: int, seed: int = 0):
    from mage_core.backends.base import Sample

    g = torch.Generator().manual_seed(seed)
    return [Sample(prompt=torch.randint(1, vocab, (prompt,), generator=g).tolist(),
                   advantage=float(torch.randn(1, generator=g)),
                   response=torch.randint(1, vocab, (response,), generator=g).tolist()) for _ in range(n)]


def model(vocab: int):
    from mage_core.policy.model import TinyModelSpec, build_tiny_qwen3

    spec = TinyModelSpec(hidden_size=256, num_layers=4, num_heads=4, num_kv_heads=2, head_dim=64,
                         intermediate_size=512)
    return build_tiny_qwen3(spec, vocab, pad_token_id=0, bos_token_id=1, eos_token_id=2, seed=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16, help="samples per mini-batch")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from mage_core.backends.base import LossSettings
    from mage_core.backends.deepspeed_engine import DeepSpeedEngine
    from mage_core.backends.torch_engine import TorchEngine

    vocab = 512
    batch = samples(args.batch, 192, 32, vocab)
    loss = LossSettings(clip_ratio=0.2, entropy_coef=0.001, kl_coef=0.1)
    common = dict(learning_rate=1e-5, max_grad_norm=1.0, max_tokens_per_micro_batch=2048, reference_model="copy")
    engines = {"torch": lambda: TorchEngine(model(vocab), **common)}
    for stage in (0, 1, 2):
        engines[f"deepspeed ZeRO-{stage}"] = lambda stage=stage: DeepSpeedEngine(model(vocab), **common,
                                                                                  zero_stage=stage)
    n_params = sum(p.numel() for p in model(vocab).parameters())
    tokens = sum(len(s.prompt) + len(s.response) for s in batch)
    print(f"model {n_params / 1e6:.2f}M parameters; mini-batch {len(batch)} samples, {tokens} tokens, "
          f"micro-batches of <= 2048 tokens; {args.threads} thread(s); {args.repeats} timed steps each")
    print(f"{'engine':18} {'median s':>9} {'min s':>7} {'vs torch':>9}")
    base = None
    for name, build in engines.items():
        engine = build()
        old = engine.logprobs(batch)
        ref = engine.logprobs(batch, policy="reference")
        engine.step(batch, old, ref, loss)  # warm-up
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            engine.step(batch, old, ref, loss)
            times.append(time.perf_counter() - started)
        median = statistics.median(times)
        base = base or median
        print(f"{name:18} {median:9.3f} {min(times):7.3f} {median / base:8.2f}x")


if __name__ == "__main__":
    main()
