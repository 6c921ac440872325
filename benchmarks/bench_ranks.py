"""Rollout and update time per training iteration on 1, 2 and 3 data-parallel ranks (CPU, gloo).

    python benchmarks/bench_ranks.py [--ranks 1 2 3] [--iterations 4] [--game kuhn_poker]
                                     [--groups 12] [--group-size 8] [--zero-stage 2]

For each ``--ranks`` value, ``torchrun`` starts that many processes running the real
trainer (``MetaRLTrainer`` on the DeepSpeed engine, the embedded tiny Qwen3, one
thread per rank), exactly as ``mage train`` with ``backend.ranks`` does; after one
warm-up iteration, ``--iterations`` iterations are timed and rank 0 reports the
medians of the trainer's own timings: rollout (each rank plays its share, then the
shares are gathered), log-probs, update (PPO steps with the gradients averaged over
ranks) and the whole iteration. The speed-up is the 1-rank iteration time over the
N-rank one, the efficiency that speed-up over N.

What this does and does not say: on this 2-core machine a third rank has no core of
its own, so 3 ranks measure the cost of oversubscription, not scaling; and the
tiny model makes the exchange (pickled meta-episodes, gradient all-reduce over
gloo) weigh far more against the compute than on GPUs, where each rank's rollout
and update take seconds to minutes and NCCL moves gradients at hundreds of GB/s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

KEYS = ("rollout_s", "logprobs_s", "update_s", "iteration_s")


def child(args: argparse.Namespace) -> None:
    import numpy as np
    import torch

    from mage_core.config import parse_config
    from mage_core.stages.train import build_policy, join_ranks, make_codec, make_engine, make_generator
    from mage_core.trainers.data_parallel import launched_world
    from mage_core.trainers.meta_rl import MetaRLTrainer

    world = launched_world()
    cfg = parse_config({
        "env": {"name": args.game},
        "train": {"iterations": args.iterations + 1, "groups_per_iteration": args.groups, "num_threads": 1},
        "algorithm": {"group_size": args.group_size},
        "backend": {"engine": "deepspeed", "zero_stage": args.zero_stage, "ranks": world},
        "tournament": {"matches": []},
        "tracking": {"mlflow": False},
    })
    torch.set_num_threads(1)
    ranks = join_ranks(world)
    out = Path(args.out)
    if ranks.main:
        tokenizer, model = build_policy(cfg, out)
    ranks.barrier()
    if not ranks.main:
        tokenizer, model = build_policy(cfg, out)
    generator = make_generator(cfg, tokenizer, out / "policy-init", model)
    engine = make_engine(cfg, model)
    trainer = MetaRLTrainer(cfg, engine, generator, make_codec(tokenizer, cfg.policy), ranks)
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 1]))
    torch_rng = torch.Generator().manual_seed(cfg.seed)
    times: dict[str, list[float]] = {k: [] for k in KEYS}
    for it in range(args.iterations + 1):
        metrics = trainer.iteration(it, rng, torch_rng)
        if it == 0:
            continue  # warm-up: first forward passes, DeepSpeed's first step
        for key in KEYS:
            times[key].append(metrics[f"train/time/{key}"])
    if ranks.main:
        (out / "times.json").write_text(json.dumps(times))
    ranks.barrier()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--game", default="kuhn_poker")
    parser.add_argument("--groups", type=int, default=12, help="train.groups_per_iteration")
    parser.add_argument("--group-size", type=int, default=8, help="algorithm.group_size")
    parser.add_argument("--zero-stage", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    from rich.console import Console
    from rich.table import Table

    batch = args.groups * args.group_size
    results: dict[int, dict[str, float]] = {}
    for n in args.ranks:
        if batch % n:
            raise SystemExit(f"--ranks {n} does not divide the batch of {batch} meta-episodes")
        with tempfile.TemporaryDirectory() as tmp:
            command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                       "--nproc-per-node", str(n), __file__, "--child", "--out", tmp,
                       "--iterations", str(args.iterations), "--game", args.game, "--groups", str(args.groups),
                       "--group-size", str(args.group_size), "--zero-stage", str(args.zero_stage)]
            env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
            subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
            times = json.loads((Path(tmp) / "times.json").read_text())
        results[n] = {k: statistics.median(v) for k, v in times.items()}
    table = Table(title=f"{args.game}: {batch} meta-episodes per iteration, ZeRO-{args.zero_stage}, medians of "
                        f"{args.iterations} iterations (s)")
    for column in ("ranks", "rollout", "log-probs", "update", "iteration", "speed-up", "efficiency"):
        table.add_column(column, justify="right")
    base = results[min(results)]["iteration_s"] * min(results)
    for n, r in results.items():
        speedup = base / r["iteration_s"]
        table.add_row(str(n), f"{r['rollout_s']:.2f}", f"{r['logprobs_s']:.2f}", f"{r['update_s']:.2f}",
                      f"{r['iteration_s']:.2f}", f"{speedup:.2f}x", f"{speedup / n:.2f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
