"""Bytes a training step keeps per activation and per logit, measured on this machine's CPU.

Usage: ``python benchmarks/bench_memory_terms.py [--precision bf16|fp32] [--part activations|logits]``
(each measurement in a fresh process; the default runs all four).

``mage doctor`` estimates a step's memory as weights + gradients + optimizer +
reference + activations + logits (mage_core/backends/memory.py). Its two
per-token coefficients are measured here, device-independently, from a
process's peak resident memory (``ru_maxrss``; tensors this large are mapped
and unmapped whole, so the peak is theirs):

- activations: what the forward of one Qwen3 decoder layer (Qwen3-0.6B's
  dimensions, Hugging Face's implementation, torch's fused attention) keeps for
  the backward pass, in bytes per token per hidden unit (the ``c`` of
  ``s*b*h*c``): the peak of a two-layer forward minus the peak of a one-layer
  forward, over s*b*h;
- logits: the peak of the torch engine's dense log-probability + entropy path
  (``torch_engine.evaluate_flat``, what a step runs), forward and backward, over
  the number of logit values Q x V (the output layer's weight frozen, so its
  gradient, a term of its own, is not counted).

On a GPU ``benchmarks/gpu_check.py`` measures the same step's peak with the
allocator's own statistics (docs/scale-out.md has both).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DIMS = dict(hidden_size=1024, intermediate_size=3072, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
            tie_word_embeddings=True, max_position_embeddings=4096)


def peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(part: str, precision: str, layers: int) -> dict[str, float]:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.set_num_threads(2)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    vocab = 151_936 if part == "logits" else 64
    torch.set_default_dtype(dtype)  # built in its precision: no wider copy ever raises the peak
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=vocab, num_hidden_layers=layers, **DIMS))
    torch.set_default_dtype(torch.float32)
    if part == "activations":
        b, s = 2, 2048
        ids = torch.randint(0, vocab, (b, s))
        base = peak_bytes()
        hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state
        return {"peak_over_base": peak_bytes() - base, "tokens_x_hidden": b * s * DIMS["hidden_size"],
                "hidden": hidden.numel()}
    from mage_core.backends.base import Sample
    from mage_core.backends.torch_engine import evaluate_flat

    # The output layer's (tied) weight takes no gradient here: its V x h gradient is a term of its own
    # (``gradients``), not the logits'.
    model.get_output_embeddings().weight.requires_grad_(False)
    q = 256  # scored positions (one row of a free response)
    sample = Sample(prompt=[1] * 8, advantage=1.0, response=list(range(2, q + 2)))
    base = peak_bytes()
    logp, entropy = evaluate_flat(model, [sample], with_entropy=True)
    (logp.sum() + entropy.sum()).backward()
    return {"peak_over_base": peak_bytes() - base, "values": q * vocab}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", choices=["bf16", "fp32"])
    parser.add_argument("--part", choices=["activations", "logits"])
    parser.add_argument("--layers", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.part, args.precision, args.layers)))
        return

    def run(part: str, precision: str, layers: int) -> dict[str, float]:
        # A fixed mmap threshold: every large tensor is mapped when made and unmapped when freed, so the
        # process's peak resident memory is the peak of its live tensors.
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}
        out = subprocess.run([sys.executable, __file__, "--child", "--part", part, "--precision", precision,
                              "--layers", str(layers)], capture_output=True, text=True, check=True, env=env).stdout
        return json.loads(out.strip().splitlines()[-1])

    for precision in [args.precision] if args.precision else ["bf16", "fp32"]:
        for part in [args.part] if args.part else ["activations", "logits"]:
            if part == "activations":
                one, two = run(part, precision, 1), run(part, precision, 2)
                per_layer = (two["peak_over_base"] - one["peak_over_base"]) / one["tokens_x_hidden"]
                print(f"{precision} activations: {per_layer:.1f} bytes per token per hidden unit per layer "
                      f"(Qwen3-0.6B dimensions, 2 x 2048 tokens)")
            else:
                r = run(part, precision, 1)
                print(f"{precision} logits: {r['peak_over_base'] / r['values']:.1f} bytes per logit value "
                      f"(dense log-probabilities + entropy, forward and backward; 256 x 151,936 values)")


if __name__ == "__main__":
    main()
