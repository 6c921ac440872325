"""``mage train``: train a policy with a method preset, resumable at any point.

Composition root: config -> tokenizer + model -> engine + generator -> trainer.
Outputs under ``--out`` (default ``train.output_dir``):

- ``policy-init/``: the initial policy and tokenizer (embedded default), so a
  resumed run rebuilds exactly the same tokenizer;
- ``checkpoints/step-XXXXXX/``: safetensors weights + optimizer/RNG state,
  written atomically (``mage_core.trainers.checkpoint``);
- ``best/``: the policy with the best evaluation score so far;
- ``metrics.jsonl``: one line per iteration (and per evaluation);
- ``summary.json``: the final evaluation and where everything is;
- ``superseded/<UTC time>/``: the outputs of an earlier run that ``--resume auto``
  did not continue (other params or code, or finished), moved aside, never deleted.

With ``tracking.mlflow`` the run is an MLflow run named and tagged by its stage,
environment, method and seed (``mage_core.tracking.runs.StageIdentity``), sampling
the machine (``tracking.system_metrics``); at its end a trained method's ``best/``
becomes a version of the registered model ``mage-<env>-<method>``
(``tracking.register_models``, ``mage_core.tracking.registry``).

``metrics.jsonl`` and ``summary.json`` are DVC-cached outputs and hold no
wall-clock time (``mage_core.tracking.jsonl.TIMING_PREFIXES``): two runs of the
same seeded training write the same bytes. Timings (``train/time/*``, the total
in ``train/time/total_s``) go to MLflow and the console.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mage_core.config import Config, ConfigError, PolicyConfig, load_config
from mage_core.envs.registry import games_with, task
from mage_core.io.atomic import check_writable, writable_problem, write_json_atomic, write_text_atomic
from mage_core.io.dotted import flatten
from mage_core.rollout.transcript import transcripts
from mage_core.tracking.jsonl import JsonlLogger, without_timings
from mage_core.tracking.runs import (RUN_ID_ENV, StageIdentity, StageTracker, check_tracking, interrupted_run,
                                     open_mlflow_run)
from mage_core.trainers.checkpoint import (
    CheckpointError,
    CheckpointManager,
    capture_rng,
    pack_engine_state,
    restore_rng,
    unpack_engine_state,
)
from mage_core.trainers.data_parallel import Ranks, check_rendezvous, launch_command, launched_world
from mage_core.trainers.meta_rl import MetaRLTrainer, TokenCodec, TrainState, headline, selection_score

console = Console()


#: Settings a checkpoint may be resumed under whatever their values: left out of the
#: config digest (and of the configuration a checkpoint stores), so changing one neither
#: stops ``--resume`` nor makes ``--resume auto`` start afresh. Dotted keys or whole sections.
RESUME_INDEPENDENT_KEYS: dict[str, str] = {
    # Cannot change any output (metrics.jsonl, best/, summary.json, the checkpoints' contents):
    "tracking": "MLflow on/off, experiment, system metrics, model registration: where the run is also "
                "recorded, never what it computes",
    "train.output_dir": "where the outputs go (--out wins), not what they hold",
    "train.keep_checkpoints": "how many old checkpoints are kept on disk; the run never reads them back",
    "train.checkpoint_every": "when the state is saved; saving reads no random number and changes no state",
    "rollout.workers": "where rollouts run (in-process or on Ray workers): the same meta-episodes either way",
    "rollout.ray_address": "which Ray cluster runs the rollout workers (as rollout.workers)",
    # The data-parallel ranks play and average the same batch: a run may resume on another
    # count where the engine's state allows it (DeepSpeedEngine.load_state_dict says when not).
    "backend.ranks": "how many processes share the same batch",
    "tournament": "read by `mage tournament` only",
    "reproduce": "read by the pipeline; a run's own values (reproduce.iterations, its set) reach training "
                 "through the train/env/algorithm keys they resolve to",
    "sweep": "read by `mage sweep` only; a point's values reach training through the keys they set",
    # Run length: stopping on a time budget changes where the run ends, not what each
    # iteration computes. (train.iterations is not here: the learning-rate and entropy
    # schedules run over it, see SCHEDULE_FREE_KEYS.)
    "train.time_budget_minutes": "when the run stops, not what each iteration computes",
    # Not here, although they look like bookkeeping: train.eval_every (which policies are
    # evaluated, so which one becomes best/), train.num_threads (CPU reductions in another order).
}
#: Left out as well when neither schedule depends on the run's length (train.lr_schedule
#: constant and train.entropy_coef_final equal to train.entropy_coef): a run may then be
#: continued for longer than it was started for.
SCHEDULE_FREE_KEYS = ("train.iterations",)


def resume_config(cfg: Config) -> dict[str, Any]:
    """The configuration a checkpoint must have been written under to be resumed: all
    of it but ``RESUME_INDEPENDENT_KEYS`` (stored in every checkpoint, compared on resume)."""
    data = cfg.model_dump(mode="json")
    t = cfg.train
    schedule_free = t.lr_schedule == "constant" and t.entropy_coef_final == t.entropy_coef
    for key in (*RESUME_INDEPENDENT_KEYS, *(SCHEDULE_FREE_KEYS if schedule_free else ())):
        *path, last = key.split(".")
        section = data
        for part in path:
            section = section.get(part, {})
        section.pop(last, None)
    return json.loads(json.dumps(data))  # as a checkpoint's JSON stores it (tuples become lists)


def config_digest(cfg: Config) -> str:
    """What must match for a checkpoint to be resumed: the digest of ``resume_config``."""
    return hashlib.sha256(json.dumps(resume_config(cfg), sort_keys=True).encode()).hexdigest()[:16]


def config_differences(stored: dict[str, Any], current: dict[str, Any], limit: int = 5) -> str:
    """The dotted keys where ``stored`` (a checkpoint's ``resume_config``) and ``current``
    differ, with both values, on one line: the first ``limit``, then how many more."""
    old, new = flatten(stored), flatten(current)
    absent = object()
    lines = []
    for key in sorted(old.keys() | new.keys()):
        was, now = old.get(key, absent), new.get(key, absent)
        if was != now:
            lines.append(f"{key}: {'absent' if was is absent else json.dumps(was)} in the checkpoint, "
                         f"{'absent' if now is absent else json.dumps(now)} now")
    more = len(lines) - limit
    return "; ".join(lines[:limit]) + (f"; and {more} more" if more > 0 else "")


def code_digest() -> str:
    """The source of the installed ``mage_core`` package (every .py file, by relative
    path): a run resumed by ``--resume auto`` must have been written by the same code."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


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
    tokenizer = build_tokenizer(game_corpus(cfg, cfg.policy.prompt_style, seed=cfg.seed),
                                extra_tokens=action_tokens(cfg))
    spec = TinyModelSpec(hidden_size=m.hidden_size, num_layers=m.num_layers, num_heads=m.num_heads,
                         num_kv_heads=m.num_kv_heads, head_dim=m.head_dim, intermediate_size=m.intermediate_size,
                         max_position_embeddings=m.max_position_embeddings)
    model = build_tiny_qwen3(spec, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                             bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, seed=cfg.seed)
    save_policy(model, tokenizer, init_dir)
    return tokenizer, model


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


def run(params: str, out: str | None = None, resume: bool | Literal["auto"] = False, iterations: int | None = None,
        time_budget_minutes: float | None = None, overrides: Sequence[str] = (), run: str | None = None) -> int:
    cfg = load_config(params, overrides, run)
    overrides_given = list(overrides)
    overrides: dict[str, Any] = {}
    if iterations is not None:
        if iterations < 1:
            raise ConfigError("command line", [f"--iterations: must be >= 1, got {iterations}"])
        overrides["iterations"] = iterations
    if time_budget_minutes is not None:
        if time_budget_minutes < 0:
            raise ConfigError("command line", [f"--time-budget: must be >= 0, got {time_budget_minutes}"])
        overrides["time_budget_minutes"] = time_budget_minutes
    if overrides:
        cfg = cfg.model_copy(update={"train": cfg.train.model_copy(update=overrides)})
    out_dir = Path(out or cfg.train.output_dir)
    ranks = cfg.backend.ranks
    if ranks > 1 and launched_world() == 1:
        # The stage launches its own ranks: the same command, as `ranks` processes under torchrun.
        args = ["train", "--params", str(params), "--out", str(out_dir)]
        args += {False: [], True: ["--resume"], "auto": ["--resume", "auto"]}[resume]
        args += ["--iterations", str(iterations)] if iterations is not None else []
        args += ["--time-budget", str(time_budget_minutes)] if time_budget_minutes is not None else []
        args += ["--run", run] if run else []
        for override in overrides_given:
            args += ["--set", override]
        from mage_core.backends import require_built

        require_built(cfg.backend.generator, cfg.backend.engine)  # before any process starts
        check_data_parallel(cfg, ranks)
        stage_device(cfg)  # GPUs asked for and not there: now, not once per rank
        check_out_dir(out_dir)  # an unwritable --out: one line now, not from rank 0 under torchrun
        command = launch_command(ranks, args)
        console.print(f"launching {ranks} ranks: {' '.join(command)}", soft_wrap=True)
        return subprocess.call(command)
    summary = train(cfg, out_dir, resume=resume, run_name=run)
    if summary.get("rank", 0) == 0:
        console.print(f"final evaluation headline: {summary['headline']:.4f}; trained in {summary['minutes']:.1f} "
                      f"min; outputs in {out_dir}")
    return 0


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

        o = b.openai
        if cfg.policy.action_mode != "free":
            raise ConfigError("params", ["backend.generator: openai answers in free text only (the completions "
                                         "route scores no candidates); set policy.action_mode: free"])
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


def check_data_parallel(cfg: Config, world: int) -> None:
    """A run of ``world`` ranks: what must hold before any rank starts (ConfigError
    naming the key and the fix)."""
    if world == 1:
        return
    b, t, algo = cfg.backend, cfg.train, cfg.algorithm
    problems = []
    if b.engine != "deepspeed":
        problems.append(f"backend.ranks {world}: data-parallel training runs on the DeepSpeed engine; set "
                        "backend.engine: deepspeed")
    if cfg.algorithm.agent != "trained":
        problems.append(f"backend.ranks {world}: algorithm.agent {cfg.algorithm.agent} is never trained (and its "
                        "memory bank lives in one process); set backend.ranks: 1")
    batch = t.groups_per_iteration * algo.group_size
    if batch % world:
        problems.append(f"backend.ranks {world} does not divide the batch of train.groups_per_iteration x "
                        f"algorithm.group_size = {t.groups_per_iteration} x {algo.group_size} = {batch} "
                        f"meta-episodes; make it a multiple of {world}")
    elif batch // t.mini_batches_per_epoch < world:
        problems.append(f"train.mini_batches_per_epoch {t.mini_batches_per_epoch}: a mini-batch of {batch} / "
                        f"{t.mini_batches_per_epoch} meta-episodes leaves some of the {world} ranks without one; "
                        f"use at most {batch // world} mini-batches")
    if b.gpus and world != b.gpus:
        problems.append(f"backend.ranks {world} with backend.gpus {b.gpus}: one rank per GPU; make them equal")
    if problems:
        raise ConfigError("params", problems)


def train(cfg: Config, out_dir: Path, resume: bool | Literal["auto"] = False,
          stop_after: int | None = None, run_name: str | None = None) -> dict[str, Any]:
    """Train; returns the summary. ``resume``: False refuses a folder that holds
    checkpoints; True continues the latest (its configuration must match);
    "auto" continues it when the configuration and code match and the run is
    unfinished, and otherwise moves the old run aside (``move_aside``) and starts
    afresh (a pipeline stage re-run). ``stop_after`` ends the process's work
    after that many iterations of this call (tests use it to interrupt a run).
    ``run_name``: the run of ``reproduce.runs`` (or sweep point) this is, for MLflow."""
    from mage_core.backends import require_built

    require_built(cfg.backend.generator, cfg.backend.engine)  # before anything is written
    if cfg.backend.engine == "deepspeed":
        from mage_core.backends.deepspeed_engine import import_deepspeed

        import_deepspeed()  # a broken install fails now, before anything is written
    world = launched_world()
    if world != cfg.backend.ranks:
        raise ConfigError("params", [f"backend.ranks {cfg.backend.ranks}, but the launcher started {world} "
                                     f"process(es) (WORLD_SIZE); set backend.ranks: {world}, or run `mage train` "
                                     "without a launcher (it launches its own ranks)"])
    check_data_parallel(cfg, world)
    device = stage_device(cfg)  # no CUDA for backend.gpus: 1 fails now
    if cfg.backend.generator == "openai" and cfg.algorithm.agent == "trained":
        raise ConfigError("params", ["backend.generator: openai serves a fixed model for evaluation (no "
                                     "log-probabilities for PPO, no weight sync); train with hf or vllm, or use a "
                                     "prompting preset (react, reflexion, a_mem, memento)"])
    if cfg.train.select_on == "exact_greedy":
        from mage_core.evaluation.kuhn_exact import exact_greedy_specs

        exact = games_with("exact_values")
        if cfg.env.name not in exact or exact_greedy_specs(
                cfg.population.entries(cfg.env.name), cfg.opponents.settings(), 1, "same") is None:
            raise ConfigError("params", [f"train.select_on: exact_greedy needs env.name {' or '.join(exact)} and a "
                                         "population of deterministic opponents (the exact sum runs over the deals "
                                         "only); set train.select_on: sampled"])
    from mage_core.stages.task_data import check_task_data

    check_task_data(cfg, "train")  # WebShop's catalogue: before anything is written
    import transformers

    transformers.utils.logging.disable_progress_bar()  # our own progress bar is the one to read
    torch.set_num_threads(cfg.train.num_threads)
    ranks = join_ranks(world)
    main = ranks.main  # rank 0 alone writes; the others read what it wrote
    checkpoints = CheckpointManager(out_dir / "checkpoints", keep_last=cfg.train.keep_checkpoints)
    digest, code, stored_config = config_digest(cfg), code_digest(), resume_config(cfg)
    problem, latest = None, None
    if main:
        try:
            latest = _prepare_out_dir(out_dir, checkpoints, resume, digest, code, cfg)
        except ConfigError as err:
            problem = (err.source, err.problems)
    problem = ranks.broadcast(problem)  # every rank stops with rank 0's error
    if problem is not None:
        raise ConfigError(*problem)
    latest_name = ranks.broadcast(latest.name if main and latest is not None else None)
    latest = checkpoints.directory / latest_name if latest_name is not None else None
    if main:
        tokenizer, model = build_policy(cfg, out_dir)  # writes policy-init/ on a fresh run
    ranks.barrier()
    if not main:
        tokenizer, model = build_policy(cfg, out_dir)  # reads rank 0's policy-init/ (or model.path)
    model.to(device)
    if cfg.backend.engine == "deepspeed" and cfg.backend.precision == "bf16":
        # DeepSpeed trains bf16 weights (fp32 master copies in its optimizer): the rollout copy and the
        # reference policy, both taken before the engine casts the model, must hold the same bf16 weights,
        # or PPO's ratio and the KL term start away from 1 and 0.
        model.to(torch.bfloat16)
    t = cfg.train
    model_dir = Path(cfg.model.path) if cfg.model.source == "local" else out_dir / "policy-init"
    generator = make_generator(cfg, tokenizer, model_dir, model)
    engine = make_engine(cfg, model)
    trainer = MetaRLTrainer(cfg, engine, generator, make_codec(tokenizer, cfg.policy), ranks)
    state = TrainState()
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 1]))
    torch_rng = torch.Generator().manual_seed(cfg.seed)
    if resume and latest is not None:
        step, tensors, saved, _ = checkpoints.load(latest, expected_metadata={"config_digest": digest})
        engine.load_state_dict(unpack_engine_state(tensors, saved["engine"]))
        restore_rng(saved["rng"], numpy=rng, torch_generator=torch_rng)
        state = TrainState(iteration=step, best_score=saved["best_score"], best_iteration=saved["best_iteration"])
        trainer.load_policy_state(engine.policy_state_dict())
        trainer.load_league_state(saved.get("league"))
        if main:
            console.print(f"resumed from {latest} at iteration {step}")
    continued = state.iteration > 0  # a resumed run appends to its log, cut back to the checkpoint
    mlflow_run, reopened = None, None
    if cfg.tracking.mlflow and main:
        if continued and not os.environ.get(RUN_ID_ENV):  # a flow's stage logs into the flow's run
            # The interrupted run continues: its metrics stay in one MLflow run.
            from mage_core.tracking.mlflow_tracker import default_tracking_uri

            reopened = interrupted_run(default_tracking_uri(Path.cwd()), cfg.tracking.experiment,
                                       str(out_dir.resolve()), digest)
        mlflow_run = open_mlflow_run("train", cfg.tracking.experiment, digest, Path.cwd(),
                                     identity=StageIdentity.of("train", cfg, run_name),
                                     system_metrics=cfg.tracking.system_metrics,
                                     flush_timeout_s=cfg.tracking.flush_timeout_s, continue_run=reopened)
    jsonl = (JsonlLogger(out_dir / "metrics.jsonl", resume_from_step=state.iteration if continued else None)
             if main else None)
    logger = StageTracker([x for x in (jsonl, mlflow_run) if x is not None], mlflow_run)
    params = {"config_digest": digest, **flatten(cfg.model_dump(mode="json"))}
    if jsonl is not None and not continued:
        jsonl.log_params(params)
    if mlflow_run is not None:  # tagged with where it resumed (a reopened run has its params already)
        if reopened is None:
            mlflow_run.log_params(params)
        mlflow_run.set_tags({"mage.output_dir": str(out_dir.resolve()), "mage.resumed_from_step": str(state.iteration),
                             "mage.ranks": str(ranks.world)})
    # A prompting or memory baseline (algorithm.agent) is never updated: its "training" is the
    # selection-set evaluation of the model as given, saved as best/ like any run's.
    planned = t.iterations if cfg.algorithm.agent == "trained" else 0
    try:
        started = time.monotonic()
        k = trainer.eval_settings.num_episodes
        done_here = 0
        last_eval: tuple[int, dict[str, float], list[Any]] = (-1, {}, [])
        columns = (TextColumn("train {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[status]}"))
        with Progress(*columns, console=console, transient=False, disable=not main) as progress:
            bar = progress.add_task(cfg.algorithm.preset, total=planned, completed=state.iteration, status="")
            while state.iteration < planned:
                it = state.iteration
                metrics = trainer.iteration(it, rng, torch_rng)
                state.iteration = it + 1
                metrics.update(trainer.update_league(state.iteration))  # train.league: its next members
                if t.eval_every and (state.iteration % t.eval_every == 0 or state.iteration == planned):
                    eval_metrics, eval_metas = trainer.evaluate()
                    last_eval = (state.iteration, eval_metrics, eval_metas)
                    metrics.update(eval_metrics)
                    score = selection_score(eval_metrics, trainer.game, k, t.select_on)
                    if better(score, state.best_score, t.select_on):
                        state.best_score, state.best_iteration = score, state.iteration
                        save_best(engine, model, tokenizer, out_dir / "best", ranks)
                logger.log_metrics(state.iteration, metrics)
                # Rank 0's clock decides for every rank (they must stop at the same iteration).
                over_budget = ranks.broadcast(bool(t.time_budget_minutes)
                                              and time.monotonic() - started > 60 * t.time_budget_minutes)
                if state.iteration % t.checkpoint_every == 0 or state.iteration == planned or over_budget:
                    _save(checkpoints, engine, state, rng, torch_rng, digest, code, ranks, trainer.league.state(),
                          stored_config)
                progress.update(bar, advance=1, status=_status(metrics, trainer.game, k))
                done_here += 1
                if stop_after is not None and done_here >= stop_after:
                    logger.close("KILLED")
                    return {"interrupted": True, "iteration": state.iteration, "headline": float("nan")}
                if over_budget and main:
                    console.print(f"time budget of {t.time_budget_minutes} min reached at iteration "
                                  f"{state.iteration}")
                    break
        # The fixed set is deterministic: an evaluation at this very iteration is the final one.
        final, final_metas = (last_eval[1], last_eval[2]) if last_eval[0] == state.iteration else trainer.evaluate()
        logger.log_metrics(state.iteration, {f"final/{key}": v for key, v in final.items()})
        final_score = selection_score(final, trainer.game, k, t.select_on)
        if better(final_score, state.best_score, t.select_on) or ranks.broadcast(not (out_dir / "best").exists()):
            # the final policy is evaluated on the same set: it may be the best (and with
            # eval_every 0 it is the only one evaluated)
            state.best_score, state.best_iteration = final_score, state.iteration
            save_best(engine, model, tokenizer, out_dir / "best", ranks)
        summary = {  # no wall-clock time: a DVC-cached output
            "method": cfg.algorithm.preset, "game": trainer.game, "iterations": state.iteration,
            "headline": headline(final, trainer.game, k), "best_score": state.best_score,
            "best_iteration": state.best_iteration, "final_eval": without_timings(final), "config_digest": digest,
            # The set these figures come from picked best/: report figures come from `mage evaluate`.
            "selection_set": {"seed": cfg.evaluation.selection_seed, "select_on": t.select_on,
                              "meta_episodes_per_opponent_seat": cfg.evaluation.meta_episodes_per_opponent_seat},
        }
        seconds = time.monotonic() - started  # this process's share of the run, when resumed
        if main:
            write_json_atomic(out_dir / "summary.json", summary)
            logger.log_metrics(state.iteration, {"train/time/total_s": seconds})  # MLflow only
            write_text_atomic(out_dir / "transcripts.txt", transcripts(final_metas, trainer.codec.decode))
            for name in ("summary.json", "metrics.jsonl", "transcripts.txt"):
                logger.log_artifact(out_dir / name)
            if mlflow_run is not None and cfg.tracking.register_models and cfg.algorithm.agent == "trained":
                mlflow_run.extra("registering best/", lambda: register(mlflow_run, out_dir / "best", state,
                                                                       t.select_on))
        logger.close()
        ranks.barrier()  # no rank leaves before rank 0 has written everything
        return {**summary, "minutes": seconds / 60, "rank": ranks.rank}
    except BaseException as err:
        logger.close("KILLED" if isinstance(err, KeyboardInterrupt) else "FAILED")
        raise
    finally:
        trainer.close()  # the Ray rollout workers, if any
        generator.close()  # vLLM's engine processes, if any


