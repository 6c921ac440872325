"""``mage doctor``: check a profile before launch, and say how to fix each problem.

What it checks, in order (nothing heavy is imported: vLLM and DeepSpeed are
looked up, not loaded):

1. the backends the profile names (``backend.generator``, ``backend.engine``)
   and Ray when ``RAY_ADDRESS`` is set are installed, and whether they are
   built yet in this project;
2. the GPUs torch sees, with their memory, against ``backend.gpus``;
3. the model: ``model.path`` is a folder holding a ``config.json`` that
   transformers can read, weights and a tokenizer (or a hub id, which needs a
   network or a filled Hugging Face cache);
4. memory: weights, gradients, optimizer state, reference policy, activations
   and logits of a training micro-batch under the chosen ZeRO stage
   (``mage_core.backends.memory``), and how many full-length sequences the
   rollout engine's KV cache holds, against the GPUs' memory.

Exit status 0 when nothing is wrong, 1 when something is (each with its fix),
2 for a bad params file or profile.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from mage_core.backends import INSTALL, PACKAGES
from mage_core.backends.memory import GIB, ModelShape, kv_cache_sequences, training_memory
from mage_core.config import Config, load_config, parse_config

#: What a profile is compared with when this machine has no GPU: the paper-scale target.
REFERENCE_GPU = ("H100 80 GiB", 80 * GIB)


@dataclass
class Finding:
    ok: bool
    what: str
    fix: str = ""


def check_backends(cfg: Config) -> list[Finding]:
    out = []
    for role, name in (("generator", cfg.backend.generator), ("engine", cfg.backend.engine)):
        package = PACKAGES[name]
        if importlib.util.find_spec(package) is None:
            out.append(Finding(False, f"backend.{role} {name}: the package {package} is not installed",
                               INSTALL.get(name, f"pip install {package}")))
        else:
            out.append(Finding(True, f"backend.{role} {name}: {package} installed"))
    if os.environ.get("RAY_ADDRESS") and importlib.util.find_spec("ray") is None:
        out.append(Finding(False, "RAY_ADDRESS is set but ray is not installed", "pip install -e '.[pipeline]'"))
    return out


def check_task_data_finding(cfg: Config) -> list[Finding]:
    """A data-backed task's files (WebShop's catalogue, ALFWorld's games) are there and playable."""
    from mage_core.envs.registry import task

    if task(cfg.env.name).data is None:
        return []
    from mage_core.config import ConfigError
    from mage_core.stages.task_data import check_task_data

    path = getattr(cfg.env, cfg.env.name).data_path
    try:
        check_task_data(cfg, "train")
        check_task_data(cfg, "evaluate")
    except ConfigError as err:
        return [Finding(False, err.problems[0], f"mage data generate {cfg.env.name} --out {path}")]
    return [Finding(True, f"env.{cfg.env.name}.data_path {path}: every split has its data")]


def visible_gpus() -> list[tuple[str, int]]:
    """(name, total bytes) of every CUDA device torch sees."""
    import torch

    if not torch.cuda.is_available():
        return []
    return [(torch.cuda.get_device_name(i), torch.cuda.get_device_properties(i).total_memory)
            for i in range(torch.cuda.device_count())]


def check_gpus(cfg: Config, gpus: list[tuple[str, int]]) -> list[Finding]:
    wanted = cfg.backend.gpus
    if wanted == 0:
        return [Finding(True, f"backend.gpus 0: CPU run ({len(gpus)} GPU(s) visible, unused)")]
    if len(gpus) < wanted:
        return [Finding(False, f"backend.gpus {wanted}: torch sees {len(gpus)} CUDA device(s)",
                        "run on a machine with that many GPUs (check CUDA_VISIBLE_DEVICES and the driver: "
                        "nvidia-smi), or lower backend.gpus")]
    names = ", ".join(f"{name} {memory / GIB:.0f} GiB" for name, memory in gpus[:wanted])
    return [Finding(True, f"backend.gpus {wanted}: {names}")]


