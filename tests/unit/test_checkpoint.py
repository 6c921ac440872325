"""Crash-safe checkpoints: round trip, damage detection, simulated and real crashes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from mage_core.trainers import checkpoint as ckpt_module
from mage_core.trainers.checkpoint import (
    CheckpointError,
    CheckpointManager,
    capture_rng,
    pack_engine_state,
    restore_rng,
    unpack_engine_state,
)

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
META = {"config_digest": "abc123", "method": "mage", "model": {"hidden_size": 32, "num_layers": 2},
        "betas": (0.9, 0.999)}


def tensors_for(step: int) -> dict[str, torch.Tensor]:
    return {"w": torch.full((4, 3), float(step)), "b": torch.arange(step + 1, dtype=torch.float32)}


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_round_trip(tmp_path: Path) -> None:
    np_gen, torch_gen, py_gen = np.random.default_rng(5), torch.Generator().manual_seed(5), random.Random(5)
    np_gen.random(3), torch.rand(2, generator=torch_gen), py_gen.random()  # advance a little
    embed = torch.randn(6, 4)
    tensors = {"embed.weight": embed, "lm_head.weight": embed, "norm": torch.ones(4, dtype=torch.bfloat16)}
    state = {"iteration": 7, "best": -1.5, "big": 2**100, "history": [1, (2, "x")], "none": None,
             "opt": {"state": {0: {"exp_avg": torch.ones(3)}}, "param_groups": [{"lr": 1e-3}]},
             "rng": capture_rng(np_gen, torch_gen, py_gen)}
    manager = CheckpointManager(tmp_path / "ckpt")
    path = manager.save(7, tensors, state, META)
    assert path.name == "step-000007" and manager.latest() == path
    assert (tmp_path / "ckpt" / "latest").read_text().strip() == "step-000007"

    step, t2, s2, meta = manager.load(expected_metadata=META)  # a tuple compares equal to its JSON list
    assert step == 7 and meta == {**META, "betas": [0.9, 0.999]}
    assert set(t2) == set(tensors) and all(torch.equal(t2[k], tensors[k]) for k in tensors)
    assert t2["norm"].dtype == torch.bfloat16
    assert s2["big"] == 2**100 and s2["history"] == [1, (2, "x")] and s2["none"] is None
    assert torch.equal(s2["opt"]["state"][0]["exp_avg"], torch.ones(3))
    # the restored generators continue exactly where the saved ones were
    n2, t2g, p2 = np.random.default_rng(0), torch.Generator(), random.Random(0)
    restore_rng(s2["rng"], n2, t2g, p2)
    assert np.array_equal(n2.random(4), np_gen.random(4))
    assert torch.equal(torch.rand(4, generator=t2g), torch.rand(4, generator=torch_gen))
    assert p2.random() == py_gen.random()


def test_unsafe_state_is_refused_before_writing(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    legacy = {"rng": {"legacy": np.random.RandomState(0).get_state()}}
    with pytest.raises(ValueError, match=r"state\.rng\.legacy\[1\] is a ndarray.*torch\.from_numpy"):
        manager.save(1, tensors_for(1), legacy, META)
    with pytest.raises(ValueError, match="JSON"):
        manager.save(1, tensors_for(1), {}, {"digest": object()})
    assert manager.latest() is None and list(tmp_path.iterdir()) == []


def _damage_cases() -> list[tuple[str, str]]:
    return [("model.safetensors", "truncated"), ("state.pt", "sha256 mismatch"),
            ("state.pt", "missing"), ("meta.json", "meta.json")]


@pytest.mark.parametrize(("name", "problem"), _damage_cases())
def test_damaged_file_is_named_and_nothing_is_touched(tmp_path: Path, name: str, problem: str) -> None:
    manager = CheckpointManager(tmp_path, keep_last=3)
    for step in (10, 20):
        manager.save(step, tensors_for(step), {"step": step}, META)
    target = tmp_path / "step-000020" / name
    data = target.read_bytes()
    if problem == "truncated":
        target.write_bytes(data[: len(data) // 2])
    elif problem == "missing":
        target.unlink()
    else:  # flip one byte, same size
        i = len(data) // 2
        target.write_bytes(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:])
    before = snapshot(tmp_path)

    with pytest.raises(CheckpointError) as info:
        manager.load()
    message = str(info.value)
    assert name in message and problem in message
    assert "latest checkpoint" in message and "step-000010" in message  # the previous good one
    with pytest.raises(CheckpointError, match=name):
        manager.load(tmp_path / "step-000020")
    assert snapshot(tmp_path) == before  # load never writes or deletes
    step, tensors, state, _ = manager.load(tmp_path / "step-000010")
    assert step == 10 and state == {"step": 10} and torch.equal(tensors["w"], tensors_for(10)["w"])


def test_metadata_mismatch_lists_the_keys(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    manager.save(1, tensors_for(1), {}, META)
    expected = {"config_digest": "zzz", "method": "mage", "model": {"hidden_size": 64, "num_layers": 2},
                "seed": 3}
    with pytest.raises(CheckpointError) as info:
        manager.load(expected_metadata=expected)
    message = str(info.value)
    assert "3 key(s)" in message
    assert "config_digest: checkpoint has 'abc123', expected 'zzz'" in message
    assert "model.hidden_size: checkpoint has 32, expected 64" in message
    assert "seed: missing in the checkpoint" in message
    assert "method" not in message.split("key(s):")[1] and "num_layers" not in message


def test_crash_mid_save_leaves_the_last_good_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = CheckpointManager(tmp_path)
    manager.save(1, tensors_for(1), {"step": 1}, META)
    before = snapshot(tmp_path)

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError("disk full (simulated)")

    # fails after model.safetensors was written, before state.pt
    monkeypatch.setattr(ckpt_module.torch, "save", boom)
    with pytest.raises(OSError, match="simulated"):
        manager.save(2, tensors_for(2), {"step": 2}, META)
    monkeypatch.undo()
    assert snapshot(tmp_path) == before  # no half checkpoint, pointer unchanged, temp folder removed
    assert manager.latest() == tmp_path / "step-000001"

    # crash after the rename but before the pointer moved: the new folder is
    # complete but not committed; latest() still names step 1
    monkeypatch.setattr(ckpt_module, "write_text_atomic", boom)
    with pytest.raises(OSError, match="simulated"):
        manager.save(2, tensors_for(2), {"step": 2}, META)
    monkeypatch.undo()
    assert manager.latest() == tmp_path / "step-000001"
    assert manager.load()[0] == 1
    # the resumed run saves step 2 again over the uncommitted leftover
    manager.save(2, {"w": torch.zeros(1)}, {"step": 2, "again": True}, META)
    step, tensors, state, _ = manager.load()
    assert step == 2 and state["again"] and torch.equal(tensors["w"], torch.zeros(1))


def test_latest_is_never_overwritten_in_place(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    manager.save(3, tensors_for(3), {}, META)
    with pytest.raises(CheckpointError, match="refusing to overwrite"):
        manager.save(3, tensors_for(4), {}, META)
    assert torch.equal(manager.load()[1]["w"], tensors_for(3)["w"])


@pytest.mark.parametrize("keep_last", [1, 2, 3])
def test_keep_last_pruning(tmp_path: Path, keep_last: int) -> None:
    manager = CheckpointManager(tmp_path, keep_last=keep_last)
    for step in range(5):
        manager.save(step * 10, tensors_for(step), {}, META)
        kept = [s for s, _ in manager.checkpoints()]
        assert kept == [10 * s for s in range(max(0, step - keep_last + 1), step + 1)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["latest"] + [f"step-{10 * s:06d}" for s in range(5 - keep_last, 5)])


def test_no_checkpoint_yet(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path / "nothing")
    assert manager.latest() is None
    with pytest.raises(CheckpointError, match="no checkpoint found"):
        manager.load()


def test_engine_state_survives_the_disk_bit_for_bit(tmp_path: Path) -> None:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from mage_core.backends.base import LossSettings, Sample
    from mage_core.backends.torch_engine import TorchEngine

    def model(seed: int) -> Qwen3ForCausalLM:
        torch.manual_seed(seed)
        return Qwen3ForCausalLM(Qwen3Config(vocab_size=40, hidden_size=32, intermediate_size=64,
                                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                            head_dim=8, tie_word_embeddings=True))

    samples = [Sample(prompt=[1, 2, 3], advantage=1.0, candidates=[[4], [5]], choice=0),
               Sample(prompt=[6, 7], advantage=-0.5, response=[8, 9, 10])]
    loss = LossSettings(kl_coef=0.1)

    def go(e: TorchEngine) -> dict[str, float]:
        return e.step(samples, e.logprobs(samples), e.logprobs(samples, "reference"), loss)

    a = TorchEngine(model(0), 1e-2, reference_model="copy")
    go(a)
    manager = CheckpointManager(tmp_path)
    tensors, rest = pack_engine_state(a.state_dict())
    manager.save(1, tensors, {"engine": rest}, META)
    b = TorchEngine(model(1), 1e-2, reference_model="copy")
    _, tensors2, state2, _ = manager.load(expected_metadata=META)
    b.load_state_dict(unpack_engine_state(tensors2, state2["engine"]))
    for _ in range(2):
        assert go(a) == go(b)
    for (name, x), y in zip(a.model.state_dict().items(), b.model.state_dict().values()):
        assert torch.equal(x, y), name


CHILD = """
import sys, torch
from mage_core.trainers.checkpoint import CheckpointManager
manager = CheckpointManager(sys.argv[1], keep_last=2)
latest = manager.latest()
step = manager.load()[0] + 1 if latest else 0
print("ready", step, flush=True)
while True:
    w = torch.full((1024, 1024), float(step))  # 4 MiB, so that a kill often lands mid-write
    manager.save(step, {"w": w, "b": torch.arange(step + 1)}, {"step": step, "n": [step] * 3},
                 {"run": "sigkill", "digest": "d1"})
    step += 1