def register(mlflow_run: Any, best: Path, state: TrainState, select_on: str) -> None:
    """``best/`` as a new version of the registered model ``mage-<env>-<method>``
    (``mage_core.tracking.registry``), tagged with the run's lineage."""
    from mage_core.tracking.registry import model_uri, register_best

    started = time.perf_counter()
    name, version = register_best(mlflow_run, best, mlflow_run.tags(), {
        "mage.best_iteration": state.best_iteration, "mage.best_score": state.best_score,
        "mage.select_on": select_on})
    mlflow_run.set_tags({"mage.model_uri": model_uri(name, version)})
    console.print(f"best/ registered in MLflow as {model_uri(name, version)} "
                  f"({time.perf_counter() - started:.1f} s)", soft_wrap=True)


def better(score: float, best: float, select_on: str) -> bool:
    """Whether ``score`` replaces the best policy. An exact value ties exactly when two
    policies play the same greedy strategy: the later one, trained longer and so
    closer to its greedy play when sampled, is kept (measured on same-deal Kuhn: the
    greedy value reached the ceiling at iteration 25, when sampled play was far
    below it). A sampled figure must be strictly higher."""
    return score >= best if select_on == "exact_greedy" else score > best


def _mismatch(checkpoints: CheckpointManager, latest: Path | None, cfg: Config, digest: str) -> str | None:
    """How the configuration ``latest`` was written under differs from ``cfg`` (the
    differing keys with both values, on one line), or None when it matches or cannot
    be read (a damaged checkpoint is not judged here: loading it reports the damage)."""
    if latest is None:
        return None
    try:
        metadata = checkpoints.verify(latest)["metadata"]
    except CheckpointError:
        return None
    if metadata.get("config_digest") == digest:
        return None
    if not isinstance(metadata.get("config"), dict):
        return ("its config digest differs from this run's (the checkpoint predates the listing of "
                "the differing keys)")
    return "differs at " + config_differences(metadata["config"], resume_config(cfg))


