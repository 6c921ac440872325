"""The GPU paths in one command: `mage train` on CUDA, memory against `mage doctor`, throughput, engine equivalence.

Usage (docs/scale-out.md "GPU check" says how it travels to a GPU machine)::

    python benchmarks/gpu_check.py --out DIR                 # on a CUDA machine (~10 min on one H200)
    python benchmarks/gpu_check.py --out DIR --device cpu    # its CPU twin (~4 min on 2 cores; slow test tier)

Each check runs in its own process (a crash or a hang costs that check only; CUDA
memory peaks are per process) and writes one JSON; at the end a table goes to
stdout and ``DIR/gpu_check.json``, ``DIR/gpu_check.md`` and ``DIR/gpu_check.log``
(every check's output) are written. The checks, in the order they run:

- ``equivalence``: the CPU equivalence test's case (tests/integration/
  test_deepspeed_engine.py: a tiny fp32 Qwen3, three PPO mini-batches) on the
  device: DeepSpeed ZeRO 0, 2 and 3 (world size 1; NCCL on CUDA, gloo on CPU)
  against the torch engine, max |parameter difference| against the CPU test's
  bound 1e-6, the step metrics within its relative 1e-5.
- ``train_kuhn``, ``train_sokoban``, ``train_kuhn_ds2_bf16``: ``mage train`` (the
  command line, as a user runs it) on the embedded model, ``backend.gpus: 1``, a
  few iterations (the last on DeepSpeed ZeRO-2 in bf16; Sokoban's from a small
  ``mage sft --task sokoban`` warm start made on the device first, as every
  Sokoban run starts from one); the outputs are read back (summary, finite
  losses, ``best/`` loads).
- ``build_real``, then ``train_real_*``: a random-initialised Qwen3 of
  Qwen3-0.6B's dimensions (28 layers, hidden 1024; the embedded tokenizer's
  vocabulary), bf16, saved as a local model folder (no download), and ``mage
  train`` on it with the torch engine and DeepSpeed ZeRO-2 and ZeRO-3, chunked
  log-probabilities off and on.
- ``memory_*``: one training step of a Qwen3-0.6B-sized model with the real
  vocabulary (151,936) on a fixed micro-batch (8 rows of 2,048 tokens, 512 of
  them scored) per engine x chunking: ``torch.cuda.max_memory_allocated`` of
  the step next to ``mage doctor``'s estimate (``backends.memory.training_memory``
  with the same shape and settings) and their ratio; the update's tokens/s next
  to a bare forward+backward of the same rows.
- ``speed``: ``benchmarks/bench_train_speed.py``'s measure on the device with the
  Qwen3-0.6B-dimension model in free-text mode: rollout (HF generate) and update
  tokens/s, and each phase against the bare model passes over the same tokens.

The untimed checks (equivalence and the training runs) run ``--jobs`` at once;
the timed checks (speed, then memory) run alone afterwards. ``--budget-s`` bounds the
whole run: a check that cannot start in time is reported as skipped. On CPU the
model sizes shrink (``--size tiny``) and no memory peak is read (there is no
allocator statistic); the twin runs every code path all the same.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_checks, beside this file, run as a script
from gpu_checks import GIB, NEEDS, PARALLEL_ROUNDS, ROOT, TIMED, checks  # noqa: E402


# ----------------------------------------------------------------------------- the orchestrator
def run_part(args: argparse.Namespace) -> int:
    """Inside a check's own process: run it, write its JSON."""
    result_path = Path(args.result)
    started = time.perf_counter()
    try:
        result = {"status": "ok", **checks()[args.part](args)}
    except Exception as exc:  # noqa: BLE001  (the orchestrator reports whatever broke)
        traceback.print_exc()
        result = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"[-2000:]}
    result["seconds"] = round(time.perf_counter() - started, 1)
    result_path.write_text(json.dumps(result, indent=1, default=str))
    return 0 if result["status"] == "ok" else 1