def model_config(cfg: Config) -> tuple[dict[str, Any] | None, list[Finding]]:
    """The model's config.json as a mapping, and what was found about its folder."""
    m = cfg.model
    if m.source == "embedded":
        shape = {"vocab_size": 0, "hidden_size": m.hidden_size, "num_hidden_layers": m.num_layers,
                 "num_attention_heads": m.num_heads, "num_key_value_heads": m.num_kv_heads, "head_dim": m.head_dim,
                 "intermediate_size": m.intermediate_size, "tie_word_embeddings": True,
                 "max_position_embeddings": m.max_position_embeddings}
        return shape, [Finding(True, "model: the embedded tiny Qwen3 (built from params.yaml, no download)")]
    path = Path(str(m.path)).expanduser()
    if not path.exists():
        return None, [Finding(False, f"model.path {m.path}: no such folder (a hub id instead needs a network or a "
                                     "filled Hugging Face cache)",
                              f"download the model there on a machine with internet: huggingface-cli download "
                              f"<hub id> --local-dir {m.path} (Qwen3-4B: Qwen/Qwen3-4B), or fix model.path")]
    found = []
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(str(path)).to_dict()
    except (OSError, ValueError) as err:
        return None, [Finding(False, f"model.path {path}: config.json unreadable ({err})",
                              "point model.path at a Hugging Face model folder (config.json, weights, tokenizer)")]
    found.append(Finding(True, f"model.path {path}: {config.get('model_type')} config readable"))
    weights = sorted(p.name for p in path.glob("*.safetensors")) or sorted(p.name for p in path.glob("*.bin"))
    found.append(Finding(bool(weights), f"model.path {path}: {len(weights)} weight file(s)" if weights else
                         f"model.path {path}: no *.safetensors or *.bin weights",
                         "" if weights else "download the weights into the folder (the config alone is there)"))
    has_tokenizer = any((path / name).exists() for name in ("tokenizer.json", "tokenizer.model", "vocab.json"))
    found.append(Finding(has_tokenizer, f"model.path {path}: tokenizer {'present' if has_tokenizer else 'missing'}",
                         "" if has_tokenizer else "download the tokenizer files (tokenizer.json) into the folder"))
    return config, found


def memory_report(cfg: Config, config: dict[str, Any], gpus: list[tuple[str, int]]) -> tuple[list[str], list[Finding]]:
    """The training and rollout memory per GPU, term by term, against the GPU's size."""
    b = cfg.backend
    shape = ModelShape.from_hf_config(config)
    seq_len = _sequence_length(cfg)
    n = max(b.gpus, 1)
    mem = training_memory(shape, gpus=n, zero_stage=b.zero_stage if b.engine == "deepspeed" else 0,
                          precision=b.precision, offload_optimizer=b.offload_optimizer, micro_batch=b.micro_batch_size,
                          seq_len=seq_len, gradient_checkpointing=b.gradient_checkpointing, flash_attention=b.gpus > 0,
                          reference_model=cfg.train.kl_coef > 0, scored_positions=_scored_positions(cfg),
                          logits_chunk=b.logits_chunk_tokens)
    where = (f"ZeRO stage {b.zero_stage}" if b.engine == "deepspeed" else "plain torch") + \
        f", {b.precision}, {n} device(s), micro-batch {b.micro_batch_size} x {seq_len} tokens"
    lines = [f"model: {shape.parameters() / 1e9:.3f} B parameters; training memory per device ({where}):"]
    for name, value in (("weights", mem.weights), ("gradients", mem.gradients), ("optimizer", mem.optimizer),
                        ("reference policy", mem.reference), ("activations", mem.activations),
                        (f"logits ({f'chunks of {b.logits_chunk_tokens}' if b.logits_chunk_tokens else 'dense'})",
                         mem.logits)):
        lines.append(f"  {name:<22} {value / GIB:8.2f} GiB")
    lines.append(f"  {'total':<22} {mem.gpu_total / GIB:8.2f} GiB"
                 + (f"  (+ {mem.optimizer_on_cpu / GIB:.2f} GiB optimizer in host memory)" if mem.optimizer_on_cpu
                    else ""))
    findings: list[Finding] = []
    if b.gpus == 0:
        return lines, findings
    visible = bool(gpus)
    size = min(memory for _, memory in gpus[:b.gpus]) if visible else REFERENCE_GPU[1]
    against = f"{size / GIB:.0f} GiB per GPU" if visible else f"an {REFERENCE_GPU[0]} (no GPU visible here)"
    weights = (2 if b.precision == "bf16" else 4) * shape.parameters()
    seqs = kv_cache_sequences(shape, gpu_bytes=size, memory_fraction=b.gpu_memory_utilization, seq_len=seq_len,
                              weights_bytes=weights)
    lines.append(f"rollout KV cache: {shape.kv_bytes_per_token() / 1024:.0f} KiB per token; {seqs:.0f} "
                 f"full-length sequences fit in backend.gpu_memory_utilization {b.gpu_memory_utilization} of "
                 f"{against}")
    # A vLLM engine lives on the training GPU (one per rank) and keeps its share while the update
    # runs; on Ray actors (rollout.workers) it has GPUs of its own, and the stage's process plays
    # what it plays itself on an HF copy of the weights, as an HF generator always does.
    workers = cfg.rollout.workers
    colocated = b.generator == "vllm" and workers == 0
    vllm_bytes = b.gpu_memory_utilization * size if colocated else 0.0
    copy_bytes = 0.0 if colocated else float(weights)
    fits = mem.gpu_total + vllm_bytes + copy_bytes <= size
    step = f"training step: {mem.gpu_total / GIB:.1f} GiB" + (
        f" + vLLM's {vllm_bytes / GIB:.1f} GiB (backend.gpu_memory_utilization {b.gpu_memory_utilization})"
        if colocated else f" + {copy_bytes / GIB:.1f} GiB of HF rollout copy")
    if b.generator == "vllm" and workers:
        step += f" (vLLM on {workers} Ray actor(s), a GPU each)"
    if colocated and b.vllm_sleep:  # vLLM sleeps through the update; the training state stays through the rollout
        held = mem.weights + mem.gradients + mem.optimizer + mem.reference
        fits = mem.gpu_total <= size and held + vllm_bytes <= size
        step = (f"training step: {mem.gpu_total / GIB:.1f} GiB (vLLM asleep, backend.vllm_sleep); rollout: vLLM's "
                f"{vllm_bytes / GIB:.1f} GiB + the training state's {held / GIB:.1f} GiB")
    if not visible:  # the GPU check already failed; say how the profile compares with its target hardware
        lines.append(f"{step} against {against}: {'fits' if fits else 'does not fit'}")
        return lines, findings
    fix = ("raise backend.zero_stage or backend.gpus, turn on backend.gradient_checkpointing or "
           "backend.offload_optimizer, set backend.logits_chunk_tokens, or lower backend.micro_batch_size")
    if colocated and mem.gpu_total < size:
        fix = f"lower backend.gpu_memory_utilization to {int(100 * (size - mem.gpu_total) / size) / 100} or less, or " + fix
    findings.append(Finding(fits, f"{step} of {against}", "" if fits else fix))
    findings.append(Finding(seqs >= 1, f"rollout: {seqs:.0f} full-length sequence(s) per GPU in the KV cache",
                            "" if seqs >= 1 else "raise backend.gpu_memory_utilization or shorten "
                            "policy.max_new_tokens"))
    return lines, findings