"""


def test_sigkill_at_random_moments_never_breaks_latest(tmp_path: Path) -> None:
    """Kill a saving loop with SIGKILL at random moments; latest() must always load.
    At least 5 kills, and more (up to 12) until one lands inside a save (a
    temporary folder left behind: about 60% of kills do)."""
    rng = np.random.default_rng(20260303)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    manager = CheckpointManager(tmp_path)
    last_step, kills, mid_save_kills = -1, 0, 0
    while kills < 5 or (mid_save_kills == 0 and kills < 12):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE,
                                 env=env, text=True)
        assert child.stdout is not None
        assert child.stdout.readline().startswith("ready")
        time.sleep(float(rng.uniform(0.05, 0.5)))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        kills += 1
        if any(p.name.startswith(".tmp-") for p in tmp_path.iterdir()):
            mid_save_kills += 1
        latest = manager.latest()
        assert latest is not None and not latest.name.startswith(".")
        step, tensors, state, _ = manager.load(expected_metadata={"run": "sigkill", "digest": "d1"})
        assert step >= last_step and latest.name == f"step-{step:06d}"
        assert torch.equal(tensors["w"], torch.full((1024, 1024), float(step)))
        assert torch.equal(tensors["b"], torch.arange(step + 1))
        assert state == {"step": step, "n": [step] * 3}
        last_step = step
    assert last_step > 5  # the children did save
    assert mid_save_kills >= 1  # at least one kill hit a save in progress
    # the next save clears what the killed ones left behind
    manager.save(last_step + 1, {"w": torch.zeros(1)}, {}, {"run": "sigkill", "digest": "d1"})
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_failed_write_of_the_state_file_is_the_os_error_naming_the_checkpoint(tmp_path: Path) -> None:
    # PyTorch's zip writer turns a failed write into "RuntimeError: ... unexpected pos"; the
    # checkpoint must report the OSError under it (here a 64 kB file-size limit: EFBIG), naming
    # the step folder, and leave no step behind. Small weights, a large state file.
    import resource
    import subprocess
    import sys

    script = (
        "import errno, sys, torch\n"
        "from mage_core.trainers.checkpoint import CheckpointManager\n"
        f"manager = CheckpointManager({str(tmp_path / 'ckpt')!r})\n"
        "try:\n"
        "    manager.save(1, {'w': torch.zeros(4)}, {'big': torch.zeros(100_000)}, {})\n"
        "except OSError as err:\n"
        "    print(err.errno == errno.EFBIG, err.filename)\n"
        "    sys.exit(0)\n"
        "sys.exit('no OSError')\n"
    )

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64_000, 64_000))

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, preexec_fn=limit,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", str(tmp_path / "ckpt" / "step-000001")]
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == []
