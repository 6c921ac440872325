"""The checks of benchmarks/gpu_check.py, each run in a process of its own by its orchestrator
(``gpu_check.py --part NAME``): what each measures is listed in gpu_check.py's docstring. Each
check takes the parsed command line (``--device``, ``--size``, ``--work``) and returns its
figures as a JSON-able dict, or raises with the reason."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GIB = 1024**3

#: Qwen3-0.6B's dimensions (its config.json); the vocabulary is the real one in the memory checks only.
REAL = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
            num_key_value_heads=8, head_dim=128, rope_theta=1_000_000.0, tie_word_embeddings=True)
QWEN3_VOCAB = 151_936
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, rope_theta=1_000_000.0, tie_word_embeddings=True)
#: The memory check's micro-batch: rows x tokens, scored (response) positions per row.
MEMORY_SHAPE = {"real": (8, 2048, 512), "tiny": (4, 256, 64)}
ENGINES = {"torch": ("torch", 0), "ds2": ("deepspeed", 2), "ds3": ("deepspeed", 3)}
CHUNK = 1024


# ----------------------------------------------------------------------------- helpers inside a check
def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _mage(args: argparse.Namespace, command: list[str], sets: list[str]) -> float:
    """``mage COMMAND`` as a user runs it, on the check's device, a few evaluation meta-episodes;
    its seconds (an error with the end of its output if it fails)."""
    gpus = 1 if args.device == "cuda" else 0
    cmd = [sys.executable, "-m", "mage_core", *command]
    for s in [f"backend.gpus={gpus}", "tracking.mlflow=false", "evaluation.meta_episodes_per_opponent_seat=4", *sets]:
        cmd += ["--set", s]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n", flush=True)
    if proc.returncode != 0:
        raise RuntimeError(f"mage {command[0]} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-1500:]}")
    return wall


def _mage_train(args: argparse.Namespace, out: Path, sets: list[str], iterations: int) -> dict[str, Any]:
    """``mage train`` as a user runs it, on the check's device; its outputs read back."""
    wall = _mage(args, ["train", "--out", str(out), "--iterations", str(iterations)],
                 ["train.eval_every=0", "train.checkpoint_every=1", *sets])
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "train/ppo/loss" in r]
    losses = [r["train/ppo/loss"] for r in steps]
    if len(steps) != iterations or not all(math.isfinite(x) for x in losses):
        raise RuntimeError(f"metrics.jsonl: {len(steps)} iteration rows of {iterations}, losses {losses}")
    summary = json.loads((out / "summary.json").read_text())
    from mage_core.policy.model import load_policy

    model, _ = load_policy(out / "best")
    import torch

    finite = all(bool(torch.isfinite(p.float()).all()) for p in model.parameters())
    if not finite:
        raise RuntimeError("best/ holds non-finite weights")
    return {"wall_s": round(wall, 1), "iterations": iterations, "last_loss": losses[-1],
            "grad_norm": steps[-1].get("train/ppo/grad_norm"), "best_iteration": summary.get("best_iteration"),
            "best_score": summary.get("best_score"), "parameters": sum(p.numel() for p in model.parameters())}


def _real_config(size: str, vocab: int, tokenizer: Any = None) -> Any:
    from transformers import Qwen3Config

    dims = REAL if size == "real" else TINY
    ids = {} if tokenizer is None else dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                                            eos_token_id=tokenizer.eos_token_id)
    return Qwen3Config(vocab_size=vocab, max_position_embeddings=4096, **dims, **ids)


# ----------------------------------------------------------------------------- the checks
def check_equivalence(args: argparse.Namespace) -> dict[str, Any]:
    """The CPU test's engine equivalence case, on the device."""
    import torch

    from mage_core.backends.deepspeed_engine import DeepSpeedEngine
    from mage_core.backends.torch_engine import TorchEngine
    from tests.integration.test_deepspeed_engine import ATOL, batches, max_difference, tiny_model, train

    common = dict(learning_rate=3e-3, weight_decay=0.01, max_grad_norm=0.5, max_tokens_per_micro_batch=64,
                  reference_model="copy")
    data = batches(seed=1)

    def make(stage: int | None) -> Any:
        model = tiny_model().to(args.device)
        return TorchEngine(model, **common) if stage is None else DeepSpeedEngine(model, **common, zero_stage=stage)

    reference = make(None)
    ref_metrics = train(reference, data)
    moved = max_difference(make(None), reference)
    result: dict[str, Any] = {"bound": ATOL, "moved": moved}
    worst_metric = 0.0  # the CPU test's approx(rel=1e-5, abs=1e-7): |d - r| / max(1e-5 |r|, 1e-7), at most 1
    for stage in (0, 2, 3):
        ds = make(stage)
        metrics = train(ds, data)
        result[f"zero{stage}_max_param_diff"] = max_difference(reference, ds)
        for r, d in zip(ref_metrics, metrics):
            for key in ("loss", "pg_loss", "entropy", "kl", "clip_frac", "grad_norm"):
                worst_metric = max(worst_metric, abs(d[key] - r[key]) / max(1e-5 * abs(r[key]), 1e-7))
        del ds
        if args.device == "cuda":
            torch.cuda.empty_cache()
    result["metrics_vs_tolerance"] = worst_metric
    worst = max(result[f"zero{s}_max_param_diff"] for s in (0, 2, 3))
    result["ok"] = bool(worst < ATOL and worst_metric <= 1.0 and moved > 1e-3)
    if not result["ok"]:
        raise AssertionError(f"DeepSpeed vs torch engine: max parameter difference {worst:.3g} (bound {ATOL}), "
                             f"metrics {worst_metric:.3g} of their tolerance, weights moved {moved:.3g}: {result}")
    return result


