"""The DeepSpeed ZeRO engine against the plain torch engine, on CPU with gloo.

Real DeepSpeed (0.19.8, ``DS_ACCELERATOR=cpu``): one process group of one rank
for the in-process tests, and a real 2-process ``torchrun`` launch. The torch
engine is the reference: it is itself checked against a hand-written PPO update
in ``tests/unit/test_torch_engine.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mage_core.backends.base import LossSettings, Sample, TrainEngine
from mage_core.backends.torch_engine import TorchEngine, micro_batches
from mage_core.trainers.checkpoint import CheckpointManager, pack_engine_state, unpack_engine_state
from tests.rankcases import assert_same_figures

deepspeed_engine = pytest.importorskip("mage_core.backends.deepspeed_engine")
pytest.importorskip("deepspeed", reason="the DeepSpeed engine tests need deepspeed (pip install -e '.[deepspeed]')")

pytestmark = pytest.mark.integration
HERE = Path(__file__).parent
VOCAB = 50
# Same batches, same AdamW: the two engines differ only in where the sums are
# taken (DeepSpeed flattens the gradients into one buffer before the norm).
# Measured: max |difference| of parameters after 3 steps 0.0 to 6e-8; the bound leaves room.
ATOL = 1e-6


def tiny_model(seed: int = 0) -> torch.nn.Module:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=128,
                      tie_word_embeddings=True)
    return Qwen3ForCausalLM(cfg)


def batches(seed: int, n_batches: int = 3, size: int = 8) -> list[list[Sample]]:
    """Mini-batches of free, single-token and multi-token constrained samples."""
    g = torch.Generator().manual_seed(seed)

    def ints(k: int) -> list[int]:
        return torch.randint(1, VOCAB, (k,), generator=g).tolist()

    out = []
    for _ in range(n_batches):
        batch = []
        for i in range(size):
            prompt, adv = ints(int(torch.randint(3, 15, (1,), generator=g))), float(torch.randn(1, generator=g))
            if i % 3 == 0:
                batch.append(Sample(prompt=prompt, advantage=adv, response=ints(3)))
            elif i % 3 == 1:
                batch.append(Sample(prompt=prompt, advantage=adv, candidates=[[t] for t in ints(3)], choice=1))
            else:
                batch.append(Sample(prompt=prompt, advantage=adv, candidates=[ints(2), ints(1)], choice=0))
        out.append(batch)
    return out


LOSS = LossSettings(clip_ratio=0.2, entropy_coef=0.01, kl_coef=0.1)


def train(engine: TrainEngine, mini_batches: list[list[Sample]]) -> list[dict[str, float]]:
    """The trainer's order of calls: old and reference log-probs, then a step."""
    metrics = []
    for batch in mini_batches:
        old = engine.logprobs(batch)
        ref = engine.logprobs(batch, policy="reference")
        metrics.append(engine.step(batch, old, ref, LOSS))
    return metrics


def make(kind: str, **kwargs) -> TrainEngine:
    common = dict(learning_rate=3e-3, weight_decay=0.01, max_grad_norm=0.5, max_tokens_per_micro_batch=64,
                  reference_model="copy")
    if kind == "torch":
        return TorchEngine(tiny_model(), **common)
    return deepspeed_engine.DeepSpeedEngine(tiny_model(), **common, **kwargs)


def max_difference(a: TrainEngine, b: TrainEngine) -> float:
    sa, sb = a.policy_state_dict(), b.policy_state_dict()
    assert sa.keys() == sb.keys()
    return max(float((sa[k].float() - sb[k].float()).abs().max()) for k in sa)


@pytest.mark.equivalence
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_stages_update_like_the_torch_engine(stage: int) -> None:
    data = batches(seed=1)
    reference, ds = make("torch"), make("deepspeed", zero_stage=stage)
    assert isinstance(ds, TrainEngine)
    start = max_difference(reference, ds)
    assert start == 0.0  # same initial weights
    ref_metrics, ds_metrics = train(reference, data), train(ds, data)
    assert max_difference(reference, ds) < ATOL
    assert max_difference(make("torch"), ds) > 1e-3  # and the weights did move
    for r, d in zip(ref_metrics, ds_metrics):
        assert d["skipped"] == 0.0 and d["num_tokens"] == r["num_tokens"]
        for key in ("loss", "pg_loss", "entropy", "kl", "clip_frac", "grad_norm"):
            assert d[key] == pytest.approx(r[key], rel=1e-5, abs=1e-7), key
    assert ds.num_steps == reference.num_steps == len(data)


