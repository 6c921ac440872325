"""What each run of a report was, next to the paper: model, budget, seeds, and every
setting that differs from the paper profile of its game.

Table 1 has the paper's layout (docs/method.md section 9), not its settings: the CPU
default trains a tiny model from scratch for a few dozen iterations, with constrained
actions, summary reflections and other choices the paper did not make. A figure read
without them reads as a reproduction of the paper's number, which it is not; so the
report prints them under the table.

Both sides are resolved by the real config loader (``mage_core.config``), so presets,
per-game values and validation apply exactly as in a stage:

- the run: params as ``mage train --run NAME`` resolves it (``run_data``: its env, its
  method, ``reproduce.iterations``, then its own ``set``);
- the paper: ``reproduce.profiles.paper_<env>`` applied to the same params, resolved as
  that profile's run of the game (``paper_<env>`` runs MAGE on it) with the run's own
  method put in, so a GRPO run is compared with GRPO in the paper's setting and not
  with MAGE. The paper side's whole ``algorithm`` section is that method's preset for
  the game (``preset_values``, pinned to docs/method.md by tests/unit/test_presets.py), and
  a population ablation's populations are its own: the profile's algorithm keys are
  MAGE's (its own run), and a params-file algorithm key never leaks into the paper
  side. Any other key the profile leaves unset keeps the params file's value on both
  sides and could never show as a difference, so every paper profile sets every key
  of ``reference_keys`` (the settings docs/method.md section 10 gives; a test fails if one
  is missing), and the table marks the paper-side values that are only the params
  file's. Reference settings this project has no key for are listed apart
  (``NOT_EXPRESSIBLE``), under the tables.

Compared: ``model``, ``policy``, ``rollout``, ``algorithm``, ``train``, ``evaluation``
(its out-of-domain suites of the run's game only), and the run's game in ``env`` and
``population``. Not compared: where work runs and how it is written, which leave the
numbers unchanged (``rollout.workers``, ``rollout.ray_address``, ``train.output_dir``,
``train.num_threads``), the hardware ``backend`` section, and the seeds, which are
listed apart (the paper has none to compare with). Wall-clock time is not part of
this: the report is rebuilt byte for byte from the same params and outputs.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Mapping

from mage_core.config import Config, apply_values, parse_config, run_data, run_values
from mage_core.evaluation.aggregate import markdown_table
from mage_core.io.dotted import flatten
from mage_core.config.presets import PRESET_POPULATIONS, preset_values
from mage_core.rollout.protocol import protocol_key

#: reproduce.profiles.<name> holding the paper's settings for a game.
PAPER_PROFILE = "paper_{env}"
#: Sections compared whole (minus NOT_COMPARED); the game's own env/population are added.
COMPARED_SECTIONS = ("model", "policy", "rollout", "algorithm", "train", "evaluation")
#: Keys that change where work runs or where it is written, never the numbers.
NOT_COMPARED = frozenset({"rollout.workers", "rollout.ray_address", "train.output_dir", "train.num_threads"})
#: Keys that only training reads: an evaluation-only agent (a prompting or memory baseline,
#: ``algorithm.agent`` not ``trained``) is never trained, so they are "unused" in its column.
TRAINING_ONLY = ("train.", "algorithm.reward_variant", "algorithm.advantage", "algorithm.episode_norm",
                 "algorithm.step_weight", "algorithm.anchor", "algorithm.grouping", "algorithm.group_scope",
                 "algorithm.group_size", "algorithm.gamma_step", "algorithm.gamma_traj",
                 "algorithm.episode_score", "algorithm.episode_baseline")
#: The keys of the settings docs/method.md gives a value for (section 10, the reference
#: scripts, and the method's own: early stop, task-seed groups, mean_norm), which
#: every ``paper_<env>`` profile must set: left unset, a key keeps the
#: params file's value on both sides of the comparison and a difference would not show.
#: ``{env}`` is the profile's game. The algorithm keys are MAGE's here (the profile's
#: own run); a run of another method is compared with that method's preset.
REFERENCE_KEYS = (
    "reproduce.iterations",  # epochs (training steps), as the profile's run's train.iterations
    "env.{env}.max_turns", "env.{env}.max_response_tokens", "env.{env}.invalid_action_penalty",
    "env.{env}.length_penalty_coef",
    "model.source", "model.path", "policy.max_new_tokens", "policy.chat_template", "policy.thinking",
    "rollout.temperature", "rollout.early_stop",
    "algorithm.episodes_per_meta_episode", "algorithm.group_size", "algorithm.gamma_step",
    "algorithm.gamma_traj", "algorithm.step_weight", "algorithm.episode_norm", "algorithm.group_scope",
    "train.groups_per_iteration", "train.learning_rate", "train.lr_schedule", "train.clip_ratio",
    "train.entropy_coef", "train.entropy_coef_final", "train.kl_coef",
    "train.eval_every", "train.checkpoint_every",
    "evaluation.temperature", "evaluation.top_p", "evaluation.top_k",
)
@dataclass(frozen=True)
class Unexpressed:
    """A reference setting (docs/method.md section 10) that no key of this project expresses."""

    setting: str
    paper: str
    here: str


#: The reference settings no key here can state, with what this project does instead:
#: they cannot show in the difference tables, so the report lists them under them.
NOT_EXPRESSIBLE: tuple[Unexpressed, ...] = (
    Unexpressed("PPO mini-batch", "64 (verl's `ppo_mini_batch_size`: mini-batches of a fixed number of "
                "samples, one a turn, so the optimizer steps per pass follow the number of turns played)",
                "`train.mini_batches_per_epoch` optimizer steps per pass (the paper profiles leave it to the "
                "params file), each on an equal share of the iteration's meta-episodes, kept whole (their "
                "prompts are packed as prefix chains); no key sets a number of samples per step"),
    Unexpressed("maximum prompt length", "4096 tokens (WebShop: 8192)",
                "no key: prompts are never cut, the model's context length is the only bound (the vLLM "
                "generator refuses a longer request); `mage doctor` assumes 4096 prompt tokens for every game"),
    Unexpressed("validation during training", "every 5 steps on the validation set (Kuhn: against CFR, the "
                "agent second)", "`train.eval_every` plays the selection set of the training population "
                "(`evaluation.selection_seed`) to pick best/; the out-of-domain suites (Kuhn: CFR, "
                "`evaluation.ood.kuhn_poker`) are played by the final evaluation only"),
    Unexpressed("training engine", "FSDP with parameter and optimizer offload; vLLM with tensor parallel 1 and "
                "`gpu_memory_utilization` 0.9", "DeepSpeed ZeRO (`backend.engine`, `backend.zero_stage`, "
                "`backend.offload_optimizer`; no parameter offload) and vLLM beside it at "
                "`backend.gpu_memory_utilization`: the `backend` section, not compared (where work runs)"),
)
#: Marks, in the paper-profile column, a value the profile leaves to the params file.
UNSET_MARK = "(file)"
#: What each seed key seeds, for the keys params.yaml has today (others print without a role).
SEED_ROLES = {
    "seed": "training",
    "evaluation.selection_seed": "selection set (picks best/)",
    "evaluation.seed": "report set (every sampled figure of the report; the exact columns enumerate every deal)",
}


@dataclass(frozen=True)
class Difference:
    """One resolved setting of a run that is not the paper profile's."""

    key: str
    run_value: Any
    paper_value: Any


