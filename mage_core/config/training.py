"""Schema of the training sections of params.yaml: model, policy, rollout,
algorithm, train and evaluation. Loaded through ``mage_core.config``."""

from __future__ import annotations

import importlib.util
from typing import Annotated, Any, Literal, Optional

from pydantic import Field, StringConstraints, field_validator, model_validator

from mage_core.schema import NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt, Probability, Strict
from mage_core.config.presets import PRESETS, preset_values


class ModelConfig(Strict):
    """The policy network: the embedded tiny Qwen3 or a local HF checkpoint."""

    source: Literal["embedded", "local"] = "embedded"
    path: Optional[str] = None
    #: A warm start (``mage sft``'s ``model/``): the embedded model starts from its weights and
    #: tokenizer instead of fresh ones (a local checkpoint's warm start is its ``path``).
    init: Optional[str] = None
    hidden_size: PositiveInt = 64
    num_layers: PositiveInt = 2
    num_heads: PositiveInt = 4
    num_kv_heads: PositiveInt = 2
    head_dim: PositiveInt = 16
    intermediate_size: PositiveInt = 128
    max_position_embeddings: PositiveInt = 1024
    dtype: Literal["float32", "bfloat16"] = "float32"

    @model_validator(mode="after")
    def _consistent(self) -> "ModelConfig":
        problems = []
        if self.source == "local" and not self.path:
            problems.append("path: required when source is 'local' (a folder with config.json and weights)")
        if self.init is not None and self.source == "local":
            problems.append("init: a warm start of a local checkpoint is its path (model.path: the sft output's "
                            "model/); init starts the embedded model")
        if self.num_heads % self.num_kv_heads:
            problems.append(f"num_kv_heads ({self.num_kv_heads}) must divide num_heads ({self.num_heads})")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class PolicyConfig(Strict):
    """How the model acts and what it remembers (docs/method.md section 2)."""

    action_mode: Literal["constrained", "free"] = "constrained"
    prompt_style: Literal["compact", "paper"] = "compact"
    memory: Literal["history_only", "reflection_only", "history_and_reflection"] = "history_only"
    reflections: Literal["summary", "generated"] = "summary"
    max_remark_chars: PositiveInt = 2000
    max_new_tokens: PositiveInt = 48
    chat_template: bool = False
    thinking: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> "PolicyConfig":
        if self.reflections == "generated" and self.action_mode == "constrained":
            raise ValueError("reflections: 'generated' needs action_mode 'free' (a constrained policy cannot "
                             "write text); use reflections: summary")
        if self.thinking and not self.chat_template:
            raise ValueError("thinking: true needs chat_template: true (the chat template switches thinking on)")
        if self.thinking and self.action_mode == "constrained":
            raise ValueError("thinking: true needs action_mode 'free' (a constrained policy writes no text)")
        return self


class RolloutConfig(Strict):
    """Meta-episodes (docs/method.md section 1), and where they are played: in the
    stage's process (``workers: 0``) or on ``workers`` Ray actors, each with its
    own copy of the policy (``mage_core.backends.ray_rollout``); the results are
    the same either way (every meta-episode samples from its own seeded
    generator)."""

    restart: Literal["same", "fresh"] = "fresh"
    early_stop: bool = False
    temperature: NonNegativeFloat = 1.0
    workers: NonNegativeInt = 0
    ray_address: Optional[Annotated[str, StringConstraints(min_length=1)]] = None

    @field_validator("workers")
    @classmethod
    def _ray_installed(cls, v: int) -> int:
        # find_spec looks the package up without importing it (ray lives in backends/ only).
        if v > 0 and importlib.util.find_spec("ray") is None:
            raise ValueError(f"{v} Ray workers need Ray, which is not installed: pip install -e '.[pipeline]' "
                             "(or set rollout.workers: 0 to roll out in this process)")
        return v


