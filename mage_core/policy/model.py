"""The embedded tiny Qwen3 policy: build from a config, save, load.

The default profile trains a small model of the paper's architecture from
scratch on CPU (docs/architecture.md, "The embedded default"): ``Qwen3ForCausalLM``, the
same HF class as Qwen3-4B, built from a ``Qwen3Config`` with no download.
``load_policy`` is plain ``from_pretrained`` on a local folder, so the same
code loads a real Qwen3-4B checkpoint copied to disk.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from mage_core.io.atomic import hidden_os_error, replace_dir, sha256_file

#: The file ``save_policy`` writes beside a policy's files: the SHA-256 of each, checked on load.
MANIFEST = "mage-policy.json"
#: The key ``save_policy`` adds to a policy's config.json (the manifest's name): a folder this
#: project saved says so even once its manifest is gone; a downloaded model never holds it.
SAVED_KEY = "mage_policy_manifest"
#: What ``from_pretrained`` adds to a tokenizer's init kwargs (and ``save_pretrained`` would
#: write into tokenizer_config.json): a resumed run's best/ must be the bytes of an uninterrupted one's.
LOAD_ONLY_KWARGS = ("is_local", "local_files_only")


@dataclass(frozen=True)
class TinyModelSpec:
    """Size of the embedded model (~0.1M parameters plus vocab x hidden)."""

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 16
    intermediate_size: int = 128
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = True

    def __post_init__(self) -> None:
        errors = []
        for name, value in asdict(self).items():
            if name == "tie_word_embeddings":
                if not isinstance(value, bool):
                    errors.append(f"tie_word_embeddings must be a bool, got {value!r}")
            elif not isinstance(value, int) or isinstance(value, bool) or value < 1:
                errors.append(f"{name} must be an int >= 1, got {value!r}")
        if not errors and self.num_heads % self.num_kv_heads:
            errors.append(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads}) "
                "for grouped-query attention"
            )
        if not errors and self.head_dim % 2:
            errors.append(f"head_dim must be even (rotary embeddings rotate pairs), got {self.head_dim}")
        if errors:
            raise ValueError("invalid TinyModelSpec: " + "; ".join(errors))


def build_tiny_qwen3(
    spec: TinyModelSpec,
    vocab_size: int,
    pad_token_id: int,
    bos_token_id: int,
    eos_token_id: int,
    seed: int,
) -> Qwen3ForCausalLM:
    """A freshly initialised float32 ``Qwen3ForCausalLM``, identical for equal ``seed``.

    HF initialises weights from torch's global RNG; the build runs inside
    ``torch.random.fork_rng`` so the caller's global RNG state is unchanged.
    """
    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be an int >= 1, got {vocab_size!r}")
    for name, token_id in (("pad_token_id", pad_token_id), ("bos_token_id", bos_token_id),
                           ("eos_token_id", eos_token_id)):
        if not isinstance(token_id, int) or not 0 <= token_id < vocab_size:
            raise ValueError(f"{name} must be an id in [0, {vocab_size}), got {token_id!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an int, got {seed!r}")
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        pad_token_id=pad_token_id,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        use_sliding_window=False,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    return model.to(torch.float32).eval()


def save_policy(model: PreTrainedModel, tokenizer: Any, directory: str | os.PathLike[str],
                state_dict: Mapping[str, torch.Tensor] | None = None,
                json_files: Mapping[str, Any] | None = None) -> Path:
    """Write model (safetensors) and tokenizer to ``directory``, atomically, with the
    manifest (``MANIFEST``) and the mark that this project saved it (``SAVED_KEY``).
    ``state_dict``: the weights to write instead of the model's own (whole weights
    gathered from a ZeRO-3 engine, whose model holds only slices). ``json_files``: name ->
    data of JSON files saved beside them (e.g. a warm start's ``warm_start.json``), in the
    manifest like the rest: a policy folder holds nothing the manifest does not list.

    Everything is written to a temporary folder next to the target, which is then
    renamed into place; an existing ``directory`` is replaced only once the new
    one is complete, so a crash never leaves a half-written policy.
    """
    target = Path(directory)
    try:
        with replace_dir(target) as staging:
            model.save_pretrained(staging, safe_serialization=True,
                                  state_dict=dict(state_dict) if state_dict is not None else None)
            tokenizer.save_pretrained(staging)
            for name, data in (json_files or {}).items():
                (staging / name).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
            _mark_saved(staging / "config.json")
            write_manifest(staging)
    except Exception as err:
        io_error = hidden_os_error(err, target)
        if io_error is not None:  # e.g. safetensors' "(os error 28)": disk full
            raise io_error from err
        raise
    return target


def _mark_saved(config_file: Path) -> None:
    """Add ``SAVED_KEY`` to a config.json, in the layout ``save_pretrained`` writes (sorted keys,
    indent 2), so that saving a loaded policy again gives the same bytes."""
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config[SAVED_KEY] = MANIFEST
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def saved_by_this_project(directory: Path) -> bool:
    """Whether the folder's config.json carries ``SAVED_KEY`` (False when it cannot be read:
    the loader names that problem)."""
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and SAVED_KEY in config


def write_manifest(directory: Path) -> None:
    """``MANIFEST`` in ``directory``: every file's SHA-256 (``verify_policy`` checks them)."""
    files = {p.relative_to(directory).as_posix(): sha256_file(p)
             for p in sorted(directory.rglob("*")) if p.is_file() and p.name != MANIFEST}
    (directory / MANIFEST).write_text(json.dumps({"format": 1, "sha256": files}, indent=2, sort_keys=True) + "\n")