class Orchestrator:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.deadline = time.monotonic() + args.budget_s
        self.results: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.log = (args.out / "gpu_check.log").open("w")

    def part(self, name: str) -> dict[str, Any]:
        need = NEEDS.get(name)
        if need and self.results.get(need, {}).get("status") != "ok":
            return self._record(name, {"status": "skipped", "error": f"needs {need}, which did not succeed"})
        left = self.deadline - time.monotonic()
        if left < 20:
            return self._record(name, {"status": "skipped", "error": f"--budget-s {self.args.budget_s} spent"})
        a = self.args
        result_file = a.work / f"{name}.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--part", name, "--device", a.device, "--size",
               a.size, "--work", str(a.work), "--result", str(result_file), "--out", str(a.out)]
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
        started = time.perf_counter()
        print(f"  start {name}", flush=True)
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=left)
            output = proc.stdout + proc.stderr
            result = (json.loads(result_file.read_text()) if result_file.exists() else
                      {"status": "failed", "error": f"exited {proc.returncode} without a result: "
                                                     f"{output.strip()[-1500:]}"})
        except subprocess.TimeoutExpired as exc:
            output = (exc.stdout or b"").decode() + (exc.stderr or b"").decode() if isinstance(exc.stdout, bytes) \
                else f"{exc.stdout or ''}{exc.stderr or ''}"
            result = {"status": "failed", "error": f"timed out after {left:.0f} s (--budget-s)"}
        result["wall_s"] = round(time.perf_counter() - started, 1)
        with self.lock:
            self.log.write(f"\n===== {name}: {result['status']} in {result['wall_s']} s\n{output[-20000:]}\n")
            self.log.flush()
        print(f"  {result['status']:7} {name} ({result['wall_s']} s)"
              + (f": {result.get('error', '')[:300]}" if result["status"] != "ok" else ""), flush=True)
        return self._record(name, result)

    def _record(self, name: str, result: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.results[name] = result
        return result

    def run(self) -> dict[str, Any]:
        wanted = (lambda n: self.args.only is None or n in self.args.only)
        with concurrent.futures.ThreadPoolExecutor(max_workers=self.args.jobs) as pool:
            for chains in PARALLEL_ROUNDS:
                futures = [pool.submit(lambda c=chain: [self.part(n) for n in c if wanted(n)]) for chain in chains]
                for future in futures:
                    future.result()
        for name in TIMED:
            if wanted(name):
                self.part(name)
        self.log.close()
        return self.results


def environment(device: str) -> dict[str, Any]:
    import importlib.metadata as md

    import torch

    facts: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                             "python": platform.python_version(), "torch": torch.__version__,
                             "cuda": torch.version.cuda, "device": device, "cpus": os.cpu_count()}
    for package in ("transformers", "deepspeed", "pydantic", "numpy"):
        try:
            facts[package] = md.version(package)
        except md.PackageNotFoundError:
            facts[package] = None
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        facts.update(gpu=torch.cuda.get_device_name(0), gpu_memory_gib=round(props.total_memory / GIB, 1),
                     gpus_visible=torch.cuda.device_count(), bf16_supported=torch.cuda.is_bf16_supported())
        smi = shutil.which("nvidia-smi")
        if smi:
            q = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                               capture_output=True, text=True)
            facts["nvidia_smi"] = q.stdout.strip()
    else:
        facts["cpu"] = platform.processor() or platform.machine()
    return facts


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}g}" if abs(x) < 1e-2 or abs(x) >= 1e4 else f"{x:.{digits}f}".rstrip("0").rstrip(".")
    return str(x)