class AlgorithmConfig(Strict):
    """Returns and advantages; ``preset`` fills every key left unset."""

    preset: str = "mage"
    episodes_per_meta_episode: PositiveInt
    reflect: bool
    reward_variant: Literal["differential", "cumulative", "single_episode", "final", "lamer"]
    advantage: Literal["gigpo", "grpo"]
    episode_norm: Literal["mean_norm", "mean_std_norm"]
    step_weight: NonNegativeFloat
    anchor: Literal["global", "local"]
    grouping: Literal["stationary", "non_stationary"]
    group_scope: Literal["task", "batch"]
    group_size: Annotated[int, Field(ge=2)]
    gamma_step: Probability
    gamma_traj: Probability
    episode_score: Literal["episode_reward", "return"]
    episode_baseline: Literal["group", "group_and_episode", "group_episode_turn"]
    #: ``trained``: the policy is trained (every RL method). The prompting and memory
    #: baselines (docs/method.md section 9) are evaluation-only agents around the fixed
    #: model: ``react`` (no memory), ``reflexion`` (reflections on failed attempts),
    #: ``a_mem`` (linked notes retrieved by similarity), ``memento`` (past cases
    #: retrieved by similarity); docs/baselines.md. ``frozen``: the starting model never
    #: updated, remembering what ``policy.memory`` says, as a trained policy does (the
    #: ``warm_start`` preset: the baseline of MAGE and LaMer under their own protocol).
    agent: Literal["trained", "frozen", "react", "reflexion", "a_mem", "memento"]
    #: Notes or cases a memory baseline's prompt recalls (A-MEM adds their linked notes).
    retrieve_k: PositiveInt

    @model_validator(mode="before")
    @classmethod
    def _fill_from_preset(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        name = data.get("preset", "mage")
        # An unknown preset is reported by the field validator below; fill from
        # "mage" meanwhile so the report is not buried under missing keys.
        base = preset_values(name if name in PRESETS else "mage")
        return {**base, **data}

    @field_validator("preset")
    @classmethod
    def _known(cls, v: str) -> str:
        preset_values(v)  # raises with the valid names
        return v


class LeagueConfig(Strict):
    """A co-evolving league (Kuhn Poker; beyond the paper, issue 15): every ``every``
    iterations the policy's first hand is read as a behaviour strategy and the
    league gains its exact best response (``exploiter``) and/or a copy of it
    (``snapshot``, a past agent). Once it has members the league holds ``share`` of
    the training population (split evenly, seats mixed), the configured population
    the rest; beyond ``max_members`` the oldest leave. 0: no league."""

    every: NonNegativeInt = 0
    add: list[Literal["exploiter", "snapshot"]] = ["exploiter", "snapshot"]
    share: Annotated[float, Field(gt=0, lt=1)] = 0.5
    max_members: PositiveInt = 8

    @field_validator("add")
    @classmethod
    def _some(cls, v: list[str]) -> list[str]:
        if not v or len(set(v)) != len(v):
            raise ValueError(f"name exploiter and/or snapshot, each once, got {v}")
        return v


class TrainConfig(Strict):
    """The PPO loop (docs/method.md section 6), sized for the CPU default."""

    iterations: PositiveInt = 200
    groups_per_iteration: PositiveInt = 64
    learning_rate: PositiveFloat = 1e-3
    lr_schedule: Literal["constant", "linear_decay"] = "linear_decay"
    weight_decay: NonNegativeFloat = 0.0
    max_grad_norm: PositiveFloat = 1.0
    ppo_epochs: PositiveInt = 2
    mini_batches_per_epoch: PositiveInt = 2
    clip_ratio: PositiveFloat = 0.2
    entropy_coef: NonNegativeFloat = 0.01
    entropy_coef_final: NonNegativeFloat = 0.002
    kl_coef: NonNegativeFloat = 0.0
    kl_estimator: Literal["low_var_kl", "kl", "abs", "mse"] = "low_var_kl"
    # PPO's old log-probs: the rollout's own (the policy has not moved since it
    # sampled them; one forward pass saved), or a fresh pass of the training
    # engine (verl's way: right when rollouts run on another numeric path, e.g.
    # vLLM in bf16).
    old_logprobs: Literal["rollout", "recompute"] = "rollout"
    # What picks the best policy (best/): the sampled evaluation's final-episode
    # figure, or (Kuhn Poker against deterministic opponents) the exact value of
    # the greedy policy, free of sampling noise (mage_core.envs.kuhn_poker.exact_greedy).
    select_on: Literal["sampled", "exact_greedy"] = "sampled"
    max_tokens_per_micro_batch: PositiveInt = 32768
    num_threads: PositiveInt = 1
    checkpoint_every: PositiveInt = 10
    keep_checkpoints: PositiveInt = 2
    eval_every: NonNegativeInt = 25
    time_budget_minutes: NonNegativeFloat = 0.0
    output_dir: str = "artifacts/train"
    league: LeagueConfig = LeagueConfig()


class WarmStartConfig(Strict):
    """The warm start by imitation (``mage sft``, issue 28): ``meta_episodes`` of the task's
    expert (``Task.expert``) played as the policy is asked, each step of a first attempt a
    uniformly drawn legal action with probability ``detour`` (context for the expert's
    recovery, never a target), then ``epochs`` passes of behaviour cloning of the expert's
    own decisions in mini-batches of ``mini_batch_size``. The budget is the warm start's
    imperfection: it leaves room to improve."""

    #: The tasks whose runs start from a warm start (``<output_dir>/<task>/model``, the
    #: ``sft@<task>`` DVC stage): every method of such a task, the baselines included. Each
    #: maps to the dotted keys its ``sft@<task>`` stage sets (``mage sft --task``), e.g. the
    #: ``rollout.restart`` of the task's runs or its own ``warm_start.epochs``; a list of
    #: names is read as names with nothing to set.
    tasks: dict[str, dict[str, Any]] = {}
    output_dir: str = "artifacts/sft"
    meta_episodes: PositiveInt = 256
    detour: Probability = 0.3
    epochs: PositiveInt = 3
    learning_rate: PositiveFloat = 1e-3
    mini_batch_size: PositiveInt = 64
    seed: NonNegativeInt = 0
    #: The least share of the expert's own attempts (those without a detour) that must win:
    #: below it the demonstrations do not show the task solved (a broken expert, or settings
    #: it cannot solve), and ``mage sft`` stops before cloning, writing nothing.
    min_expert_success: Probability = 0.5

    @field_validator("tasks", mode="before")
    @classmethod
    def _names_alone(cls, v: Any) -> Any:
        """A list of names, or a name with nothing under it, sets nothing."""
        if isinstance(v, (list, tuple)):
            if len(set(map(str, v))) != len(v):
                raise ValueError(f"a task is listed twice: {list(v)}")
            return {name: {} for name in v}
        if isinstance(v, dict):
            return {name: {} if values is None else values for name, values in v.items()}
        return v

    @field_validator("tasks")
    @classmethod
    def _have_experts(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        from mage_core.envs.registry import GAMES, task

        unknown = [name for name in v if name not in GAMES]
        if unknown:
            raise ValueError(f"{unknown} are not tasks ({', '.join(GAMES)})")
        without = [name for name in v if task(name).expert is None]
        if without:
            having = ", ".join(g for g in GAMES if task(g).expert is not None)
            raise ValueError(f"{without} have no expert to imitate (tasks with one: {having})")
        for name, values in v.items():
            fixed = [k for k in values if k == "env.name" or k.startswith(("warm_start.tasks", "warm_start.output_dir"))]
            if fixed:
                raise ValueError(f"{name}: {fixed[0]} is fixed by the task's entry itself; set it elsewhere")
        return v


class OpenAIEndpointConfig(Strict):
    """An OpenAI-compatible server (``backend.generator: openai``, evaluation only):
    its base URL (up to ``/v1``) and model name; the API key comes from the
    environment variable ``api_key_env``, never from this file. ``timeout_s`` is a
    deadline for a whole request (connect, send and the whole reply, not a per-read
    timeout); a request is tried ``max_retries + 1`` times with 1 s, 2 s, 4 s ...
    back-off between, so it gives up after at most ``(max_retries + 1) * timeout_s +
    2 ** max_retries - 1`` seconds (defaults: 487 s); docs/scale-out.md."""

    base_url: str = "http://localhost:8000/v1"
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: Annotated[float, Field(gt=0)] = 120.0
    max_retries: NonNegativeInt = 3
    max_concurrency: PositiveInt = 8

    @field_validator("base_url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"must be an http(s) URL such as http://localhost:8000/v1, got {v!r}")
        return v


class BackendConfig(Strict):
    """Where rollouts and updates run (docs/architecture.md, "Backends behind protocols"). The
    CPU default: HF generation and the plain torch engine. The GPU backends:
    vLLM rollouts (``pip install -e '.[gpu]'``; on a CPU only its test build,
    ``make vllm-env``) and DeepSpeed ZeRO training (stages 0-2; the
    ``deepspeed`` extra, CPU or GPU), on ``ranks`` data-parallel processes (one
    per GPU; on a CPU, gloo processes). ``mage doctor`` checks a profile."""

    generator: Literal["hf", "vllm", "openai"] = "hf"
    engine: Literal["torch", "deepspeed"] = "torch"
    gpus: NonNegativeInt = 0
    ranks: PositiveInt = 1
    zero_stage: Literal[0, 1, 2, 3] = 2
    precision: Literal["fp32", "bf16"] = "fp32"
    offload_optimizer: bool = False
    micro_batch_size: PositiveInt = 8
    gradient_checkpointing: bool = False
    logits_chunk_tokens: NonNegativeInt = 0
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = 0.5
    vllm_sleep: bool = False
    openai: OpenAIEndpointConfig = OpenAIEndpointConfig()

    @model_validator(mode="after")
    def _consistent(self) -> "BackendConfig":
        if self.generator == "openai" and not self.openai.model:
            raise ValueError("generator: openai needs backend.openai.model (the name the server serves)")
        if self.precision == "bf16" and self.engine != "deepspeed":
            raise ValueError("precision: bf16 needs engine 'deepspeed' (the torch engine trains in fp32)")
        if self.ranks > 1 and self.engine != "deepspeed":
            raise ValueError(f"ranks: {self.ranks} (data-parallel training) needs engine 'deepspeed'")
        if self.gpus > 0 and self.ranks != self.gpus:
            raise ValueError(f"ranks: {self.ranks} with gpus: {self.gpus}: one training rank per GPU; set ranks: "
                             f"{self.gpus}")
        if self.vllm_sleep and (self.generator != "vllm" or self.gpus == 0):
            raise ValueError("vllm_sleep: frees a colocated vLLM engine's GPU memory during each update; it needs "
                             "generator 'vllm' and gpus > 0 (vLLM's sleep mode is CUDA, ROCm or XPU only)")
        if self.offload_optimizer and self.engine != "deepspeed":
            raise ValueError("offload_optimizer: needs engine 'deepspeed' (the torch engine keeps its optimizer "
                             "where the model is)")
        return self


class EvaluationConfig(Strict):
    """Fixed evaluation sets: the same meta-episodes every time (docs/method.md section 8).

    Two sets of task seeds that never meet: ``selection_seed`` makes the set that
    training-time evaluation plays to pick ``best/``; ``seed`` makes the report
    suites of ``mage evaluate`` (Table 1). A figure reported on the set that chose
    the checkpoint would be biased upward by the choice."""

    seed: NonNegativeInt = 20260303
    selection_seed: NonNegativeInt = 20261124
    meta_episodes_per_opponent_seat: PositiveInt = 500
    temperature: NonNegativeFloat = 1.0
    top_p: Annotated[float, Field(gt=0, le=1)] = 1.0
    top_k: NonNegativeInt = 0

    @model_validator(mode="after")
    def _separate_sets(self) -> "EvaluationConfig":
        if self.selection_seed == self.seed:
            raise ValueError("selection_seed must differ from seed: the set that picks best/ must not be the set "
                             "the figures are reported on")
        return self
