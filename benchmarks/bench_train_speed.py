"""How fast is one training iteration, against the bare model passes over the same tokens?

Usage::

    python benchmarks/bench_train_speed.py                       # Kuhn Poker, CPU default, 1 thread
    python benchmarks/bench_train_speed.py --iterations 10 --set train.groups_per_iteration=32
    python benchmarks/bench_train_speed.py --game tic_tac_toe --iterations 3
    python benchmarks/bench_train_speed.py --reference ../shared/reference/kuhn_design.py
    python benchmarks/bench_train_speed.py --iterations 10 --op-profile 12   # where the update's time goes
    python benchmarks/bench_train_speed.py --iterations 10 --autocast bfloat16

Builds the trainer exactly as ``mage train`` does (params.yaml + ``--set``), runs
one warm-up iteration, then times ``--iterations`` iterations phase by phase
(rollout, samples, old log-probs, update: the ``train/time/*`` metrics). Then it
replays the last iteration's tokens through the bare model in one run:

- rollout: one no-grad forward per turn over the prompts the policy answered at
  that turn (right-padded, no mask, the last position's logits only);
- update: forward + backward over the rows the engine packs the samples into,
  mini-batch by mini-batch and micro-batch by micro-batch as the engine cuts
  them, ``ppo_epochs`` times (a sum of the queried log-softmax as the loss).

and prints the ratio iteration / bare passes: how much the Python around the
model costs. Absolute figures depend on the machine; the ratios do not.
``--reference`` also runs the standalone Kuhn design for ``--reference-minutes``
on the same thread count and prints meta-episodes/s of both and their ratio.
Nothing is written (the run lives in a temporary folder).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mage_core.config import apply_overrides, load_config, parse_config  # noqa: E402

PHASES = ("rollout_s", "samples_s", "logprobs_s", "update_s", "iteration_s")


def build(params: str, game: str, overrides: list[str], out: Path):
    from mage_core.stages.train import build_policy, make_codec, make_engine, make_generator, stage_device
    from mage_core.trainers.meta_rl import MetaRLTrainer

    data = load_config(params).model_dump(mode="json")
    data["env"]["name"] = game
    data["tournament"] = {"matches": []}
    cfg = parse_config(apply_overrides(data, overrides), "benchmark overrides")
    torch.set_num_threads(cfg.train.num_threads)
    tokenizer, model = build_policy(cfg, out)
    model.to(stage_device(cfg))  # as `mage train` places it (backend.gpus)
    generator = make_generator(cfg, tokenizer, out / "policy-init", model)
    engine = make_engine(cfg, model)
    return cfg, MetaRLTrainer(cfg, engine, generator, make_codec(tokenizer, cfg.policy)), model


def _batch_tensors(samples):
    from mage_core.backends.torch_engine import _plan, right_padded

    plan = _plan(samples)
    return right_padded(plan.rows), torch.tensor(plan.q_row), torch.tensor(plan.q_pos)


def bare_passes(model: torch.nn.Module, trainer, cfg, rng: np.random.Generator, torch_rng: torch.Generator,
                repeats: int, op_profile: int = 0, autocast: str | None = None) -> tuple[float, float, int, int]:
    """Seconds of the bare rollout forwards and update forward+backwards over one
    iteration's tokens (median of ``repeats``), and the token counts of each.
    ``op_profile`` > 0: then print the ``op_profile`` operators that took the most self CPU
    time in one more update pass (torch.profiler). ``autocast`` (``bfloat16``): run every
    pass under ``torch.autocast`` with that dtype (what lower-precision kernels would save)."""
    from mage_core.backends.torch_engine import micro_batches
    from mage_core.trainers.batch import build_samples

    metas = trainer.rollout(trainer.sample_specs(rng), trainer.train_settings, trainer.train_sampling(), torch_rng)
    by_turn: dict[int, list[list[int]]] = {}
    for meta in metas:
        for t, d in enumerate(meta.decisions):
            by_turn.setdefault(t, []).append(d.prompt_ids)
    turn_batches = []
    for prompts in by_turn.values():
        length = max(len(p) for p in prompts)
        ids = torch.zeros((len(prompts), length), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, : len(p)] = torch.tensor(p)
        turn_batches.append(ids)
    samples = build_samples(metas, trainer.advantage_settings)
    budget = cfg.train.max_tokens_per_micro_batch
    # The same mini-batches of whole meta-episodes as the update (their order does
    # not change the cost), each cut into micro-batches by the same token budget.
    bounds = np.cumsum([0] + [len(m.decisions) for m in metas])
    update_batches = []
    for chunk in np.array_split(np.arange(len(metas)), cfg.train.mini_batches_per_epoch):
        mini = [samples[i] for k in chunk for i in range(int(bounds[k]), int(bounds[k + 1]))]
        update_batches += [_batch_tensors([mini[i] for i in batch]) for batch in micro_batches(mini, budget)]
    device = next(model.parameters()).device
    turn_batches = [ids.to(device) for ids in turn_batches]
    update_batches = [tuple(t.to(device) for t in batch) for batch in update_batches]
    rollout_tokens = sum(int(b.numel()) for b in turn_batches)
    update_tokens = sum(int(b[0].numel()) for b in update_batches) * cfg.train.ppo_epochs

    def rollout_pass() -> None:
        with torch.no_grad():
            for ids in turn_batches:
                model(input_ids=ids, use_cache=False, logits_to_keep=1)

    def update_pass() -> None:
        for _ in range(cfg.train.ppo_epochs):
            for ids, q_row, q_pos in update_batches:
                hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state
                logits = model.lm_head(hidden[q_row, q_pos])
                torch.log_softmax(logits, -1).sum().backward()
        model.zero_grad(set_to_none=True)

    def sync() -> None:  # GPU work is asynchronous: wait for it before reading the clock
        if device.type == "cuda":
            torch.cuda.synchronize()

    def within(fn):  # the pass, under autocast when asked
        if autocast is None:
            return fn()
        with torch.autocast(device.type, dtype=getattr(torch, autocast)):
            return fn()

    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        within(rollout_pass)
        sync()
        t1 = time.perf_counter()
        within(update_pass)
        sync()
        times.append((t1 - t0, time.perf_counter() - t1))
    if op_profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            within(update_pass)
        print(f"one bare update pass ({cfg.train.ppo_epochs} epoch(s), {len(update_batches)} micro-batch(es): "
              f"{', '.join('x'.join(map(str, b[0].shape)) for b in update_batches)}), operators by self CPU time:")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=op_profile))
    return (statistics.median(t[0] for t in times), statistics.median(t[1] for t in times),
            rollout_tokens, update_tokens)


def reference_rate(script: str, minutes: float, threads: int) -> float:
    """Meta-episodes per second of the standalone design over ``minutes`` of training."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "design.jsonl"
        subprocess.run([sys.executable, script, "--minutes", str(minutes), "--eval_every", "100000",
                        "--threads", str(threads), "--seed", "0", "--out", str(out)], check=True,
                       capture_output=True, text=True)
        return float(json.loads(out.read_text().splitlines()[-1])["eps_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    parser.add_argument("--game", default="kuhn_poker", choices=["kuhn_poker", "tic_tac_toe", "sokoban"])
    parser.add_argument("--iterations", type=int, default=5, help="timed iterations (after one warm-up)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a params key")
    parser.add_argument("--reference", metavar="SCRIPT", help="the standalone Kuhn design, to compare rates")
    parser.add_argument("--reference-minutes", type=float, default=1.0)
    parser.add_argument("--op-profile", type=int, default=0, metavar="N",
                        help="also print the N operators with the most self CPU time in one bare update pass")
    parser.add_argument("--autocast", choices=["bfloat16"],
                        help="run the bare passes under torch.autocast with this dtype (the trainer's own stay as configured)")
    args = parser.parse_args()
    if args.iterations < 1:
        parser.error("--iterations must be >= 1")
    if args.op_profile < 0:
        parser.error("--op-profile must be >= 0 (0: no profile)")

    with tempfile.TemporaryDirectory() as tmp:
        cfg, trainer, model = build(args.params, args.game, args.set, Path(tmp))
        rng = np.random.default_rng(0)
        torch_rng = torch.Generator().manual_seed(0)
        trainer.iteration(0, rng, torch_rng)  # warm-up
        rows = [trainer.iteration(i + 1, rng, torch_rng) for i in range(args.iterations)]
        phase = {p: statistics.median(r[f"train/time/{p}"] for r in rows) for p in PHASES}
        metas_per_it = int(rows[0]["train/batch/num_meta_episodes"])
        bare_rollout, bare_update, rollout_tokens, update_tokens = bare_passes(
            model, trainer, cfg, rng, torch_rng, repeats=3, op_profile=args.op_profile, autocast=args.autocast)
        trainer.close()

    rate = metas_per_it / phase["iteration_s"]
    bare = bare_rollout + bare_update
    print(f"{args.game}, {metas_per_it} meta-episodes per iteration, {cfg.train.num_threads} thread(s), "
          f"median of {args.iterations} iterations")
    for p in PHASES:
        print(f"  {p:<13} {phase[p] * 1000:9.1f} ms")
    print(f"  meta-episodes/s {rate:9.1f}")
    print(f"bare model passes over the same tokens{f' (autocast {args.autocast})' if args.autocast else ''}: rollout {bare_rollout * 1000:.1f} ms ({rollout_tokens} tokens), "
          f"update {bare_update * 1000:.1f} ms ({update_tokens} tokens x fwd+bwd)")
    if args.autocast:
        print("no ratio: the trainer's iterations above ran as configured, not under autocast")
    else:
        print(f"ratio iteration / bare passes: {phase['iteration_s'] / bare:.2f}  "
              f"(rollout {phase['rollout_s'] / bare_rollout:.2f}, "
              f"samples+logprobs+update {(phase['iteration_s'] - phase['rollout_s']) / bare_update:.2f})")
    if args.reference:
        ref = reference_rate(args.reference, args.reference_minutes, cfg.train.num_threads)
        print(f"standalone design: {ref:.1f} meta-episodes/s; this project / design = {rate / ref:.2f}")


if __name__ == "__main__":
    main()