def _not_resumable(checkpoints: CheckpointManager, latest: Path | None, cfg: Config, digest: str,
                   code: str) -> str | None:
    """Why ``--resume auto`` must not continue ``latest``, or None when it should: only
    an unfinished run of the same configuration and the same code is continued (what
    a crashed or killed stage leaves). A damaged checkpoint is not judged here:
    loading it reports the damage."""
    if latest is None:
        return None
    try:
        meta = checkpoints.verify(latest)
    except CheckpointError:
        return None
    mismatch = _mismatch(checkpoints, latest, cfg, digest)
    if mismatch is not None:
        return f"the configuration of {latest.name} {mismatch}"
    if meta["metadata"].get("code_digest") != code:
        return "the checkpoints were written by other code (mage_core changed)"
    if int(meta["step"]) >= cfg.train.iterations:
        return f"the run it holds is finished ({cfg.train.iterations} iterations)"
    return None


#: What a run writes under its output folder; ``--resume auto`` moves these aside together.
RUN_OUTPUTS = ("checkpoints", "policy-init", "best", "metrics.jsonl", "summary.json", "transcripts.txt")
#: Where ``--resume auto`` moves a run it does not continue: ``<out>/superseded/<UTC time>/``.
SUPERSEDED = "superseded"


def move_aside(out_dir: Path) -> Path | None:
    """Move a previous run's outputs (``RUN_OUTPUTS``) into a new folder
    ``<out_dir>/superseded/<UTC time>/`` and return it (None when there was nothing to
    move). Nothing is deleted: the user removes the folder when it is no longer needed."""
    present = [name for name in RUN_OUTPUTS if (out_dir / name).exists()]
    if not present:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target, n = out_dir / SUPERSEDED / stamp, 1
    while target.exists():
        n += 1
        target = out_dir / SUPERSEDED / f"{stamp}-{n}"
    target.mkdir(parents=True)
    for name in present:
        os.rename(out_dir / name, target / name)  # same file system: nothing is copied
    return target