@dataclass(frozen=True)
class RunSettings:
    """A run's model, budget and seeds, and how it differs from its paper profile
    (``paper_profile`` None: reproduce.profiles has none for its game);
    ``paper_values``: the profile's value of every compared key (empty without one);
    ``paper_unset``: those of its keys the profile leaves to the params file."""

    env: str
    model: str
    trained: bool  # False: an evaluation-only agent (algorithm.agent), never trained
    iterations: int
    groups_per_iteration: int
    group_size: int
    time_budget_minutes: float
    eval_every: int
    selection_per_pair: int
    report_per_pair: int
    seeds: tuple[tuple[str, int], ...]
    paper_profile: str | None
    differences: tuple[Difference, ...]
    paper_values: Mapping[str, Any]
    #: Compared keys the paper profile does not set (nor its run, nor the method preset):
    #: their paper-side value is the params file's, not a paper setting.
    paper_unset: frozenset[str] = frozenset()
    #: How its report set was played (``rollout.protocol.protocol_key``): a trained run and an
    #: evaluation-only run with the same protocol are compared paired in the report.
    protocol: str = ""
    #: ``algorithm.*`` keys whose value is not the method preset's (an explicit key of the
    #: params file or the run's ``set`` overrides it), with the preset's value.
    preset_overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def meta_episodes_per_iteration(self) -> int:
        return self.groups_per_iteration * self.group_size