def tables(facts: dict[str, Any], results: dict[str, dict[str, Any]]) -> str:
    lines = [f"GPU check, {facts['date']}: {facts.get('gpu') or facts.get('cpu')} ({facts['device']}), "
             f"torch {facts['torch']} (CUDA {facts['cuda']}), transformers {facts['transformers']}, "
             f"deepspeed {facts['deepspeed']}, Python {facts['python']}", "",
             "| check | status | seconds | figures |", "|---|---|---|---|"]
    for name, r in results.items():
        if name.startswith("memory_") or name == "speed":
            continue
        if r["status"] != "ok":
            figures = r.get("error", "")[:240].replace("|", "/").replace("\n", " ")
        elif name == "equivalence":
            figures = (f"max param diff vs torch: ZeRO-0 {_fmt(r['zero0_max_param_diff'])}, ZeRO-2 "
                       f"{_fmt(r['zero2_max_param_diff'])}, ZeRO-3 {_fmt(r['zero3_max_param_diff'])} (bound "
                       f"{r['bound']}; weights moved {_fmt(r['moved'])}); step metrics at {_fmt(r['metrics_vs_tolerance'])} of the test's tolerance")
        elif name == "build_real":
            figures = f"{r['parameters'] / 1e6:.1f}M parameters, vocab {r['vocab']}"
        else:
            figures = (f"{r['iterations']} iterations, last loss {_fmt(r['last_loss'])}, grad norm "
                       f"{_fmt(r['grad_norm'])}, best iteration {r['best_iteration']}")
            if "sft_decisions" in r:
                figures = (f"`mage sft` {r['sft_wall_s']} s ({r['sft_decisions']} decisions, loss "
                           f"{_fmt(r['sft_loss'])}), then {figures}")
        lines.append(f"| {name} | {r['status']} | {_fmt(r.get('wall_s'))} | {figures} |")
    memory = {k: v for k, v in results.items() if k.startswith("memory_")}
    if memory:
        lines += ["", "| engine | logits | params | micro-batch | peak GiB | doctor GiB | doctor / peak | "
                      "update tok/s | bare fwd+bwd tok/s | update / bare |", "|---|---|---|---|---|---|---|---|---|---|"]
        for name, r in memory.items():
            if r["status"] != "ok":
                lines.append(f"| {name} | {r['status']}: {r.get('error', '')[:200]} |||||||||")
                continue
            lines.append(f"| {r['engine']} | {'chunk ' + str(r['logits_chunk']) if r['logits_chunk'] else 'dense'} | "
                         f"{r['parameters'] / 1e6:.0f}M | {r['micro_batch']} | {_fmt(r['peak_gib'])} | "
                         f"{_fmt(r['estimate_gib'])} | {_fmt(r['estimate_over_peak'])} | "
                         f"{r['update_tokens_per_s']:.0f} | {r['bare_fwd_bwd_tokens_per_s']:.0f} | "
                         f"{_fmt(r['update_over_bare'])} |")
    s = results.get("speed")
    if s:
        if s["status"] != "ok":
            lines += ["", f"speed: {s['status']}: {s.get('error', '')[:300]}"]
        else:
            lines += ["", f"{s['meta_episodes']} meta-episodes, {s['turns']} turns, free text:", "",
                      "| phase | seconds | tokens | tokens/s | bare tokens/s | time / bare |", "|---|---|---|---|---|---|",
                      f"| rollout (the project's HF generator) | {_fmt(s['rollout_s'])} | {s['rollout_tokens']} | "
                      f"{s['rollout_tokens_per_s']:.0f} | {s['bare_generate_tokens_per_s']:.0f} (HF generate) | "
                      f"{_fmt(s['rollout_over_bare'])} |",
                      f"| samples + log-probs + update | {_fmt(s['update_s'])} | {s['update_tokens']} | "
                      f"{s['update_tokens_per_s']:.0f} | {s['bare_update_tokens_per_s']:.0f} (fwd+bwd) | "
                      f"{_fmt(s['update_over_bare'])} |"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for gpu_check.json, .md and .log")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--size", choices=["real", "tiny"], help="model size of the real-size checks "
                        "(default: real on cuda, tiny on cpu)")
    parser.add_argument("--budget-s", type=float, default=450.0, help="wall-clock bound of the whole run")
    parser.add_argument("--jobs", type=int, help="phase-one checks at once (default: 3 on cuda, 1 on cpu)")
    parser.add_argument("--only", type=lambda s: set(s.split(",")), help="comma-separated checks to run")
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--part", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.size = args.size or ("real" if args.device == "cuda" else "tiny")
    if args.part:
        return run_part(args)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda: torch sees no CUDA device here (use --device cpu for the CPU twin)")
    if args.only is not None and (unknown := args.only - set(checks())):
        parser.error(f"--only: no such check(s) {sorted(unknown)}; checks: {', '.join(checks())}")
    args.jobs = args.jobs or (3 if args.device == "cuda" else 1)
    args.out.mkdir(parents=True, exist_ok=True)
    facts = environment(args.device)
    print(json.dumps(facts), flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as work:
        args.work = Path(work)
        results = Orchestrator(args).run()
    text = tables(facts, results)
    print("\n" + text)
    (args.out / "gpu_check.md").write_text(text)
    (args.out / "gpu_check.json").write_text(json.dumps({"environment": facts, "checks": results}, indent=1,
                                                        default=str))
    failed = [n for n, r in results.items() if r["status"] != "ok"]
    print(f"{len(results) - len(failed)} of {len(results)} checks ok" + (f"; not ok: {', '.join(failed)}" if failed
                                                                        else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