def verify_policy(directory: str | os.PathLike[str]) -> bool:
    """Check a policy folder against the SHA-256 its ``MANIFEST`` recorded when it was
    saved: ``ValueError`` naming the first file missing, changed, or present but not listed.
    A folder without a manifest is not checked (False) if nothing says this project saved it
    (a downloaded model, or a policy saved before 2026-11-27); one whose config.json carries
    ``SAVED_KEY`` has lost its manifest: ``ValueError``. True when every file matched."""
    path = Path(directory)
    manifest = path / MANIFEST
    if not manifest.is_file():
        if saved_by_this_project(path):
            raise ValueError(f"{manifest} is missing, yet {path / 'config.json'} says this project saved the "
                             f"folder ({SAVED_KEY}): its files cannot be checked; restore the folder, or retrain")
        return False
    try:
        recorded = json.loads(manifest.read_text())["sha256"]
        if not isinstance(recorded, dict):
            raise TypeError("sha256 is not an object")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{manifest} is unreadable ({error}): the policy's files cannot be checked; "
                         "save the policy again (retrain, or restore the folder)") from None
    unlisted = sorted(rel for rel in (p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())
                      if rel != MANIFEST and rel not in recorded)
    if unlisted:
        more = f" (and {len(unlisted) - 1} more)" if len(unlisted) > 1 else ""
        raise ValueError(f"{path / unlisted[0]}{more} was not saved with the policy ({MANIFEST} does not list it): "
                         f"a policy folder holds only what was saved there; remove it, or restore the folder")
    for name, digest in sorted(recorded.items()):
        file = path / name
        if not file.is_file():
            raise ValueError(f"{file} is missing: {path} is not the policy that was saved there "
                             f"({MANIFEST} lists it); retrain, or restore the folder")
        found = sha256_file(file)
        if found != digest:
            raise ValueError(f"{file} changed since it was saved (SHA-256 {found[:12]}..., recorded "
                             f"{digest[:12]}... in {MANIFEST}): the policy is corrupted; retrain, or restore the folder")
    return True


def load_tokenizer(directory: str | os.PathLike[str]) -> Any:
    """The tokenizer saved in a policy folder (``ValueError`` naming the folder if it cannot be read)."""
    path = Path(directory)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as error:
        raise ValueError(f"cannot load the tokenizer in {path}: {error}") from error
    for key in LOAD_ONLY_KWARGS:  # how it was loaded, not what it is: a save writes what was loaded
        tokenizer.init_kwargs.pop(key, None)
    return tokenizer


def load_policy(
    directory: str | os.PathLike[str], dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
    verified: bool = False,
) -> tuple[PreTrainedModel, Any]:
    """``(model, tokenizer)`` from a local folder (ours, or e.g. a Qwen3-4B copy), in eval mode.

    Raises ``FileNotFoundError`` for a missing folder, config or weights, and
    ``ValueError`` when the files do not fit together (missing or mis-shaped
    weights, a tokenizer larger than the model's vocabulary) or differ from what
    ``save_policy`` wrote (``verify_policy``; ``verified``: the caller has just run it,
    so the files are not hashed twice).
    """
    path = Path(directory)
    if not path.is_dir():
        raise FileNotFoundError(f"policy directory {path} does not exist (or is not a directory)")
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} holds no config.json: not a saved policy (save_policy writes one)")
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise FileNotFoundError(f"{path} holds no weights (*.safetensors or *.bin)")
    if not verified:
        verify_policy(path)  # a policy this project saved: its files as they were written
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
    except Exception as error:  # transformers raises many kinds; the cause is kept
        raise ValueError(f"{path / 'config.json'} is not a valid model config: {error}") from error
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            path, config=config, local_files_only=True, dtype=dtype, output_loading_info=True
        )
    except Exception as error:
        raise ValueError(f"cannot load the model in {path}: {error}") from error
    problems = []
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        found = sorted(str(k) for k in info.get(kind, ()) if k)
        if found:
            problems.append(f"{kind.replace('_', ' ')}: {', '.join(found[:5])}{' ...' if len(found) > 5 else ''}")
    if problems:
        raise ValueError(f"the weights in {path} do not fit its config.json ({'; '.join(problems)})")
    tokenizer = load_tokenizer(path)
    vocab_size = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > vocab_size:
        raise ValueError(
            f"the tokenizer in {path} has {len(tokenizer)} tokens but the model's vocabulary has {vocab_size}: "
            "they were not saved together"
        )
    return model.to(device).eval(), tokenizer
