"""The policy a stage trains or plays and what runs it: tokenizer and model
(``build_policy``), the text <-> ids codec (``make_codec``), the train engine
(``make_engine``) and the generator (``make_generator``) that ``backend`` names, on
the stage's device (``stage_device``)."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import torch

from mage_core.config import Config, ConfigError, PolicyConfig
from mage_core.trainers.meta_rl import TokenCodec


def build_policy(cfg: Config, out: Path) -> tuple[Any, Any]:
    """The tokenizer and model: the embedded tiny Qwen3 (built once, saved to
    ``policy-init``) or a local HF checkpoint."""
    from mage_core.policy.model import TinyModelSpec, build_tiny_qwen3, load_policy, save_policy
    from mage_core.policy.tokenizer import build_tokenizer
    from mage_core.rollout.corpus import action_tokens, game_corpus

    m = cfg.model
    if m.source == "local":
        assert m.path is not None
        try:
            model, tokenizer = load_policy(m.path, dtype=getattr(torch, m.dtype))
        except (FileNotFoundError, ValueError) as err:
            raise ConfigError("params", [f"model.path: {err}"]) from None
        return tokenizer, model
    init_dir = out / "policy-init"
    if (init_dir / "config.json").exists():
        try:
            model, tokenizer = load_policy(init_dir)
        except (FileNotFoundError, ValueError) as err:
            raise ConfigError("command line", [f"--out: {err} (delete {init_dir} to build it again)"]) from None
        return tokenizer, model
    # The vocabulary is the task's, not the training seed's (random play of seed 0 whatever
    # ``seed``): runs of every seed can start from one warm start (issue 41). Before, a seed's
    # own random play could add words (MineSweeper's closed-cell counts) its warm start lacked.
    tokenizer = build_tokenizer(game_corpus(cfg, cfg.policy.prompt_style, seed=0), extra_tokens=action_tokens(cfg))
    if cfg.init_model() is not None:  # a warm start: its weights and tokenizer, if they fit this run
        tokenizer, model = warm_start(cfg, tokenizer)
        save_policy(model, tokenizer, init_dir)
        return tokenizer, model
    spec = TinyModelSpec(hidden_size=m.hidden_size, num_layers=m.num_layers, num_heads=m.num_heads,
                         num_kv_heads=m.num_kv_heads, head_dim=m.head_dim, intermediate_size=m.intermediate_size,
                         max_position_embeddings=m.max_position_embeddings)
    model = build_tiny_qwen3(spec, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                             bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, seed=cfg.seed)
    save_policy(model, tokenizer, init_dir)
    return tokenizer, model


#: What a warm start (``mage sft``) records of the run that made it, in ``warm_start.json``
#: beside its weights; a run that starts from it must agree on each.
WARM_START_KEYS = ("env.name", "policy.prompt_style", "policy.action_mode")
_SPEC_FIELDS = {"hidden_size": "hidden_size", "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads",
                "num_kv_heads": "num_key_value_heads", "head_dim": "head_dim",
                "intermediate_size": "intermediate_size", "max_position_embeddings": "max_position_embeddings"}


def warm_start_record(cfg: Config) -> dict[str, Any]:
    """``warm_start.json``: the values of ``WARM_START_KEYS`` in ``cfg``."""
    return {key: getattr(getattr(cfg, key.split(".")[0]), key.split(".")[1]) for key in WARM_START_KEYS}


def warm_start(cfg: Config, tokenizer: Any) -> tuple[Any, Any]:
    """The (tokenizer, model) of ``model.init``, checked against this run: the same task,
    prompt style and action mode (its ``warm_start.json``), the architecture of
    ``model``, and every word of this run's own vocabulary (``tokenizer``) in its
    vocabulary. ConfigError naming ``model.init`` and what differs."""
    import json

    from mage_core.policy.model import load_policy

    path = Path(str(cfg.init_model()))
    key = "model.init" if cfg.model.init is not None else f"warm_start.tasks ({cfg.env.name})"
    try:
        model, init_tokenizer = load_policy(path)
        record = json.loads((path / "warm_start.json").read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise ConfigError("params", [f"{key}: {err} (a warm start is `mage sft`'s model/ folder)"]) from None
    except (ValueError, json.JSONDecodeError) as err:
        raise ConfigError("params", [f"{key}: {path}: {err}"]) from None
    mine = warm_start_record(cfg)
    problems = [f"{key}: {path} was made with {name} {record.get(name)!r}, this run has {value!r}"
                for name, value in mine.items() if record.get(name) != value]
    problems += [f"{key}: {path} has {theirs} {getattr(model.config, theirs)}, model.{ours} is "
                 f"{getattr(cfg.model, ours)}" for ours, theirs in _SPEC_FIELDS.items()
                 if getattr(model.config, theirs, None) != getattr(cfg.model, ours)]
    missing = sorted(set(tokenizer.get_vocab()) - set(init_tokenizer.get_vocab()))
    if missing:
        problems.append(f"{key}: {path}'s vocabulary lacks {len(missing)} word(s) of this run's "
                        f"({', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}): make the warm start "
                        "with this run's env, policy and algorithm.agent")
    if problems:
        raise ConfigError("params", problems)
    return init_tokenizer, model


#: End-of-turn tokens a free-text response stops at, besides the tokenizer's EOS (Qwen chat models).
END_TOKENS = ("<|im_end|>", "<|endoftext|>")
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def make_codec(tokenizer: Any, policy: PolicyConfig | None = None) -> TokenCodec:
    """Text <-> ids for the policy. Prompts: BOS + the text, or with
    ``policy.chat_template`` the text as one user turn of the tokenizer's chat
    template (thinking on or off by ``policy.thinking``, Qwen3's
    ``enable_thinking``). The game parses the text after the thinking
    (``</think>``); a response still thinking when its budget ran out has no
    answer (an invalid action). Free text stops at EOS and the chat end tokens."""
    chat = policy is not None and policy.chat_template
    thinking = policy is not None and policy.thinking
    if chat and not getattr(tokenizer, "chat_template", None):
        raise ConfigError("params", ["policy.chat_template: true, but the model's tokenizer has no chat template "
                                     "(chat_template in tokenizer_config.json or chat_template.jinja); set "
                                     "policy.chat_template: false"])
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    from mage_core.policy.tokenizer import word_encoder

    # The embedded word-level tokenizer encodes word by word from a cache (same ids).
    encode_text = word_encoder(tokenizer) or functools.partial(tokenizer.encode, add_special_tokens=False)

    def encode_prompt(text: str) -> list[int]:
        if chat:
            rendered = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                     add_generation_prompt=True, enable_thinking=thinking)
            return tokenizer.encode(rendered, add_special_tokens=False)
        return bos + encode_text(text)

    action_ids: dict[str, list[int]] = {}  # a plain dict: the codec travels to Ray workers (cloudpickle)

    def encode_action(text: str) -> list[int]:
        # Candidates are a game's few action texts, encoded at every decision: cached.
        if text not in action_ids:
            action_ids[text] = tokenizer.encode(text, add_special_tokens=False)
        return list(action_ids[text])

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True)

    def answer(ids: list[int]) -> str:
        text = decode(ids)
        if THINK_CLOSE in text:
            return text.rsplit(THINK_CLOSE, 1)[1]
        return "" if THINK_OPEN in text else text

    vocab = tokenizer.get_vocab()
    stops = {tokenizer.eos_token_id} | {vocab[t] for t in END_TOKENS if t in vocab}
    return TokenCodec(encode_prompt, encode_action, decode, answer=answer if thinking else None,
                      stop_token_ids=tuple(sorted(t for t in stops if t is not None)))


def make_engine(cfg: Config, model: Any) -> Any:
    """The TrainEngine that ``backend.engine`` names, with the ``train`` and ``backend`` settings."""
    t, b = cfg.train, cfg.backend
    common = dict(learning_rate=t.learning_rate, weight_decay=t.weight_decay, max_grad_norm=t.max_grad_norm,
                  max_tokens_per_micro_batch=t.max_tokens_per_micro_batch,
                  reference_model="copy" if t.kl_coef > 0 else None, logits_chunk_tokens=b.logits_chunk_tokens)
    if b.engine == "deepspeed":
        from mage_core.backends.deepspeed_engine import DeepSpeedEngine

        return DeepSpeedEngine(model, **common, zero_stage=b.zero_stage, precision=b.precision,
                               offload_optimizer=b.offload_optimizer, micro_batch_size=b.micro_batch_size,
                               gradient_checkpointing=b.gradient_checkpointing)
    from mage_core.backends.torch_engine import TorchEngine

    return TorchEngine(model, **common)


def make_generator(cfg: Config, tokenizer: Any, model_dir: Path, model: Any = None, *,
                   copy_model: bool = True) -> Any:
    """The Generator that ``backend.generator`` names. ``hf``: on ``model`` (a copy
    of it when ``copy_model``, so the engine's in-place updates reach rollouts only
    through the weight sync). ``vllm``: vLLM's offline engine loads the weights
    saved in ``model_dir`` (``model`` is not needed) and takes every later sync in
    place; with ``rollout.workers`` the vLLM engines run on the Ray rollout actors
    instead, and the stage's process keeps an HF generator on ``model`` for what it
    plays itself (Kuhn Poker's exact greedy evaluation). ``openai``: a served model
    behind an OpenAI-compatible endpoint
    (evaluation only), checked to answer now. ``close()`` it at the end (vLLM's
    engine processes, the endpoint's request threads)."""
    b = cfg.backend
    if b.generator == "openai":
        from mage_core.backends.openai_generator import OpenAIGenerator

        o = b.openai  # (constrained actions with a served model are refused by the schema)
        served = OpenAIGenerator(tokenizer, o.base_url, o.model, o.api_key_env, o.timeout_s, o.max_retries,
                                 o.max_concurrency)
        try:
            served.check()  # a server that is down or serves another model fails now, before any work
        except BaseException:
            served.close()
            raise
        return served
    if b.generator == "vllm" and cfg.rollout.workers == 0:
        from mage_core.backends.vllm_generator import VLLMGenerator

        # On several ranks each rank runs its own engine inside its own process (vLLM's
        # "external_launcher" executor: no engine process, the device of LOCAL_RANK);
        # its parallel groups are one rank each, so the ranks' engines never wait on
        # one another. One rank keeps vLLM's default engine process.
        placement = {"distributed_executor_backend": "external_launcher"} if b.ranks > 1 else {}
        return VLLMGenerator(model_dir, **cfg.vllm_engine(), **placement)
    from mage_core.backends.hf import HFGenerator

    if model is None:
        raise ValueError(f"backend.generator: {b.generator}{' with rollout.workers' if b.generator == 'vllm' else ''}: "
                         "the stage's process generates with an in-memory HF model; none was given")
    return HFGenerator(copy.deepcopy(model) if copy_model else model, pad_token_id=tokenizer.pad_token_id,
                       device=stage_device(cfg))


def stage_device(cfg: Config) -> str:
    """Where a stage's model runs: ``cpu`` for ``backend.gpus: 0``, else ``cuda``
    (the first visible GPU; a ConfigError when torch sees none)."""
    gpus = cfg.backend.gpus
    if gpus == 0:
        return "cpu"
    if not torch.cuda.is_available():
        raise ConfigError("params", [f"backend.gpus: {gpus}, but torch sees no CUDA device here; set "
                                     "backend.gpus: 0 for a CPU run (`mage doctor` checks a profile)"])
    return "cuda"