def reference_keys(env: str) -> tuple[str, ...]:
    """The dotted keys that the paper profile of ``env`` must set (``REFERENCE_KEYS``)."""
    from mage_core.envs.registry import task

    # beyond REFERENCE_KEYS, the task's own (Task.reference_keys): the KL estimator where the
    # KL loss is on, Sokoban's rooms and moves, the two-player games' opponents and seats
    return tuple(key.format(env=env) for key in REFERENCE_KEYS) + task(env).reference_keys


def seed_keys(cfg: Config) -> tuple[str, ...]:
    """``seed`` and every evaluation key that is a seed (``seed``, ``*_seed``), in schema order."""
    evaluation = [f"evaluation.{name}" for name in type(cfg.evaluation).model_fields
                  if name == "seed" or name.endswith("_seed")]
    return ("seed", *evaluation)


def compared_values(cfg: Config) -> dict[str, Any]:
    """The resolved values that a run is compared on, by dotted key (module docstring)."""
    data = cfg.model_dump(mode="json")
    game = cfg.env.name
    values: dict[str, Any] = {}
    for section in COMPARED_SECTIONS:
        values.update(flatten({section: data[section]}))
    values = {key: v for key, v in values.items() if not key.startswith("evaluation.ood.")}
    values["model.init"] = cfg.init_model()  # the warm start it starts from, model.init's or warm_start.tasks'
    values[f"evaluation.ood.{game}"] = data["evaluation"]["ood"][game]
    values.update(flatten({"env": {game: data["env"][game]}}))
    if game in data["population"]:  # the two-player games
        values[f"population.{game}"] = data["population"][game]
    excluded = NOT_COMPARED | set(seed_keys(cfg))
    return {key: v for key, v in values.items() if key not in excluded}


def differences(run: Config, paper: Config) -> tuple[Difference, ...]:
    """Every compared key whose resolved value differs, in the run's key order; a key
    one side lacks (e.g. the other game's) counts as a difference with None there."""
    mine, theirs = compared_values(run), compared_values(paper)
    keys = list(mine) + [key for key in theirs if key not in mine]
    return tuple(Difference(key, mine.get(key), theirs.get(key)) for key in keys
                 if mine.get(key) != theirs.get(key))


def model_summary(cfg: Config) -> str:
    """The policy network in a few words: the embedded tiny Qwen3's size and where it starts
    (from scratch or a warm start), or the local folder."""
    m, init = cfg.model, cfg.init_model()
    if m.source == "local":
        return f"local checkpoint `{m.path}` ({m.dtype})"
    start = f"from the warm start `{init}`" if init is not None else "from scratch"
    return (f"embedded tiny Qwen3 {start} ({m.num_layers} layers, hidden {m.hidden_size}, "
            f"{m.num_heads} heads, {m.dtype})")


def describe(run: Config, paper: Config | None, paper_profile: str,
             paper_set: frozenset[str] | None = None) -> RunSettings:
    """``run``'s settings against ``paper`` (None: no paper profile for its game);
    ``paper_set``: the dotted keys the profile sets (``paper_keys``; None: count every
    paper-side value as the profile's)."""
    t = run.train
    theirs = compared_values(paper) if paper is not None else {}
    return RunSettings(
        env=run.env.name, model=model_summary(run), trained=run.algorithm.agent == "trained",
        iterations=t.iterations,
        groups_per_iteration=t.groups_per_iteration, group_size=run.algorithm.group_size,
        time_budget_minutes=t.time_budget_minutes, eval_every=t.eval_every,
        selection_per_pair=run.evaluation.meta_episodes_per_opponent_seat,
        report_per_pair=run.reproduce.eval_per_pair,
        seeds=tuple((key, int(_dotted(run, key))) for key in seed_keys(run)),
        paper_profile=paper_profile if paper is not None else None,
        differences=differences(run, paper) if paper is not None else (),
        paper_values=theirs,
        paper_unset=frozenset() if paper_set is None else frozenset(
            key for key in theirs if not _covered(key, paper_set)),
        protocol=protocol_key(run), preset_overrides=preset_overrides(run))


def preset_overrides(cfg: Config) -> dict[str, Any]:
    """``algorithm.<key>`` -> the method preset's value, for every key ``cfg`` resolves to
    another value (``algorithm.preset`` fills only the keys left unset: an explicit one wins)."""
    resolved = cfg.algorithm.model_dump()
    return {f"algorithm.{key}": value for key, value in preset_values(cfg.algorithm.preset, cfg.env.name).items()
            if resolved[key] != value}


