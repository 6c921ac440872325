"""``mage sweep``: an ablation grid as one Prefect flow, one DVC workspace per point.

A grid is dotted-key overrides every point shares (``set``) and the keys it
varies (``vary``: key -> values); its points are the product of the varied
values. Grids are named in params.yaml (``sweep.grids``: the paper's ablations)
or given on the command line (``--vary KEY=[v1, v2]``, repeatable, which also
extends a named grid). ``--set`` and ``--profile`` change the base every point
starts from.

Each point is one run in the sense of ``reproduce.runs``: trained for
``reproduce.iterations``, evaluated with ``reproduce.eval_per_pair``, in a
workspace of its own, ``artifacts/sweeps/<sweep>/<point>/`` (git + DVC, like a
profile's). Points therefore run side by side without sharing DVC's repository
lock, each keeps its own lineage (``dvc params diff`` against its inputs), and a
re-run skips the stages DVC finds up to date.

Every point is validated before anything runs (``plan``). The flow
(``flows/sweep.py``) prepares the workspaces, runs the points, at most
``sweep.max_concurrent`` at once (and locally at most the cores), on Ray when
asked, and then ``summarize`` writes the ablation table and bar chart.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from mage_core.config import (
    ConfigError,
    GridConfig,
    apply_overrides,
    apply_values,
    load_config,
    parse_config,
    run_data,
)
from mage_core.config.grids import RUN_KEYS, grid_points
from mage_core.io.atomic import write_bytes_atomic, write_json_atomic, write_text_atomic

SWEEP_ROOT = Path("artifacts") / "sweeps"
REPORT_ROOT = Path("reports") / "ablations"
_NAME = re.compile(r"^[a-z0-9_]+$")


@dataclass(frozen=True)
class Point:
    """One grid point: its name (the run name in its workspace), the values of the
    varied keys, and where it runs."""

    name: str
    values: dict[str, Any]
    env: str
    method: str
    workspace: Path
    params: dict[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class Sweep:
    name: str
    grid: GridConfig
    points: list[Point]
    directory: Path
    report_dir: Path
    max_concurrent: int
    iterations: int
    eval_per_pair: int
    profile: str | None


def parse_vary(items: Sequence[str]) -> dict[str, list[Any]]:
    """``KEY=[v1, v2]`` items (values in YAML) -> key -> values."""
    vary: dict[str, list[Any]] = {}
    problems = []
    for item in items:
        key, sep, raw = item.partition("=")
        try:
            values = yaml.safe_load(raw) if sep else None
        except yaml.YAMLError:
            values = None
        if not key or any(not part for part in key.split(".")) or not isinstance(values, list):
            problems.append(f"--vary {item!r}: expected KEY=[v1, v2] with a dotted key and a YAML list, "
                            "e.g. --vary train.learning_rate=[1e-3,3e-4]")
        elif key in vary:
            problems.append(f"--vary {item!r}: {key} is varied twice")
        else:
            vary[key] = values
    if problems:
        raise ConfigError("command line", problems)
    return vary


def plan(params: str | Path, grid: str | None = None, vary: Sequence[str] = (), name: str | None = None,
         profile: str | None = None, overrides: Sequence[str] = (), max_concurrent: int | None = None) -> Sweep:
    """Every point of the grid, each one's params built and validated: raises
    ConfigError listing every problem (of every point) before anything is written."""
    from mage_core.stages.profiles import profile_params

    params = Path(params).resolve()
    project = params.parent
    load_config(params)  # a bad params file is reported as such, before the grid
    data = profile_params(params, profile) if profile else yaml.safe_load(params.read_text(encoding="utf-8"))
    data = apply_overrides(data, overrides)
    base = parse_config(data, f"{params}{' with profile ' + profile if profile else ''}"
                              f"{' with --set ' + ' '.join(overrides) if overrides else ''}")
    grids = ", ".join(base.sweep.grids) or "none defined"
    extra = parse_vary(vary)
    if grid is not None and grid not in base.sweep.grids:
        raise ConfigError("command line", [f"grid {grid!r} is not one of sweep.grids ({grids})"])
    if grid is None and not extra:
        raise ConfigError("command line", [f"name a grid of sweep.grids ({grids}) or give --vary KEY=[v1, v2]"])
    named = base.sweep.grids[grid] if grid is not None else GridConfig(vary=extra)
    problems = [f"--vary {key}: already varied by grid {grid}" for key in extra if grid is not None and key in named.vary]
    spec = GridConfig(set=named.set, vary={**named.vary, **extra}, exclude=named.exclude)
    label = name or grid or "custom"
    if not _NAME.match(label):
        problems.append(f"--name {label!r}: use lower-case letters, digits and _")
    limit = max_concurrent if max_concurrent is not None else base.sweep.max_concurrent
    if limit < 1:
        problems.append(f"--max-concurrent {limit}: must be at least 1")
    if problems:
        raise ConfigError("command line", problems)
    directory = project / SWEEP_ROOT / (f"{label}-{profile}" if profile else label)
    report_dir = directory / "report" if profile else project / REPORT_ROOT / label
    points: list[Point] = []
    sizes: set[tuple[int, int]] = set()  # (training iterations, report meta-episodes per pair) of the points
    by_problem: dict[str, list[str]] = {}
    for point, combo, values in grid_points(spec):
        where = f"point {point}"
        try:
            resolved = parse_config(apply_values(data, values, where), where)
            run = {"env": resolved.env.name, "method": resolved.algorithm.preset,
                   "set": {k: v for k, v in values.items() if k not in RUN_KEYS}}
            point_data = {**data, "reproduce": {**data.get("reproduce", {}), "runs": {point: run}}}
            resolved_run = parse_config(run_data(point_data, point, where), where)
            sizes.add((resolved_run.train.iterations, resolved_run.reproduce.eval_per_pair))
        except ConfigError as err:
            for problem in err.problems:
                by_problem.setdefault(problem.removeprefix(f"{where}: "), []).append(point)
            continue
        points.append(Point(point, combo, run["env"], run["method"], directory / point, point_data))
    if by_problem:  # one line per problem, naming the points that have it
        raise ConfigError(f"sweep {label}", [f"{problem} (point{'s' if len(names) > 1 else ''} {', '.join(names)})"
                                             for problem, names in by_problem.items()])
    # What every point runs (a grid's `set` may change both); the project's when points differ.
    iterations, per_pair = (next(iter(sizes)) if len(sizes) == 1
                            else (base.reproduce.iterations, base.reproduce.eval_per_pair))
    return Sweep(label, spec, points, directory, report_dir, limit, iterations, per_pair, profile)


def prepare(project: Path, sweep: Sweep) -> None:
    """Write every point's workspace and the sweep's manifest (``sweep.json``)."""
    from mage_core.stages.reproduce import write_workspace

    for point in sweep.points:
        write_workspace(project, point.workspace, point.params, f"sweep {sweep.name}, point {point.name}")
    write_json_atomic(sweep.directory / "sweep.json", manifest(sweep))


def manifest(sweep: Sweep) -> dict[str, Any]:
    return {"name": sweep.name, "profile": sweep.profile, "set": sweep.grid.set, "vary": sweep.grid.vary,
            "iterations": sweep.iterations, "eval_per_pair": sweep.eval_per_pair,
            "max_concurrent": sweep.max_concurrent, "report_dir": str(sweep.report_dir),
            "points": [{"name": p.name, "values": p.values, "env": p.env, "method": p.method,
                        "workspace": str(p.workspace)} for p in sweep.points]}


def local_concurrency(sweep: Sweep) -> int:
    """Points at once on this machine: the limit, the cores and the points, whichever is least."""
    return max(1, min(sweep.max_concurrent, os.cpu_count() or 1, len(sweep.points)))


# ---------------------------------------------------------------- summary

SUMMARY_FILES = ("summary.md", "summary.csv", "bars.png", "metrics.json")


def summarize(sweep: Sweep, timings: Mapping[str, float] | None = None) -> dict[str, float]:
    """The ablation table (markdown + csv), the bar chart and flat metrics of a
    finished sweep, under ``sweep.report_dir``; returns the metrics."""
    import pandas as pd

    from mage_core.evaluation.aggregate import ablation_table
    from mage_core.evaluation.run_tables import load_runs

    episodes: list[Any] = []
    overview = []
    for point in sweep.points:
        tables = load_runs(point.workspace / "artifacts" / "eval", point.workspace / "artifacts" / "train",
                           {point.name: (point.env, point.method)})
        episodes.append(tables.episodes)
        overview.append(tables.overview)
    all_episodes = pd.concat(episodes, ignore_index=True)
    numbers, table_md = ablation_table(all_episodes, {p.name: p.values for p in sweep.points})
    runs = pd.concat(overview, ignore_index=True).set_index("run")
    out = sweep.report_dir
    csv = numbers.copy()
    for key in sweep.grid.vary:
        csv.insert(1 + list(sweep.grid.vary).index(key), key, [str(p.values[key]) for p in sweep.points])
    write_text_atomic(out / "summary.csv", csv.to_csv(index=False))
    write_bytes_atomic(out / "bars.png", bars_png(numbers, sweep.name))
    metrics = {f"sweep/{row.point}/{name}": float(getattr(row, name))
               for row in numbers.itertuples() for name in ("first", "final", "success", "pass_at")}
    write_json_atomic(out / "metrics.json", metrics)
    shared = ", ".join(f"`{k}={v}`" for k, v in sweep.grid.set.items()) or "none"
    lines = [f"# Ablation: {sweep.name}\n",
             f"Varied: {', '.join(f'`{k}`' for k in sweep.grid.vary)}; shared overrides: {shared}"
             f"{'; profile ' + sweep.profile if sweep.profile else ''}. Each point trained for "
             f"{sweep.iterations} iterations (unless its values set train.iterations: see Points) and was "
             f"evaluated on {sweep.eval_per_pair} meta-episodes per (opponent, seat) of every suite.\n",
             "The measure is final-hand chips for Kuhn Poker (a fixed strategy already maximizes its win rate) "
             "and success elsewhere; `first episode` against `final episode` is the adaptation within a "
             "meta-episode. Intervals are 95%.\n", table_md,
             f"![{sweep.name}](bars.png)\n", *kuhn_sections(sweep, all_episodes), "## Points\n",
             "| point | iterations | stage minutes (this run) | workspace |",
             "|---|---|---|---|"]
    for point in sweep.points:
        info = runs.loc[point.name]
        stages = f"{timings[point.name] / 60:.1f}" if timings and point.name in timings else "—"
        lines.append(f"| {point.name} | {info.iterations} | {stages} | `{point.workspace}` |")
    write_text_atomic(out / "summary.md", "\n".join(lines) + "\n")
    return metrics


#: The key whose values are repetitions of one setting, not settings compared.
SEED_KEY = "seed"


def kuhn_sections(sweep: Sweep, episodes: Any) -> list[str]:
    """For Kuhn points: every suite (in-domain and out-of-domain) of every point next
    to the suite's exact ceilings, and, when the grid varies the training seed, the
    same final hands over seeds (mean, sample standard deviation, range) per setting."""
    from mage_core.evaluation.aggregate import kuhn_ceiling_table
    from mage_core.stages.report import opening_bets_markdown

    frame, table = kuhn_ceiling_table(episodes, {p.name: p.name for p in sweep.points})
    if frame.empty:
        return []
    parts = ["## Kuhn Poker: every suite against its exact ceilings\n",
             "Chips per hand, population-weighted, final hand with its 95% interval over the suite's "
             "meta-episodes; the ceilings are exact for the suite's opponents, K and deals (`mage kuhn analyze` "
             "prints them per seat): best fixed strategy (no adaptation), play fixed then respond (adaptation "
             "without probing), Bayes-optimal final hand, opponent known. — : no ceiling in the evaluation (K "
             "above 4; under early stop, best fixed and play fixed then respond, which are not computed for a "
             "stopping agent: its ceilings are those of the stopping protocol).\n",
             table]
    if SEED_KEY in sweep.grid.vary and len(sweep.grid.vary[SEED_KEY]) > 1:
        parts += ["### Over training seeds\n", seeds_markdown(sweep, frame)]
    bets = opening_bets_markdown(episodes, {p.name: p.name for p in sweep.points})
    second = second_hand_markdown(sweep)
    return parts + ([bets] if bets else []) + ([second] if second else [])


_SECOND_HAND = re.compile(r"^eval/(?P<suite>[a-z0-9_]+)/all/bet_(?P<card>[JQK])_ep2_(?P<after>.+)$")


def second_hand_markdown(sweep: Sweep) -> str:
    """Each point's hand-2 opening bets after a hand 1 that revealed the opponent or did not
    (``envs.kuhn_poker.second_hand.second_hand_metrics``, read from the points' ``metrics.json``); empty
    when no suite measured them (stochastic opponents, K = 1)."""
    from mage_core.evaluation.aggregate import IN_DOMAIN, markdown_table

    cells = []
    for point in sweep.points:
        path = point.workspace / "artifacts" / "eval" / point.name / "metrics.json"
        if not path.is_file():
            continue
        metrics = json.loads(path.read_text())["metrics"]
        bets: dict[tuple[str, str], dict[str, float]] = {}
        for key, value in metrics.items():
            if (m := _SECOND_HAND.match(key)) is not None:
                bets.setdefault((m["suite"], m["after"]), {})[m["card"]] = value
        for (suite, after), per_card in sorted(bets.items(), key=lambda kv: (kv[0][0] != IN_DOMAIN, kv[0])):
            agreement = metrics.get(f"eval/{suite}/all/ep2_bayes_agreement")
            cells.append([point.name, suite, after.removeprefix("after_") if after != "unrevealed" else "not revealed",
                          *(f"{per_card[c]:.3f}" if c in per_card else "—" for c in "JQK"),
                          f"{agreement:.3f}" if agreement is not None else "—"])
    if not cells:
        return ""
    return ("\n#### Does hand 2 use what hand 1 showed?\n\n"
            "The policy's probability of betting its first decision of hand 2, acting first, per card, after a "
            "hand 1 that revealed the opponent (the posterior puts all its weight on it) or did not, read from its "
            "scores: every way hand 1 can go (the policy's hand-1 moves forced: bet, check-fold, check-call, a third "
            "each; every deal), weighted by how likely it is; `mage kuhn probe` prints every view). Last column: the share of hand-2 openings where the policy's "
            "more likely move is the Bayes-optimal one, where one is named (a revealed opponent, or hand 2 the "
            "last; fresh deals, and no early stop when hand 2 is not the last). Against the exploration pair, after the tight caller is revealed the best move bets J and "
            "checks Q and K; after the calling station, checks J and bets K.\n\n"
            + markdown_table(["point", "suite", "hand 1 revealed", "P(bet) with J", "P(bet) with Q",
                              "P(bet) with K", "agrees with Bayes (suite)"], cells))


def seeds_markdown(sweep: Sweep, frame: Any) -> str:
    """``kuhn_ceiling_table`` rows grouped by every varied value but the seed."""
    from mage_core.evaluation.aggregate import CEILING_LABELS, fmt_number, markdown_table

    others = [key for key in sweep.grid.vary if key != SEED_KEY]
    setting = {p.name: tuple(str(p.values[key]) for key in others) for p in sweep.points}
    frame = frame.assign(setting=frame.run.map(setting))
    rows = []
    for (values, suite), g in frame.groupby(["setting", "suite"], sort=False):
        finals = g.final.to_numpy()
        spread = f"{finals.std(ddof=1):.3f}" if len(finals) > 1 else "—"
        rows.append([*values, suite, str(len(finals)), f"{finals.mean():+.3f}", spread,
                     f"{finals.min():+.3f} .. {finals.max():+.3f}",
                     *(fmt_number(float(g[f"ceiling_{name}"].iloc[0]), signed=True) for name in CEILING_LABELS)])
    rows.sort(key=lambda r: (r[len(others)] != "in_domain", r[len(others)]))
    note = (f"Each setting trained from {len(sweep.grid.vary[SEED_KEY])} seeds ({SEED_KEY}: "
            f"{', '.join(map(str, sweep.grid.vary[SEED_KEY]))}); per seed the final hand is the mean over the "
            "suite's meta-episodes, and the spread is across seeds (sample standard deviation).\n\n")
    header = [*(f"`{key}`" for key in others), "suite", "seeds", "final hand, mean", "std over seeds", "range",
              *CEILING_LABELS.values()]
    return note + markdown_table(header, rows)


def bars_png(numbers: Any, title: str) -> bytes:
    """Final-episode measure per point with its 95% interval, first episode as a
    hollow marker; one panel per environment (their units differ)."""
    from mage_core.evaluation.aggregate import ENV_LABELS, env_sort_key
    from mage_core.stages.report_plots import new_figure, png_bytes

    envs = sorted(dict.fromkeys(numbers.env), key=env_sort_key)
    fig, axes = new_figure(1, len(envs))
    for ax, env in zip(axes[0], envs):
        rows = numbers[numbers.env == env].reset_index(drop=True)
        xs = list(range(len(rows)))
        err = [(rows.final - rows.final_low).clip(lower=0), (rows.final_high - rows.final).clip(lower=0)]
        ax.bar(xs, rows.final, yerr=err, capsize=4, color=[f"C{i % 10}" for i in xs], label="final episode")
        ax.scatter(xs, rows["first"], marker="o", facecolors="none", edgecolors="black", zorder=3,
                   label="first episode")
        ax.set_xticks(xs, rows.point, rotation=20, ha="right", fontsize="small")
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_ylabel(rows.headline.iloc[0])
        ax.set_title(f"{title}: {ENV_LABELS.get(env, env)}")
        ax.legend(fontsize="small", frameon=False)
    return png_bytes(fig)


# ---------------------------------------------------------------- command

def flow_args(grid: str | None, vary: Sequence[str], name: str | None, profile: str | None,
              overrides: Sequence[str], max_concurrent: int | None, ray: bool) -> list[str]:
    """The arguments of ``python -m flows sweep`` that stand for these options."""
    args = [] if grid is None else ["--grid", grid]
    args += [a for item in vary for a in ("--vary", item)] + [a for item in overrides for a in ("--set", item)]
    args += [] if name is None else ["--name", name]
    args += [] if profile is None else ["--profile", profile]
    args += [] if max_concurrent is None else ["--max-concurrent", str(max_concurrent)]
    return args + (["--ray"] if ray else [])


def run(params: str, grid: str | None = None, vary: Sequence[str] = (), name: str | None = None,
        profile: str | None = None, overrides: Sequence[str] = (), max_concurrent: int | None = None,
        ray: bool = False, dry_run: bool = False) -> int:
    """``mage sweep``: validate the whole grid, show it, then run it as a flow."""
    from mage_core.stages.reproduce import console, run_flow

    project = Path(params).resolve().parent
    sweep = plan(params, grid, vary, name, profile, overrides, max_concurrent)
    if not (project / "dvc.yaml").is_file():
        raise ConfigError("command line", [f"{project}: no dvc.yaml (run from the project root)"])
    where = "on Ray " + (os.environ.get("RAY_ADDRESS") or "(a local instance)") if ray or os.environ.get(
        "RAY_ADDRESS") else f"locally, {local_concurrency(sweep)} at a time"
    console.print(f"sweep {sweep.name}: {len(sweep.points)} point(s), {where}")
    for point in sweep.points:
        values = ", ".join(f"{k}={v}" for k, v in point.values.items())
        console.print(f"  {point.name:<36} {values}")
    if dry_run:
        return 0
    from mage_core.io.workspace_lock import WorkspaceBusy, workspace_lock

    try:
        with workspace_lock(sweep.directory, f"mage sweep {sweep.name}") as lock:
            if not run_flow(["sweep", str(project), *flow_args(grid, vary, name, profile, overrides, max_concurrent,
                                                               ray)], project, lock):
                return 1
    except WorkspaceBusy as err:
        raise ConfigError("command line", [str(err)]) from None
    console.print(f"  summary:  {sweep.report_dir / 'summary.md'}\n"
                  f"  points:   {sweep.directory}/<point> (each a DVC project: dvc dag, dvc metrics show)")
    return 0
