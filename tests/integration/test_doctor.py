"""`mage doctor` on this machine (no GPU, no vLLM, no DeepSpeed, no Qwen3-4B weights):
the CPU default is ready to launch; the paper profile lists each problem with its fix;
a model folder holding only Qwen3-4B's config.json gets the memory report."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
QWEN3_4B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
            "hidden_size": 2560, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "intermediate_size": 9728, "tie_word_embeddings": True,
            "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000,
            "torch_dtype": "bfloat16"}


def doctor(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "COLUMNS": "200"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "mage_core", "doctor", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy2(ROOT / "params.yaml", tmp_path / "params.yaml")
    return tmp_path


def test_the_cpu_default_is_ready(project: Path) -> None:
    done = doctor(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "backend.generator hf: transformers installed" in done.stdout
    assert "model: the embedded tiny Qwen3" in done.stdout and done.stdout.rstrip().endswith("ready to launch")


def test_the_paper_profile_here_lists_every_problem_with_its_fix(project: Path) -> None:
    done = doctor(project, "--profile", "paper_kuhn_poker")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "backend.generator vllm: the package vllm is not installed" in out
    assert "backend.engine deepspeed: deepspeed installed" in out  # the `deepspeed` extra
    assert "backend.gpus 8: torch sees 0 CUDA device(s)" in out
    assert "model.path models/Qwen3-4B: no such folder" in out
    assert "huggingface-cli download <hub id> --local-dir models/Qwen3-4B (Qwen3-4B: Qwen/Qwen3-4B)" in out
    problems = [line for line in out.splitlines() if line.startswith("fix ")]
    fixes = [line for line in out.splitlines() if line.lstrip().startswith("-> ")]
    assert len(problems) == len(fixes) == 3 and out.rstrip().endswith("3 problem(s)")  # each with its fix


@pytest.mark.parametrize("profile", ["paper_alfworld", "paper_webshop"])
def test_a_paper_profile_of_a_data_backed_task_checks_its_data(project: Path, profile: str) -> None:
    # the profile's own run is checked (its env, not params.yaml's env.name); the copied project has no data/
    done = doctor(project, "--profile", profile)
    assert done.returncode == 1, done.stdout + done.stderr
    task = profile.removeprefix("paper_")
    lines = " ".join(done.stdout.split())
    assert f"fix env.{task}.data_path:" in lines and f"-> mage data generate {task} --out data/{task}" in lines
    assert lines.endswith("4 problem(s)")


def test_a_config_only_model_folder_gets_the_memory_report(project: Path) -> None:
    folder = project / "models" / "Qwen3-4B"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(QWEN3_4B))
    done = doctor(project, "--profile", "paper_kuhn_poker")
    out = done.stdout
    assert done.returncode == 1
    assert "qwen3 config readable" in out
    assert "no *.safetensors or *.bin weights" in out and "tokenizer missing" in out
    assert "model: 4.022 B parameters" in out
    # ZeRO-2 over 8 GPUs, bf16, micro-batch 8 x (4096 prompt + 4096 response) tokens, checkpointing.
    assert "ZeRO stage 2, bf16, 8 device(s), micro-batch 8 x 8192 tokens" in out
    # 2P bytes of bf16 weights (P = 4,022,468,096), 12P/8 of fp32 optimizer state (tests/unit/test_memory.py).
    assert re.search(r"weights\s+7\.49 GiB", out) and re.search(r"optimizer\s+5\.62 GiB", out)
    # Logits 1024 positions at a time (backend.logits_chunk_tokens): 1024 x 151936 x 29 bytes.
    assert re.search(r"logits \(chunks of 1024\)\s+4\.20 GiB", out)
    # Each rank's vLLM engine keeps its share of the GPU (0.4 of 80 GiB) beside the step.
    assert ("training step: 47.9 GiB + vLLM's 32.0 GiB (backend.gpu_memory_utilization 0.4) against an H100 "
            "80 GiB (no GPU visible here): fits") in out
    half = doctor(project, "--profile", "paper_kuhn_poker", "--set", "backend.gpu_memory_utilization=0.5")
    assert ("training step: 47.9 GiB + vLLM's 40.0 GiB (backend.gpu_memory_utilization 0.5) against an H100 "
            "80 GiB (no GPU visible here): does not fit") in half.stdout
    dense = doctor(project, "--profile", "paper_kuhn_poker", "--set", "backend.logits_chunk_tokens=0")
    # 8 rows x 4096 response positions at once, 29 bytes each: 134.46 GiB of logits.
    assert re.search(r"logits \(dense\)\s+134\.46 GiB", dense.stdout)
    assert "training step: 178.2 GiB + vLLM's 32.0 GiB" in dense.stdout and "does not fit" in dense.stdout
    # vLLM asleep during the update: the step may use the GPU, vLLM may take 0.7 of it for the rollout
    # beside the weights, gradient and optimizer shards and the reference policy (7.49 + 0.94 + 5.62 + 7.49).
    asleep = doctor(project, "--profile", "paper_kuhn_poker", "--set", "backend.vllm_sleep=true",
                    "--set", "backend.gpu_memory_utilization=0.7")
    assert ("training step: 47.9 GiB (vLLM asleep, backend.vllm_sleep); rollout: vLLM's 56.0 GiB + the training "
            "state's 21.5 GiB against an H100 80 GiB (no GPU visible here): fits") in " ".join(asleep.stdout.split())
    # vLLM on Ray actors: their GPUs are their own; the stage's process keeps an HF copy (2P bytes).
    actors = doctor(project, "--profile", "paper_kuhn_poker", "--set", "rollout.workers=8")
    assert ("training step: 47.9 GiB + 7.5 GiB of HF rollout copy (vLLM on 8 Ray actor(s), a GPU each) against "
            "an H100 80 GiB (no GPU visible here): fits") in " ".join(actors.stdout.split())


def test_training_with_a_backend_not_installed_stops_before_writing(project: Path) -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed in this environment")
    done = subprocess.run([sys.executable, "-m", "mage_core", "train", "--set", "backend.generator=vllm",
                           "--set", "tracking.mlflow=false", "--out", "run"],
                          cwd=project, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert ("backend unavailable: backend.generator: vllm needs the package vllm, which is not installed in this "
            "environment: pip install -e '.[gpu]' on a CUDA machine") in " ".join(done.stderr.split())
    assert not (project / "run").exists()


@pytest.mark.parametrize(("gpus", "extra", "message"), [
    (2, ["--set", "backend.engine=deepspeed", "--set", "backend.ranks=2"],
     "backend.gpus: 2, but torch sees no CUDA device here; set backend.gpus: 0 for a CPU run"),
    (1, [], "backend.gpus: 1, but torch sees no CUDA device here; set backend.gpus: 0 for a CPU run"),
])
def test_training_on_gpus_this_machine_cannot_give_stops_before_writing(project: Path, gpus: int, extra: list[str],
                                                                        message: str) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    status = 2  # a params problem, found before any rank is launched
    done = subprocess.run([sys.executable, "-m", "mage_core", "train", "--set", f"backend.gpus={gpus}", *extra,
                           "--set", "tracking.mlflow=false", "--out", "run"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == status, done.stderr
    assert message in " ".join(done.stderr.split())
    assert not (project / "run").exists()