def _covered(key: str, keys: frozenset[str]) -> bool:
    """Whether a compared key is set by one of ``keys`` (itself, a section above it, or a part of it)."""
    return any(key == k or key.startswith(k + ".") or k.startswith(key + ".") for k in keys)


def paper_config(data: dict[str, Any], env: str, method: str, source: str) -> Config | None:
    """The paper profile of ``env`` applied to ``data`` and resolved as its run of
    ``env`` with ``method`` (module docstring); None if ``reproduce.profiles`` has no
    such profile."""
    name = PAPER_PROFILE.format(env=env)
    profiles = parse_config(data, source).reproduce.profiles
    if name not in profiles:
        return None
    where = f"reproduce.profiles.{name}"
    profiled = apply_values(data, profiles[name], where)
    values = {key: value for key, value in _own_run_values(profiled, env, f"{source} with profile {name}").items()
              if not key.startswith("algorithm.")}
    # The method's own algorithm (its preset for the game), never the profile's MAGE keys
    # nor the params file's; a population ablation's own populations.
    values["algorithm"] = {"preset": method, **preset_values(method, env)}
    if env in PRESET_POPULATIONS.get(method, {}):
        values[f"population.{env}"] = PRESET_POPULATIONS[method][env]
    return parse_config(apply_values(profiled, values, where), f"{source} with profile {name}, method {method}")


def _own_run_values(profiled: dict[str, Any], env: str, source: str) -> dict[str, Any]:
    """What makes the profiled params the profile's run of ``env`` (``run_values``), or
    just ``env`` and ``reproduce.iterations`` when the profile has no single such run."""
    cfg = parse_config(profiled, source)
    own = [run for run, spec in cfg.reproduce.runs.items() if spec.env == env]
    return (run_values(cfg, own[0]) if len(own) == 1 else
            {"env.name": env, "train.iterations": cfg.reproduce.iterations})


def paper_keys(data: dict[str, Any], env: str, source: str) -> frozenset[str] | None:
    """The dotted keys whose paper-side value is the paper profile's of ``env``: the
    profile's own keys, its run's ``set`` (and ``train.iterations`` when the profile
    sets ``reproduce.iterations``), and the whole ``algorithm`` section (the method's
    preset, ``paper_config``); None without such a profile."""
    name = PAPER_PROFILE.format(env=env)
    profiles = parse_config(data, source).reproduce.profiles
    if name not in profiles:
        return None
    profile = profiles[name]
    keys = set(profile) | {"algorithm"}
    if "reproduce.iterations" in profile:
        keys.add("train.iterations")
    profiled = apply_values(data, profile, f"reproduce.profiles.{name}")
    cfg = parse_config(profiled, f"{source} with profile {name}")
    keys |= {key for spec in cfg.reproduce.runs.values() if spec.env == env for key in spec.set}
    return frozenset(keys)


def run_settings(data: dict[str, Any], source: str) -> dict[str, RunSettings]:
    """Every run of ``reproduce.runs`` in the raw params ``data``, described."""
    runs = parse_config(data, source).reproduce.runs
    out = {}
    for name, spec in runs.items():
        run = parse_config(run_data(data, name, source), f"{source} as run {name}")
        out[name] = describe(run, paper_config(data, spec.env, spec.method, source),
                             PAPER_PROFILE.format(env=spec.env), paper_keys(data, spec.env, source))
    return out