def join_ranks(world: int) -> Ranks:
    """This process's place in the run: with ``world`` > 1 (a launcher started the
    ranks) the process group is joined (gloo on CPU, nccl on GPUs) and a GPU rank
    takes the GPU of its ``LOCAL_RANK``."""
    if world == 1:
        return Ranks.single()
    from mage_core.backends.deepspeed_engine import import_deepspeed, init_distributed

    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    check_rendezvous()  # a rank that cannot reach the others stops in minutes, naming the address
    init_distributed(import_deepspeed())
    ranks = Ranks.current()
    if ranks.world != world:
        raise RuntimeError(f"the process group has {ranks.world} ranks, WORLD_SIZE says {world}")
    return ranks


def check_out_dir(out_dir: Path) -> None:
    """``--out`` made (with its parents) and written to before any work: a folder that
    cannot be written stops the run now, in one line, not at its first checkpoint."""
    try:
        check_writable(out_dir)
    except OSError as err:
        raise ConfigError("command line", [f"--out: {out_dir}: {writable_problem(err)}"]) from None


def _prepare_out_dir(out_dir: Path, checkpoints: CheckpointManager, resume: bool | Literal["auto"], digest: str,
                     code: str, cfg: Config) -> Path | None:
    """Rank 0's preparation of ``out_dir``: the checkpoint to resume (or None), the
    outputs of a run that must not be continued moved aside (never deleted), the
    tracking store checked."""
    check_out_dir(out_dir)
    latest = checkpoints.latest()
    why = _not_resumable(checkpoints, latest, cfg, digest, code) if resume == "auto" else None
    if why is not None:
        # A pipeline re-run (DVC) after a change of params or code, or of a finished run
        # whose outputs DVC wants again: the old run is not continued, but kept.
        moved = move_aside(out_dir)
        console.print(f"{out_dir}: {why}; moved the old run to {moved} (delete it when no longer needed) "
                      "and starting afresh", soft_wrap=True, highlight=False, markup=False)
        latest = None
    if latest is not None and resume is True:
        mismatch = _mismatch(checkpoints, latest, cfg, digest)
        if mismatch is not None:
            raise ConfigError("--resume", [
                f"{latest} was written under another configuration: it {mismatch}; nothing was changed. "
                f"Resume it with the settings it was written under, or start over with --resume auto (it "
                f"moves the old run to {out_dir / SUPERSEDED}/) or another --out"])
    if latest is not None and not resume:
        raise ConfigError("command line", [
            f"--out: {out_dir} already holds checkpoints (latest {latest.name}); pass --resume to continue it "
            "or choose another --out"])
    if cfg.tracking.mlflow:
        check_tracking(Path.cwd())  # an unreachable tracking server fails now, before any work
    return latest