def _scored_positions(cfg: Config) -> int:
    """Positions per row whose next token is scored: the response budget (free text),
    or the whole row (constrained candidates can sit anywhere in a packed row)."""
    env = getattr(cfg.env, cfg.env.name)
    return env.max_response_tokens if cfg.policy.action_mode == "free" else _sequence_length(cfg)


def _sequence_length(cfg: Config) -> int:
    """Longest training sequence: the env's prompt budget plus its response budget."""
    env = getattr(cfg.env, cfg.env.name)
    return 4096 + env.max_response_tokens if cfg.policy.action_mode == "free" else cfg.model.max_position_embeddings


def run(params: str, profile: str | None = None, overrides: Sequence[str] = ()) -> int:
    from rich.console import Console
    from rich.markup import escape

    console = Console(soft_wrap=True)
    if profile:
        from mage_core.config import apply_overrides
        from mage_core.stages.profiles import profile_params

        from mage_core.config import run_data

        data = apply_overrides(profile_params(Path(params), profile), overrides)
        cfg = parse_config(data, f"{params} with profile {profile}")
        runs = list(cfg.reproduce.runs)
        if len(runs) == 1:  # a paper profile: check the run it launches (its env, method and overrides)
            cfg = parse_config(run_data(data, runs[0], f"profile {profile} run {runs[0]}"),
                               f"{params} with profile {profile}, run {runs[0]}")
    else:
        cfg = load_config(params, overrides)
    gpus = visible_gpus()
    findings = check_backends(cfg) + check_gpus(cfg, gpus) + check_task_data_finding(cfg)
    config, model_findings = model_config(cfg)
    findings += model_findings
    lines: list[str] = []
    if config is not None and cfg.model.source == "local":
        memory_lines, memory_findings = memory_report(cfg, config, gpus)
        lines, findings = memory_lines, findings + memory_findings
    for finding in findings:
        mark = "[green]ok[/]  " if finding.ok else "[bold red]fix[/] "
        text = escape(finding.what) + (f"\n       -> {escape(finding.fix)}" if finding.fix else "")
        console.print(f"{mark} {text}", highlight=False)
    for line in lines:
        console.print(line, highlight=False)
    problems = sum(not f.ok for f in findings)
    console.print(f"{problems} problem(s)" if problems else "ready to launch")
    return 1 if problems else 0