def check_train_kuhn(args: argparse.Namespace) -> dict[str, Any]:
    return _mage_train(args, args.work / "train_kuhn", ["env.name=kuhn_poker", "train.groups_per_iteration=8"], 3)


def check_train_sokoban(args: argparse.Namespace) -> dict[str, Any]:
    """``mage sft --task sokoban`` (a small warm start), then ``mage train`` from it, both on the device."""
    sft_root = args.work / "sft"
    sft_wall = _mage(args, ["sft", "--task", "sokoban", "--out", str(sft_root / "sokoban")],
                     ["warm_start.meta_episodes=8", "warm_start.epochs=1"])
    sft_summary = json.loads((sft_root / "sokoban" / "summary.json").read_text())
    result = _mage_train(args, args.work / "train_sokoban", ["env.name=sokoban", "rollout.restart=same",
                                                             "train.groups_per_iteration=2",
                                                             f"warm_start.output_dir={sft_root}"], 2)
    losses = sft_summary["loss_by_epoch"]
    if not all(math.isfinite(x) for x in losses):
        raise RuntimeError(f"mage sft: non-finite cloning loss {losses}")
    return {**result, "sft_wall_s": round(sft_wall, 1), "sft_decisions": sft_summary["demonstrations"]["decisions"],
            "sft_loss": losses[-1]}


def check_build_real(args: argparse.Namespace) -> dict[str, Any]:
    """A random Qwen3 of the chosen dimensions with the embedded tokenizer, saved as a model folder."""
    import torch

    from mage_core.config import load_config
    from mage_core.policy.model import save_policy
    from mage_core.stages.train import build_policy

    cfg = load_config(str(ROOT / "params.yaml"))
    tokenizer, _ = build_policy(cfg, args.work / "tokenizer")
    from transformers import Qwen3ForCausalLM

    config = _real_config(args.size, len(tokenizer), tokenizer)
    started = time.perf_counter()
    torch.manual_seed(0)
    with torch.device(args.device):
        model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    save_policy(model.cpu(), tokenizer, args.work / "real")
    return {"parameters": sum(p.numel() for p in model.parameters()), "vocab": len(tokenizer),
            "dims": {k: v for k, v in config.to_dict().items() if k in REAL}, "build_s": round(time.perf_counter() - started, 1)}


def _train_real(args: argparse.Namespace, engine: str, chunk: int) -> dict[str, Any]:
    kind, stage = ENGINES[engine]
    sets = ["env.name=kuhn_poker", "train.groups_per_iteration=4", "model.source=local",
            f"model.path={args.work / 'real'}", "model.dtype=bfloat16", f"backend.engine={kind}",
            f"backend.logits_chunk_tokens={chunk}", "train.learning_rate=1e-5"]
    if kind == "deepspeed":
        sets += [f"backend.zero_stage={stage}", "backend.precision=bf16"]
    return _mage_train(args, args.work / f"train_real_{engine}_{chunk}", sets, 2)


