"""Rollout throughput: HFGenerator against VLLMGenerator on the same model and prompts.

    python benchmarks/bench_generators.py [--prompts 64] [--new-tokens 64] [--repeats 3] [--dtype float32]

Runs in the vLLM environment only (``make vllm-env``), with the variables of
``make test-vllm``::

    VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 PYTHONPATH=. \
        .venv-vllm/bin/python benchmarks/bench_generators.py

Without vllm it prints why and exits with status 2 (nothing measured).

Both generators sample the same prompts (lengths 16-48, drawn once) with
temperature 1 and no stop token, so every row generates exactly
``--new-tokens`` tokens; tokens/s = generated tokens / wall time of one
``generate`` call over all prompts. One untimed call warms each generator up
(vLLM's first forward also builds its CPU kernels); then ``--repeats`` timed
calls, each with its own seed. The model is a tiny Qwen3 larger than the
tests' (hidden 256, 4 layers, 8 heads of 32, 4 KV heads, vocab 512, tied), in
float32 on both sides by default. Also timed: ``score`` on the same prompts
(4 candidates of 3 tokens each) and one weight sync (``load_policy_state``).
Wall times on a shared machine: other work on it slows either side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        import vllm  # noqa: F401
    except ImportError:
        print("bench_generators: vllm is not installed in this environment; run it in the vLLM environment "
              "(make vllm-env; the command is in this file's docstring). Nothing measured.")
        return 2

    import torch

    from mage_core.generation import SamplingParams
    from mage_core.backends.hf import HFGenerator
    from mage_core.backends.vllm_generator import VLLMGenerator
    from mage_core.policy.model import TinyModelSpec, build_tiny_qwen3, save_policy
    from mage_core.policy.tokenizer import build_tokenizer

    vocab, pad = 512, 0
    spec = TinyModelSpec(hidden_size=256, num_layers=4, num_heads=8, num_kv_heads=4, head_dim=32,
                         intermediate_size=512)
    model = build_tiny_qwen3(spec, vocab_size=vocab, pad_token_id=pad, bos_token_id=2, eos_token_id=3, seed=args.seed)
    params = sum(p.numel() for p in model.parameters())
    g = torch.Generator().manual_seed(args.seed)
    prompts = [[2] + torch.randint(4, vocab, (int(torch.randint(15, 48, (1,), generator=g)),), generator=g).tolist()
               for _ in range(args.prompts)]
    cands = [[torch.randint(4, vocab, (3,), generator=g).tolist() for _ in range(4)] for _ in prompts]
    sampling = SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens)
    dtype = getattr(torch, args.dtype)

    def timed(generator) -> tuple[list[float], list[float], list[float]]:
        generator.generate(prompts, sampling, torch.Generator().manual_seed(10**6))  # warm-up, not timed
        generator.score(prompts, cands)
        rates, score_s, sync_s = [], [], []
        for r in range(args.repeats):
            start = time.perf_counter()
            out = generator.generate(prompts, sampling, torch.Generator().manual_seed(r))
            seconds = time.perf_counter() - start
            assert all(len(o.token_ids) == args.new_tokens for o in out)
            rates.append(sum(len(o.token_ids) for o in out) / seconds)
            start = time.perf_counter()
            generator.score(prompts, cands)
            score_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            generator.load_policy_state(model.state_dict())
            sync_s.append(time.perf_counter() - start)
        return rates, score_s, sync_s

    load_start = os.getloadavg()[0]
    results = {}
    hf = HFGenerator(model.to(dtype), pad)
    results["hf"] = timed(hf)
    del hf
    with tempfile.TemporaryDirectory() as tmp:
        directory = save_policy(model, build_tokenizer(["benchmark corpus"]), os.path.join(tmp, "policy"))
        start = time.perf_counter()
        gen = VLLMGenerator(directory, dtype=args.dtype, max_model_len=256)
        build = time.perf_counter() - start
        try:
            results["vllm"] = timed(gen)
        finally:
            gen.close()

    print()
    print(f"load average (1 min) at the start {load_start:.2f}, at the end {os.getloadavg()[0]:.2f}")
    print(f"model: tiny Qwen3, {params / 1e6:.2f}M parameters, {args.dtype}; {args.prompts} prompts of "
          f"{min(map(len, prompts))}-{max(map(len, prompts))} tokens x {args.new_tokens} new tokens, temperature 1; "
          f"torch threads (HF) {torch.get_num_threads()}, CPUs {os.cpu_count()}; vLLM engine build {build:.1f} s")
    header = f"{'generator':<10} {'rollout tok/s median':>21} {'min':>9} {'max':>9} {'score s':>9} {'sync s':>9}"
    print(header)
    print("-" * len(header))
    for name, (rates, score_s, sync_s) in results.items():
        print(f"{name:<10} {statistics.median(rates):>21.0f} {min(rates):>9.0f} {max(rates):>9.0f} "
              f"{statistics.median(score_s):>9.3f} {statistics.median(sync_s):>9.3f}")
    ratio = statistics.median(results["vllm"][0]) / statistics.median(results["hf"][0])
    print(f"vLLM / HF rollout tokens/s (medians of {args.repeats}): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