def save_best(engine: Any, model: Any, tokenizer: Any, path: Path, ranks: Ranks) -> None:
    """The current policy as ``best/`` (rank 0 writes it; the engine trains ``model`` in place)."""
    from mage_core.policy.model import save_policy

    # ZeRO-3 keeps slices of the weights: gather them whole (every rank takes part).
    whole = engine.policy_state_dict() if engine.sharded_weights else None
    if ranks.main:
        save_policy(model, tokenizer, path, state_dict=whole)
    ranks.barrier()


def _save(checkpoints: Any, engine: Any, state: TrainState, rng: np.random.Generator, torch_rng: torch.Generator,
          digest: str, code: str, ranks: Ranks, league: list[Any] | None = None,
          config: dict[str, Any] | None = None) -> None:
    engine_state = engine.state_dict()  # collective with several ranks: rank 0 gets every optimizer shard
    if not ranks.main:
        ranks.barrier()
        return
    tensors, rest = pack_engine_state(engine_state)
    checkpoints.save(state.iteration, tensors, {
        "engine": rest, "rng": capture_rng(numpy=rng, torch_generator=torch_rng),
        "best_score": state.best_score, "best_iteration": state.best_iteration, "league": league or [],
    }, {"config_digest": digest, "config": config, "code_digest": code, "ranks": ranks.world})
    ranks.barrier()


def _status(metrics: dict[str, float], game: str, k: int) -> str:
    unit = task(game).headline
    parts = []
    train_key = f"train/rollout/all/{unit}_ep"
    last = max((int(key.rsplit("ep", 1)[1]) for key in metrics if key.startswith(train_key)), default=None)
    if last is not None:
        parts.append(f"train {unit} ep{last} {metrics[f'{train_key}{last}']:+.3f}")
    if f"eval/all/{unit}_ep{k}" in metrics:
        parts.append(f"eval ep{k} {metrics[f'eval/all/{unit}_ep{k}']:+.3f}")
    return "  ".join(parts)