def check_memory(args: argparse.Namespace, engine: str, chunk: int) -> dict[str, Any]:
    """One training step's peak memory against doctor's estimate, and the update's speed."""
    import torch

    from mage_core.backends.base import LossSettings, Sample
    from mage_core.backends.memory import ModelShape, training_memory
    from transformers import Qwen3ForCausalLM

    kind, stage = ENGINES[engine]
    rows, seq, scored = MEMORY_SHAPE[args.size]
    vocab = QWEN3_VOCAB if args.size == "real" else 512
    config = _real_config(args.size, vocab)
    torch.manual_seed(0)
    with torch.device(args.device):
        model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    g = torch.Generator().manual_seed(0)
    batch = [Sample(prompt=torch.randint(3, vocab, (seq + 1 - scored,), generator=g).tolist(),
                    advantage=float(torch.randn(1, generator=g)),
                    response=torch.randint(3, vocab, (scored,), generator=g).tolist()) for _ in range(rows)]
    cuda = args.device == "cuda"
    allocated = torch.cuda.memory_allocated if cuda else (lambda: 0)
    # The bare forward+backward of the same rows on the plain model, before an engine hooks it (no loss
    # terms, no optimizer); on CUDA it also measures what the forward keeps for the backward pass.
    ids = torch.tensor([s.prompt + s.response[:-1] for s in batch], device=args.device)
    pos = torch.arange(seq - scored, seq, device=args.device)
    bare, saved = [], None
    for _ in range(3):
        _sync(args.device)
        t0, before = time.perf_counter(), allocated()
        hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state
        saved = allocated() - before
        logits = model.lm_head(hidden[:, pos]).float()
        torch.log_softmax(logits, -1).sum().backward()
        _sync(args.device)
        bare.append(time.perf_counter() - t0)
        del hidden, logits
        model.zero_grad(set_to_none=True)
    common = dict(learning_rate=1e-5, max_grad_norm=1.0, max_tokens_per_micro_batch=rows * seq,
                  reference_model="copy", logits_chunk_tokens=chunk)
    if kind == "torch":
        from mage_core.backends.torch_engine import TorchEngine

        eng = TorchEngine(model, **common)
    else:
        from mage_core.backends.deepspeed_engine import DeepSpeedEngine

        eng = DeepSpeedEngine(model, **common, zero_stage=stage, precision="bf16", micro_batch_size=rows)
    loss = LossSettings(clip_ratio=0.2, entropy_coef=0.001, kl_coef=0.1)
    old = eng.logprobs(batch)
    ref = eng.logprobs(batch, policy="reference")
    if cuda:
        _sync("cuda")
        torch.cuda.reset_peak_memory_stats()
    start = allocated()
    eng.step(batch, old, ref, loss)  # the first step allocates the optimizer state too
    _sync(args.device)
    peak = torch.cuda.max_memory_allocated() if cuda else None
    held = allocated()  # weights, reference, optimizer state (and whatever the engine keeps) between steps
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        eng.step(batch, old, ref, loss)
        _sync(args.device)
        times.append(time.perf_counter() - t0)
    step_s = min(times)
    shape = ModelShape.from_hf_config(config.to_dict())
    est = training_memory(shape, gpus=1, zero_stage=stage, precision="bf16", offload_optimizer=False,
                          micro_batch=rows, seq_len=seq, gradient_checkpointing=False, flash_attention=cuda,
                          reference_model=True, scored_positions=scored, logits_chunk=chunk)
    tokens = rows * seq
    return {"engine": engine, "logits_chunk": chunk, "parameters": shape.parameters(),
            "micro_batch": f"{rows} x {seq} ({scored} scored)", "peak_gib": None if peak is None else peak / GIB,
            "estimate_gib": est.gpu_total / GIB,
            "estimate_terms_gib": {k: getattr(est, k) / GIB for k in ("weights", "gradients", "optimizer",
                                                                     "reference", "activations", "logits")},
            "estimate_over_peak": None if peak is None else est.gpu_total / peak,
            "measured_gib": None if not cuda else {"before_step": start / GIB, "between_steps": held / GIB,
                                                   "forward_saved": saved / GIB,
                                                   "step_peak_over_held": (peak - held) / GIB},
            "update_tokens_per_s": tokens / step_s, "bare_fwd_bwd_tokens_per_s": tokens / min(bare),
            "update_over_bare": step_s / min(bare)}


def _bare_generate(model: Any, turns: list[list[Any]], pad: int, device: str) -> tuple[float, int]:
    """Seconds and tokens of HF's own ``generate`` (greedy, KV cache) over the same prompts, turn by
    turn, each batch as many new tokens as its longest response."""
    import torch

    seconds, tokens = 0.0, 0
    for decisions in turns:
        n = max(len(d.response_ids) for d in decisions)
        length = max(len(d.prompt_ids) for d in decisions)
        ids = torch.full((len(decisions), length), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, d in enumerate(decisions):  # left-padded, as generate wants
            ids[i, length - len(d.prompt_ids):] = torch.tensor(d.prompt_ids)
            mask[i, length - len(d.prompt_ids):] = 1
        ids, mask = ids.to(device), mask.to(device)
        _sync(device)
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                           pad_token_id=pad, use_cache=True)
        _sync(device)
        seconds += time.perf_counter() - t0
        tokens += n * len(decisions)
    return seconds, tokens