def _dotted(cfg: Config, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return node


def format_value(value: Any) -> str:
    """A resolved value as params.yaml would spell it (``true``, ``null``, ``1e-06``, lists inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float, str)):
        return str(value)
    return json.dumps(value, separators=(", ", ": "))


def _budget(s: RunSettings) -> str:
    if not s.trained:
        return "none: evaluation only, the model as given"
    text = (f"{s.iterations} iterations x {s.meta_episodes_per_iteration} meta-episodes "
            f"({s.groups_per_iteration} groups of {s.group_size})")
    if s.time_budget_minutes:
        text += f", stopped after {s.time_budget_minutes:g} min if not done"
    return text


def _selection(s: RunSettings) -> str:
    if not s.trained:
        return f"{s.selection_per_pair} per (opponent, seat), once (nothing to select from)"
    when = f"every {s.eval_every} iterations and at the end" if s.eval_every else "at the end only"
    return f"{s.selection_per_pair} per (opponent, seat), {when}"


def settings_markdown(settings: Mapping[str, RunSettings], env_labels: Mapping[str, str]) -> str:
    """Under Table 1: one row per run (model, budget, seeds), then per game a table of
    the settings that differ from its paper profile (``=``: the run has the paper's value;
    ``unused``: a training key in an evaluation-only agent's column; ``UNSET_MARK`` on a
    paper-side value the profile leaves to the params file), then the reference settings
    no key here expresses (``NOT_EXPRESSIBLE``) when any game has a paper profile."""
    if not settings:
        raise ValueError("no run settings to print")
    keys = list(dict.fromkeys(key for s in settings.values() for key, _ in s.seeds))
    legend = "; ".join(f"`{key}` = {SEED_ROLES[key]}" if key in SEED_ROLES else f"`{key}`" for key in keys)
    rows = [[f"`{run}`", s.model, _budget(s), _selection(s), f"{s.report_per_pair} per (opponent, seat)",
             " / ".join(str(value) for _, value in s.seeds)] for run, s in settings.items()]
    parts = ["### The runs behind these numbers\n",
             f"Seeds, in order: {legend}. Evaluation sizes are meta-episodes per (opponent, seat) "
             "(Sokoban: levels). Wall-clock times are in MLflow, not here (this report is rebuilt "
             "byte for byte).\n",
             markdown_table(["run", "model", "training budget", "selection set", "report set", "seeds"], rows)]
    for env in dict.fromkeys(s.env for s in settings.values()):
        runs = {run: s for run, s in settings.items() if s.env == env}
        label = env_labels.get(env, env)
        profile = PAPER_PROFILE.format(env=env)
        if all(s.paper_profile is None for s in runs.values()):
            parts.append(f"#### {label}: no paper profile\n\nreproduce.profiles has no `{profile}`: the settings "
                         "of these runs are not compared with the paper's.\n")
            continue
        diff_keys = list(dict.fromkeys(d.key for s in runs.values() for d in s.differences
                                       if s.trained or not d.key.startswith(TRAINING_ONLY)))
        parts.append(f"#### {label}: settings that differ from the paper profile `{profile}`\n")
        if not diff_keys:
            parts.append("None: every compared setting of these runs is the paper profile's.\n")
            continue
        table = []
        marked = overridden = False
        for key in diff_keys:
            paper = {format_value(s.paper_values.get(key)) for s in runs.values() if s.paper_profile is not None}
            shared = paper.pop() if len(paper) == 1 else None  # the paper's value, the same for every run
            unset = any(key in s.paper_unset for s in runs.values())
            marked |= unset
            cells = []
            for s in runs.values():
                d = next((d for d in s.differences if d.key == key), None)
                if not s.trained and key.startswith(TRAINING_ONLY):
                    cells.append("unused")
                elif d is None:
                    cells.append("=")
                else:
                    notes = [f"paper: {format_value(d.paper_value)}"] if shared is None else []
                    if key in s.preset_overrides:
                        notes.append(f"preset: {format_value(s.preset_overrides[key])}")
                        overridden = True
                    cells.append(format_value(d.run_value) + (f" ({'; '.join(notes)})" if notes else ""))
            paper_cell = (shared if shared is not None else "by method") + (f" {UNSET_MARK}" if unset else "")
            table.append([f"`{key}`", paper_cell, *cells])
        parts.append(markdown_table(["setting", "paper profile", *(f"`{run}`" for run in runs)], table))
        if overridden:
            parts.append("(preset: X): the run's method preset sets X; an explicit key of the params file (or the "
                         "run's `set`) overrides it, as any explicit `algorithm.*` key does.\n")
        if marked:
            parts.append(f"{UNSET_MARK}: `{profile}` does not set this key (docs/method.md section 10 gives no value for it): "
                         "the value is the params file's, not a paper setting.\n")
    if any(s.paper_profile is not None for s in settings.values()):
        parts.append("#### Paper settings no key here expresses\n")
        parts.append("They cannot show as differences above; what this project does instead:\n")
        parts.append(markdown_table(["setting", "paper (reference scripts)", "here"],
                                    [[u.setting, u.paper, u.here] for u in NOT_EXPRESSIBLE]))
    return "\n".join(parts)