@pytest.mark.parametrize("stage", [2, 3])
def test_resume_from_a_checkpoint_continues_identically(tmp_path: Path, stage: int) -> None:
    first, rest = batches(seed=2, n_batches=2), batches(seed=3, n_batches=2)
    straight = make("deepspeed", zero_stage=stage)
    train(straight, first)
    # Through the real checkpoint files (safetensors + torch.load(weights_only=True)).
    tensors, saved = pack_engine_state(straight.state_dict())
    CheckpointManager(tmp_path).save(2, tensors, {"engine": saved}, {"backend": "deepspeed"})
    train(straight, rest)

    resumed = make("deepspeed", zero_stage=stage)
    _, loaded_tensors, loaded, _ = CheckpointManager(tmp_path).load()
    resumed.load_state_dict(unpack_engine_state(loaded_tensors, loaded["engine"]))
    assert resumed.num_steps == 2
    train(resumed, rest)
    assert max_difference(straight, resumed) == 0.0
    # Without the optimizer state (a fresh engine on the same weights) the result differs:
    # the test would notice a resume that dropped AdamW's moments.
    fresh = make("deepspeed", zero_stage=stage)
    fresh._load_weights_and_counters(unpack_engine_state(loaded_tensors, loaded["engine"]))
    train(fresh, rest)
    assert max_difference(straight, fresh) > 1e-5


def test_bad_settings_and_foreign_checkpoints_are_refused() -> None:
    with pytest.raises(ValueError, match="zero_stage: must be one of"):
        make("deepspeed", zero_stage=4)
    with pytest.raises(ValueError, match="offload_optimizer"):
        make("deepspeed", zero_stage=0, offload_optimizer=True)
    with pytest.raises(ValueError, match="precision"):
        make("deepspeed", precision="fp16")
    ds = make("deepspeed", zero_stage=1)
    with pytest.raises(ValueError, match="not written by the DeepSpeed engine"):
        ds.load_state_dict(make("torch").state_dict())
    other_stage = make("deepspeed", zero_stage=2).state_dict()
    with pytest.raises(ValueError, match="zero_stage 2, this engine 1"):
        ds.load_state_dict(other_stage)


def test_two_ranks_under_torchrun_equal_one_torch_engine_on_the_whole_batch(tmp_path: Path) -> None:
    """A real 2-process launch (torchrun, gloo, ZeRO-2). Rank 0 takes the first 4
    samples of every mini-batch, rank 1 the other 8: the ranks hold different
    numbers of tokens and of micro-batches, and together they must make the update
    of one torch engine on the whole mini-batch."""
    settings = {"seed": 4, "n_batches": 2, "size": 12, "split": 4}
    data = batches(settings["seed"], settings["n_batches"], settings["size"])
    parts = [[batch[:4], batch[4:]] for batch in data]
    assert any(sum(len(s.response or [1]) for s in a) != sum(len(s.response or [1]) for s in b) for a, b in parts)
    assert any(len(list(micro_batches(a, 64, True))) != len(list(micro_batches(b, 64, True)))
               for a, b in parts)  # so a rank runs a weight-0 pass to keep step with the other
    out = tmp_path / "rank0.pt"
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
         "--master_port", str(deepspeed_engine._free_port()),
         str(HERE / "deepspeed_ranks.py"), str(out), json.dumps(settings)],
        env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = torch.load(out, weights_only=True)
    assert result["world_size"] == 2 and result["ranks_agree"] is True
    reference = make("torch")
    train(reference, data)
    expected = reference.policy_state_dict()
    # Measured: 1.6e-6 (two ranks sum their gradients in another order than one process).
    assert max(float((result["policy"][k] - expected[k]).abs().max()) for k in expected) < 1e-5