def check_speed(args: argparse.Namespace) -> dict[str, Any]:
    """The rollout (free text, HF generate) and the update of the Qwen3-0.6B-dimension model on the
    device: tokens/s, against HF's bare ``generate`` over the same prompts and against the bare
    forward+backward of the same rows (``bench_train_speed.bare_passes``)."""
    import numpy as np
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_train_speed import PHASES, bare_passes, build

    gpus = 1 if args.device == "cuda" else 0
    sets = [f"backend.gpus={gpus}", "tracking.mlflow=false", "model.source=local", f"model.path={args.work / 'real'}",
            "model.dtype=bfloat16", "policy.action_mode=free", "train.groups_per_iteration=4",
            "train.learning_rate=1e-5"]
    with tempfile.TemporaryDirectory() as tmp:
        cfg, trainer, model = build(str(ROOT / "params.yaml"), "kuhn_poker", sets, Path(tmp))
        rng, torch_rng = np.random.default_rng(0), torch.Generator().manual_seed(0)
        trainer.iteration(0, rng, torch_rng)  # warm-up
        rows = [trainer.iteration(1, rng, torch_rng)]
        phase = {p: min(r[f"train/time/{p}"] for r in rows) for p in PHASES}
        _sync(args.device)
        t0 = time.perf_counter()
        metas = trainer.rollout(trainer.sample_specs(rng), trainer.train_settings, trainer.train_sampling(),
                                torch_rng)
        _sync(args.device)
        rollout_s = time.perf_counter() - t0
        by_turn: dict[int, list[Any]] = {}
        for meta in metas:
            for t, d in enumerate(meta.decisions):
                by_turn.setdefault(t, []).append(d)
        generated = sum(len(d.response_ids or ()) for m in metas for d in m.decisions)
        bare_gen_s, bare_gen_tokens = _bare_generate(trainer.generator.model, list(by_turn.values()),
                                                     int(model.config.pad_token_id or 0), args.device)
        _, bare_update, _, update_tokens = bare_passes(model, trainer, cfg, rng, torch_rng, repeats=1)
        trainer.close()
    update_s = phase["iteration_s"] - phase["rollout_s"]
    return {"meta_episodes": len(metas), "turns": len(by_turn), "phases_s": phase,
            "rollout_s": rollout_s, "rollout_tokens": generated, "rollout_tokens_per_s": generated / rollout_s,
            "bare_generate_s": bare_gen_s, "bare_generate_tokens": bare_gen_tokens,
            "bare_generate_tokens_per_s": bare_gen_tokens / bare_gen_s,
            "rollout_over_bare": (bare_gen_tokens / bare_gen_s) / (generated / rollout_s),
            "update_s": update_s, "update_tokens": update_tokens, "update_tokens_per_s": update_tokens / update_s,
            "bare_update_s": bare_update, "bare_update_tokens_per_s": update_tokens / bare_update,
            "update_over_bare": update_s / bare_update}


def checks() -> dict[str, Callable[[argparse.Namespace], dict[str, Any]]]:
    checks: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
        "equivalence": check_equivalence, "train_kuhn": check_train_kuhn, "train_sokoban": check_train_sokoban,
        "build_real": check_build_real}
    checks["train_kuhn_ds2_bf16"] = lambda a: _mage_train(
        a, a.work / "train_kuhn_ds2_bf16", ["env.name=kuhn_poker", "train.groups_per_iteration=8",
                                            "backend.engine=deepspeed", "backend.zero_stage=2",
                                            "backend.precision=bf16"], 2)
    for engine, chunk in (("torch", 0), ("ds2", CHUNK), ("ds3", 0)):
        checks[f"train_real_{engine}_{chunk}"] = lambda a, e=engine, c=chunk: _train_real(a, e, c)
    for engine in ENGINES:
        for chunk in (0, CHUNK):
            checks[f"memory_{engine}_{chunk}"] = lambda a, e=engine, c=chunk: check_memory(a, e, c)
    checks["speed"] = check_speed
    return checks


#: The untimed checks, in rounds: each round's chains run side by side (each chain in order), a round
#: after the one before it. Then the timed checks, alone and in order.
PARALLEL_ROUNDS = [[["equivalence"], ["train_kuhn", "train_sokoban", "train_kuhn_ds2_bf16"], ["build_real"]],
                   [["train_real_torch_0"], ["train_real_ds2_1024"], ["train_real_ds3_0"]]]
TIMED = ["speed"] + [f"memory_{e}_{c}" for e in ENGINES for c in (0, CHUNK)]
NEEDS = {name: "build_real" for name in ("train_real_torch_0", "train_real_ds2_1024", "train_real_ds3_0", "speed")}
