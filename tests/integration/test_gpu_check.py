"""benchmarks/gpu_check.py as its own CPU twin: every check it runs on a GPU machine runs here
(the same code paths: `mage train` from the command line, the DeepSpeed engine at ZeRO 0/2/3 on
gloo, the memory step, the throughput measure), so the script cannot rot between the rare runs on
a GPU (docs/scale-out.md, "The GPU check")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("deepspeed", reason="the GPU check's engine checks need deepspeed (pip install -e '.[deepspeed]')")

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_every_check_of_the_gpu_check_passes_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--out", str(out), "--device", "cpu",
                           "--budget-s", "900"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads((out / "gpu_check.json").read_text())
    checks = report["checks"]
    assert report["environment"]["device"] == "cpu"
    # Every check ran, none skipped for the budget.
    assert {name for name, r in checks.items() if r["status"] == "ok"} == set(checks) and len(checks) == 15
    equivalence = checks["equivalence"]
    # The CPU test's own bound (tests/integration/test_deepspeed_engine.py), after weights that moved.
    assert max(equivalence[f"zero{s}_max_param_diff"] for s in (0, 2, 3)) < 1e-6 < 1e-3 < equivalence["moved"]
    for name in ("train_kuhn", "train_sokoban", "train_kuhn_ds2_bf16", "train_real_torch_0", "train_real_ds2_1024",
                 "train_real_ds3_0"):
        assert checks[name]["iterations"] >= 2 and checks[name]["best_iteration"] >= 1, name
    # Sokoban's runs start from a warm start: the check makes one with `mage sft` first.
    assert checks["train_sokoban"]["sft_decisions"] > 0 and checks["train_sokoban"]["sft_wall_s"] > 0
    # The memory rows: no allocator peak on a CPU, the estimate of the same shape, the update against
    # the bare forward+backward of the same rows.
    memory = [r for name, r in checks.items() if name.startswith("memory_")]
    assert len(memory) == 6 and all(r["peak_gib"] is None and r["estimate_gib"] > 0 for r in memory)
    # Timings only have to be measured (a ratio under load says nothing: benchmarks report them).
    assert all(r["update_tokens_per_s"] > 0 and r["bare_fwd_bwd_tokens_per_s"] > 0 for r in memory)
    speed = checks["speed"]
    assert speed["rollout_tokens"] > 0 and speed["update_tokens"] > 0 and speed["bare_generate_tokens"] > 0
    table = (out / "gpu_check.md").read_text()
    assert "| equivalence | ok |" in table and "| engine | logits |" in table
    assert (out / "gpu_check.log").stat().st_size > 0