# -- the train stage with backend.engine deepspeed ------------------------------------------------

STAGE_PARAMS = {
    "env": {"name": "kuhn_poker"},
    "train": {"iterations": 3, "groups_per_iteration": 3, "eval_every": 0, "checkpoint_every": 1},
    "algorithm": {"group_size": 4},
    "evaluation": {"meta_episodes_per_opponent_seat": 4},
    "tournament": {"matches": []},
    "tracking": {"mlflow": False},
}


def stage_weights(out: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    latest = CheckpointManager(out / "checkpoints").latest()
    assert latest is not None
    return load_file(str(latest / "model.safetensors"))


def test_train_stage_on_deepspeed_matches_torch_and_resumes_exactly(tmp_path: Path) -> None:
    """`mage train` with backend.engine deepspeed (ZeRO-2): the same run as the torch
    engine (same rollouts, same updates up to rounding), and a stop-and-resume
    through the stage's checkpoints ends bit-identical to the uninterrupted run."""
    from mage_core.config import parse_config
    from mage_core.stages.train import train as train_stage

    torch_run = train_stage(parse_config(STAGE_PARAMS), tmp_path / "torch")
    ds_cfg = parse_config({**STAGE_PARAMS, "backend": {"engine": "deepspeed", "zero_stage": 2}})
    ds_run = train_stage(ds_cfg, tmp_path / "ds")
    a, b = stage_weights(tmp_path / "torch"), stage_weights(tmp_path / "ds")
    # 12 AdamW steps: Adam's 1/sqrt(v) magnifies the engines' rounding differences to
    # 1.4e-5 (measured), against a move of the weights from their start of 6e-3.
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-4
    from safetensors.torch import load_file

    start = load_file(str(tmp_path / "ds" / "policy-init" / "model.safetensors"))
    moved = max(float((b[f"policy/{k}"] - start[k]).abs().max()) for k in start)
    assert moved > 1e-3
    assert_same_figures(ds_run["final_eval"], torch_run["final_eval"])

    first = train_stage(ds_cfg, tmp_path / "split", stop_after=2)
    assert first["interrupted"] and first["iteration"] == 2
    train_stage(ds_cfg, tmp_path / "split", resume=True)
    c = stage_weights(tmp_path / "split")
    assert all(torch.equal(b[k], c[k]) for k in b)


@pytest.mark.slow
def test_offloaded_optimizer_and_bf16_train_like_the_torch_engine() -> None:
    """ZeRO-2 with the optimizer state offloaded to DeepSpeedCPUAdam (a C++ op that
    DeepSpeed compiles on first use, ~50 s), and bf16 weights with fp32 master copies."""
    data = batches(seed=5, n_batches=2)
    reference = make("torch")
    train(reference, data)
    offloaded = make("deepspeed", zero_stage=2, offload_optimizer=True)
    train(offloaded, data)
    # DeepSpeedCPUAdam's fused update rounds differently from torch's AdamW; measured 1.2e-7.
    assert max_difference(reference, offloaded) < 1e-5
    from deepspeed.utils import safe_get_full_fp32_param

    bf16 = make("deepspeed", zero_stage=2, precision="bf16")
    metrics = train(bf16, data)
    assert all(m["skipped"] == 0.0 for m in metrics)
    assert {v.dtype for v in bf16.policy_state_dict().values()} == {torch.bfloat16}
    # The fp32 master weights against the torch engine's, as whole updates (AdamW turns
    # bf16 noise in near-zero gradients into full-size steps, so single entries differ).
    start = dict(make("torch").model.named_parameters())
    fp32 = dict(reference.model.named_parameters())
    master = {n: safe_get_full_fp32_param(p) for n, p in bf16.model.named_parameters()}
    ours = torch.cat([(master[n] - start[n]).flatten() for n in fp32])
    theirs = torch.cat([(fp32[n] - start[n]).flatten() for n in fp32])
    # Measured: cosine 0.997, relative distance 0.074.
    assert float(torch.nn.functional.cosine_similarity(ours, theirs, dim=0)) > 0.98
    assert float((ours - theirs).norm() / theirs.norm()) < 0.2
