"""``mage ablations``: the paper's ablations (section 4.4) as this project measures them.

The reproduction runs the points of the grids ``reproduce.ablations`` names as runs of its own
graph (``mage_core.config.ablations``); this stage reads their evaluations and training logs and
writes, under ``--out`` (``reports/paper-ablations/``):

- ``<grid>/summary.md`` and ``summary.csv``: every point (first and final episode, success and
  Pass@K with their 95% intervals), every setting over its training seeds (mean, spread), and
  each claim of the grid (``sweep.grids.<grid>.claims``) with its verdict;
- ``<grid>/figure.png``: the paper's Figure 5 for the grid, training curves (mean over seeds) and
  final-episode bars (mean over seeds, every seed a dot);
- ``verdicts.csv`` and ``section.md``: every claim of every grid, the report's ablation section.

A claim sets two settings apart (``better`` than ``than``: values of the varied keys, the seed
left out). Per training seed the two points played the same report tasks (the same
``evaluation.seed``), so their final-episode measures are compared meta-episode by meta-episode:
the mean paired difference per seed. The verdict rests on those per-seed differences: their mean
with a 95% t-interval over the seeds (``holds`` above 0, ``does not hold`` below, ``not resolved
at this scale`` across it); with one seed, on that seed's paired interval over the tasks, marked
as such. Nothing is tuned on these sets: they are the report sets of Table 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from mage_core.config.grids import matches, setting_label
from mage_core.io.atomic import write_bytes_atomic, write_text_atomic
from mage_core.stages.ablation_records import recorded_claims, recorded_markdown

OUT_DIR = Path("reports") / "paper-ablations"
SEED_KEY = "seed"
#: 97.5% quantiles of Student's t by degrees of freedom (1..30); the normal one beyond.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)
VERDICTS = {"holds": "holds", "reversed": "does not hold", "unresolved": "not resolved at this scale"}


def t975(dof: int) -> float:
    return _T975[dof - 1] if 1 <= dof <= len(_T975) else 1.96


@dataclass(frozen=True)
class FlowPoint:
    """A point of a grid the reproduction ran: its name, its varied values, and the run whose
    outputs it reads (its own, or the run it equals)."""

    grid: str
    point: str
    varied: dict[str, Any]
    run: str
    env: str
    method: str

    @property
    def setting(self) -> tuple[tuple[str, str], ...]:
        """The varied values but the seed: what a claim names."""
        return tuple((k, repr(v)) for k, v in self.varied.items() if k != SEED_KEY)

    @property
    def seed(self) -> Any:
        return self.varied.get(SEED_KEY)


def flow_points(runs: Mapping[str, Any]) -> dict[str, list[FlowPoint]]:
    """Grid -> its points, from ``ablation_runs`` (``mage_core.config.ablations``) of the params."""
    grids: dict[str, list[FlowPoint]] = {}
    for name, point in runs.items():
        grids.setdefault(point.grid, []).append(
            FlowPoint(point.grid, point.point, point.varied, point.reuses or name, point.env, point.method))
    return grids


@dataclass(frozen=True)
class Verdict:
    grid: str
    claim: str
    suite: str
    measure: str
    better: str
    than: str
    seeds: int
    mean: float
    low: float
    high: float
    per_seed: tuple[float, ...]

    @property
    def verdict(self) -> str:
        key = "holds" if self.low > 0 else "reversed" if self.high < 0 else "unresolved"
        return VERDICTS[key]


def _matches(point: FlowPoint, values: Mapping[str, Any]) -> bool:
    return matches(point.varied, values)


def trial_suite(suite: str) -> str:
    """A claim's suite (``in_domain``, or an out-of-domain suite's name as ``evaluation.ood`` names
    it) as the trial tables name it (``ood_<name>``)."""
    from mage_core.evaluation.suites import IN_DOMAIN, OOD_PREFIX

    return suite if suite == IN_DOMAIN or suite.startswith(OOD_PREFIX) else OOD_PREFIX + suite


def final_values(trials: Any, suite: str, column: str) -> Any:
    """One row per meta-episode of ``suite`` (a claim's suite name, ``trial_suite``): its task seed
    and ``column`` of its last played episode (a meta-episode stopped early counts its last
    played episode)."""
    from mage_core.evaluation.paired import META_EPISODE

    rows = trials[trials.suite == trial_suite(suite)].sort_values([*META_EPISODE, "episode"])
    last = rows.groupby(META_EPISODE, sort=True).tail(1)
    return last.set_index(META_EPISODE)[["task_seed", column]].astype({column: float})


def paired_mean(a_trials: Any, b_trials: Any, suite: str, column: str, names: tuple[str, str]
                ) -> tuple[float, float, float, int]:
    """Mean of (a - b) over the meta-episodes of ``suite`` both played, its 95% normal interval, n.
    ValueError naming both when they did not play the same tasks."""
    from mage_core.evaluation.stats import mean_interval

    a, b = final_values(a_trials, suite, column), final_values(b_trials, suite, column)
    if a.empty:
        raise ValueError(f"{names[0]}: no meta-episode of suite {suite!r} in its evaluation")
    if not a.index.equals(b.index) or not (a.task_seed == b.task_seed).all():
        raise ValueError(f"{names[0]} and {names[1]} did not play the same {suite} tasks (meta-episodes or task "
                         "seeds differ): they cannot be compared paired")
    mean, low, high = mean_interval((a[column] - b[column]).tolist())
    return mean, low, high, len(a)


def judge(grid: str, claim: Any, points: Sequence[FlowPoint], trials: Mapping[str, Any]) -> Verdict:
    """``claim`` (a ``ClaimConfig``) judged from ``points`` (module docstring); ``trials``: run ->
    its trial table. ValueError naming the claim when a seed has one side and not the other."""
    from mage_core.evaluation.aggregate import headline_measure

    better = {p.seed: p for p in points if _matches(p, claim.better)}
    than = {p.seed: p for p in points if _matches(p, claim.than)}
    label = f"grid {grid}, claim {claim.text!r}"
    if not better or not than:
        raise ValueError(f"{label}: no point has {'better' if not better else 'than'}'s values")
    if set(better) != set(than):
        raise ValueError(f"{label}: the two settings were trained from other seeds ({sorted(map(str, better))} "
                         f"against {sorted(map(str, than))}): they cannot be paired")
    measure = claim.measure
    column = headline_measure(next(iter(better.values())).env) if measure == "headline" else measure
    diffs, single = [], None
    for seed in better:
        a, b = better[seed], than[seed]
        single = paired_mean(trials[a.run], trials[b.run], claim.suite, column, (a.run, b.run))
        diffs.append(single[0])
    if len(diffs) > 1:
        mean = sum(diffs) / len(diffs)
        spread = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
        half = t975(len(diffs) - 1) * spread / math.sqrt(len(diffs))
        low, high = mean - half, mean + half
    else:
        assert single is not None
        mean, low, high = single[0], single[1], single[2]
    return Verdict(grid, claim.text, claim.suite, "chips" if column == "score" else column,
                   setting_label(claim.better), setting_label(claim.than), len(diffs), mean, low, high, tuple(diffs))


@dataclass(frozen=True)
class Decomposition:
    """A grid's ``decompose``: each step (a setting minus the one before) judged like a claim,
    what changes in the resolved params at each step, and the whole (last minus first)."""

    grid: str
    text: str
    labels: tuple[str, ...]  # the settings, in order
    steps: tuple[Verdict, ...]  # labels[i + 1] minus labels[i]
    changes: tuple[tuple[str, ...], ...]  # per step, ``key: old -> new`` of the resolved params
    whole: Verdict  # labels[-1] minus labels[0]


def decompose(grid: str, spec: Any, points: Sequence[FlowPoint], trials: Mapping[str, Any],
              params: Mapping[str, Mapping[str, Any]]) -> Decomposition:
    """``spec`` (a ``DecompositionConfig``) measured from ``points``; ``params``: run -> its resolved
    params (``AblationRun.params``), from which each step's changes are read (the first seed's)."""
    from mage_core.config.ablations import changes
    from mage_core.config.pipeline import ClaimConfig

    labels = tuple(setting_label(step) for step in spec.steps)

    def first(values: Mapping[str, Any]) -> FlowPoint:
        return min((p for p in points if _matches(p, values)), key=lambda p: str(p.seed))

    steps, changed = [], []
    for before, after in zip(spec.steps, spec.steps[1:]):
        text = f"{setting_label(after)} minus {setting_label(before)}"
        steps.append(judge(grid, ClaimConfig(text=text, better=after, than=before, suite=spec.suite), points, trials))
        changed.append(tuple(changes(params[first(before).run], params[first(after).run])))
    whole = judge(grid, ClaimConfig(text=f"{labels[-1]} minus {labels[0]}", better=spec.steps[-1],
                                    than=spec.steps[0], suite=spec.suite), points, trials)
    return Decomposition(grid, spec.text, labels, tuple(steps), tuple(changed), whole)


def decomposition_markdown(d: Decomposition) -> str:
    """The steps of ``d`` as a table, then the whole; the steps' means sum to the whole's (paired
    on the same tasks, per seed)."""
    from mage_core.evaluation.aggregate import markdown_table

    def cells(v: Verdict) -> list[str]:
        seeds = ", ".join(f"{x:+.3f}" for x in v.per_seed) if v.seeds > 1 else "1 seed (interval over its tasks)"
        sign = "above 0" if v.low > 0 else "below 0" if v.high < 0 else "across 0"
        return [f"{v.mean:+.3f} [{v.low:+.3f}, {v.high:+.3f}]", seeds, sign]

    rows = [[f"{i + 1}. {d.labels[i]} -> {d.labels[i + 1]}", "; ".join(c) or "nothing (the same params)", *cells(v)]
            for i, (v, c) in enumerate(zip(d.steps, d.changes))]
    rows.append([f"whole: {d.labels[0]} -> {d.labels[-1]}", "every step's", *cells(d.whole)])
    total = sum(v.mean for v in d.steps)
    return (f"**{d.text}** ({d.steps[0].measure}, final episode, {d.steps[0].suite}; each step is the later setting "
            "minus the earlier, paired by task within each training seed, 95% t-interval over the seeds):\n\n"
            + markdown_table(["step", "what changes (resolved params)", "difference [95%]", "per seed", "sign"], rows)
            + f"\nThe steps sum to {total:+.3f}, the whole's {d.whole.mean:+.3f}.\n")


def seeds_table(numbers: Any, points: Sequence[FlowPoint]) -> tuple[Any, str]:
    """Every setting's final-episode measure over its seeds: mean, sample std, range."""
    import pandas as pd

    from mage_core.evaluation.aggregate import markdown_table

    by_point = {p.point: p for p in points}
    frame = numbers.assign(setting=[setting_label(by_point[n].varied, SEED_KEY) for n in numbers.point])
    rows, cells = [], []
    for setting, g in frame.groupby("setting", sort=False):
        finals = g.final.to_numpy(dtype=float)
        std = float(finals.std(ddof=1)) if len(finals) > 1 else float("nan")
        rows.append({"setting": setting, "seeds": len(finals), "final_mean": float(finals.mean()), "final_std": std,
                     "final_min": float(finals.min()), "final_max": float(finals.max()), "headline": g.headline.iloc[0]})
        signed = g.headline.iloc[0] == "chips"
        fmt = (lambda x: f"{x:+.3f}") if signed else (lambda x: f"{x:.3f}")  # noqa: E731
        cells.append([setting, str(len(finals)), fmt(finals.mean()), "—" if math.isnan(std) else f"{std:.3f}",
                      f"{fmt(finals.min())} .. {fmt(finals.max())}"])
    table = markdown_table(["setting", "seeds", "final episode, mean", "std over seeds", "range"], cells)
    return pd.DataFrame(rows), table


def verdicts_markdown(verdicts: Sequence[Verdict], with_grid: bool = True) -> str:
    from mage_core.evaluation.aggregate import markdown_table

    cells = []
    for v in verdicts:
        seeds = (f"{v.seeds} seeds: " + ", ".join(f"{d:+.3f}" for d in v.per_seed)) if v.seeds > 1 else \
            "1 seed (interval over its tasks)"
        diff = f"{v.mean:+.3f} [{v.low:+.3f}, {v.high:+.3f}]"
        cells.append([*([v.grid] if with_grid else []), v.claim, f"{v.better} vs {v.than}", v.suite, v.measure,
                      diff, seeds, f"**{v.verdict}**"])
    header = [*(["grid"] if with_grid else []), "the paper's claim", "compared", "suite", "measure",
              "final episode, better minus than [95%]", "per seed", "verdict"]
    return markdown_table(header, cells)


#: The exact ceilings drawn over the final-episode bars (``aggregate.CEILING_LABELS``' names).
BAR_CEILINGS = ("best_fixed", "adaptive")


def bar_ceilings(episodes: Any) -> dict[str, float]:
    """The exact in-domain ceilings every point of a grid shares at its final episode
    (``BAR_CEILINGS``), label -> value; a ceiling some point lacks, or that differs between
    points (a grid that varies the population), is left out."""
    from mage_core.evaluation.aggregate import CEILING_LABELS, IN_DOMAIN

    rows = episodes[(episodes.suite == IN_DOMAIN) & (episodes.group == "all")]
    rows = rows[rows.episode == rows.groupby("run").episode.transform("max")]
    out: dict[str, float] = {}
    for name in BAR_CEILINGS:
        values = rows[f"ceiling_{name}"].astype(float)
        if len(values) and values.notna().all() and values.round(9).nunique() == 1:
            out[CEILING_LABELS[name]] = float(values.iloc[0])
    return out


def figure_png(grid: str, numbers: Any, curves: Any, points: Sequence[FlowPoint],
               ceilings: Mapping[str, float] | None = None) -> bytes:
    """Figure 5 of the paper for one grid: training curves per setting (mean over seeds of the
    selection-set measure) and the final-episode measure per setting (mean over seeds; each
    seed a dot), under the exact ceilings the points share (``bar_ceilings``: dashed lines)."""
    from mage_core.stages.report_plots import new_figure, png_bytes

    setting_of = {p.run: ", ".join(f"{v}" for k, v in p.varied.items() if k != SEED_KEY) or p.point for p in points}
    point_setting = {p.point: setting_of[p.run] for p in points}
    fig, axes = new_figure(1, 2)
    left, right = axes[0]
    settings = list(dict.fromkeys(point_setting[p.point] for p in points))
    if not curves.empty:
        frame = curves[curves.run.isin(setting_of)].assign(setting=lambda f: f.run.map(setting_of))
        frame = frame.dropna(subset=["eval_headline"])
        for i, setting in enumerate(settings):
            mine = frame[frame.setting == setting].groupby("step").eval_headline.mean()
            if not mine.empty:
                left.plot(mine.index, mine.to_numpy(), color=f"C{i % 10}", label=setting)
    left.set_xlabel("training iteration")
    left.set_ylabel("selection set, training-time evaluation")
    left.set_title(f"{grid}: learning curves (mean over seeds)")
    if settings:
        left.legend(fontsize="small", frameon=False)
    frame = numbers.assign(setting=numbers.point.map(point_setting))
    for i, setting in enumerate(settings):
        mine = frame[frame.setting == setting]
        right.bar(i, mine.final.mean(), color=f"C{i % 10}", alpha=0.6)
        right.scatter([i] * len(mine), mine.final, color="black", s=12, zorder=3)
    right.set_xticks(range(len(settings)), settings, rotation=20, ha="right", fontsize="small")
    right.axhline(0.0, color="grey", linewidth=0.8)
    for j, (label, value) in enumerate((ceilings or {}).items()):
        right.axhline(value, color="black", linestyle=("--", ":")[j % 2], linewidth=1.0,
                      label=f"{label} (exact) {value:+.3f}")
    if ceilings:
        low, high = right.get_ylim()
        margin = 0.08 * (high - low)
        right.set_ylim(min(low, min(ceilings.values()) - margin), max(high, max(ceilings.values()) + margin))
        right.legend(fontsize="small", loc="lower left", framealpha=0.9)
    headline = numbers.headline.iloc[0] if not numbers.empty else ""
    right.set_ylabel(f"final episode, {headline} (report set)")
    right.set_title(f"{grid}: final episode (bar: seed mean; dots: seeds)")
    return png_bytes(fig)


def run(params: str, out: str = str(OUT_DIR), overrides: Sequence[str] = ()) -> int:
    """``mage ablations``: validate every point, summarize every grid; logged to MLflow when
    tracking is on (the verdicts as metrics, the summaries as artifacts)."""
    import yaml
    from rich.console import Console

    from mage_core.config import apply_overrides, load_config
    from mage_core.config.ablations import ablation_runs
    from mage_core.tracking.runs import check_tracking, open_mlflow_run

    cfg = load_config(params, overrides)  # a bad file is reported here, in full
    if cfg.tracking.mlflow:
        check_tracking(Path.cwd())
    data = apply_overrides(yaml.safe_load(Path(params).read_text(encoding="utf-8")) or {}, overrides)
    out_dir = Path(out)
    runs = ablation_runs(data, params)  # every point resolved and validated once
    verdicts = summarize(Path.cwd(), out_dir, data, params, runs)
    if cfg.tracking.mlflow:
        with open_mlflow_run("ablations", cfg.tracking.experiment, None, Path.cwd()) as tracker:
            tracker.extra("the ablation views", lambda: tag_points(tracker.client, tracker.experiment_id,
                                                                    flow_points(runs)))
            tracker.log_params({"ablations.grids": ", ".join(cfg.reproduce.ablations) or "none"})
            tracker.log_metrics(0, {f"ablation/{v.grid}/{i}/{name}": getattr(v, name)
                                    for i, v in enumerate(verdicts) for name in ("mean", "low", "high")})
            for path in sorted(out_dir.rglob("*")):
                if path.is_file():
                    folder = path.parent.relative_to(out_dir).as_posix()
                    tracker.log_artifact(path, "paper-ablations" + ("" if folder == "." else f"/{folder}"))
    Console().print(f"ablations summarized in {out_dir} ({len(verdicts)} claim(s) judged)")
    return 0


def tag_points(client: Any, experiment_id: str, grids: Mapping[str, Sequence[FlowPoint]]) -> int:
    """Tag the latest evaluate run of every point's run with ``ablation.<grid>`` = the point's
    setting (a Table 1 run that is a point of several grids gets one tag per grid), then write
    each grid's saved view "Ablation <grid>: by setting" (``mage_core.tracking.views``). Returns
    how many runs were tagged; a point whose run has no evaluate run in the experiment is skipped."""
    from mage_core.tracking.views import ablation_tag, ensure_ablation_view

    tagged = 0
    for grid, points in grids.items():
        for p in points:
            found = client.search_runs([experiment_id], f"tags.stage = 'evaluate' AND tags.`mage.run` = '{p.run}'",
                                       order_by=["attributes.start_time DESC"], max_results=1)
            if found:
                client.set_tag(found[0].info.run_id, ablation_tag(grid), setting_label(p.varied, SEED_KEY))
                tagged += 1
        if points:
            ensure_ablation_view(client, experiment_id, grid, points[0].env)
    return tagged


def summarize(project: Path, out: Path, data: Mapping[str, Any], source: str = "params.yaml",
              runs: Mapping[str, Any] | None = None) -> list[Verdict]:
    """Every grid of ``reproduce.ablations`` of the raw params ``data`` (``runs``: its
    ``ablation_runs``, resolved here when not given), summarized under ``out`` from ``project``'s
    artifacts (module docstring); returns the verdicts."""
    import pandas as pd

    from mage_core.config import parse_config
    from mage_core.evaluation.aggregate import ablation_table
    from mage_core.config.ablations import ablation_runs
    from mage_core.evaluation.run_tables import load_runs
    from mage_core.stages.profiles import profile_params

    cfg = parse_config(dict(data), source)
    runs = ablation_runs(data, source) if runs is None else runs
    grids = flow_points(runs)
    decompositions: list[Decomposition] = []
    eval_root, train_root = project / "artifacts" / "eval", project / "artifacts" / "train"
    verdicts: list[Verdict] = []
    rows = []
    for grid, points in grids.items():
        tables = load_runs(eval_root, train_root, {p.run: (p.env, p.method) for p in points})
        episodes = tables.episodes.copy()
        by_run: dict[str, list[FlowPoint]] = {}
        for p in points:
            by_run.setdefault(p.run, []).append(p)
        # one copy of a run's rows per point that reads it, under the point's name
        episodes = pd.concat([episodes[episodes.run == run].assign(run=p.point) for run, ps in by_run.items()
                              for p in ps], ignore_index=True)
        numbers, table = ablation_table(episodes, {p.point: p.varied for p in points})
        _, seeds_md = seeds_table(numbers, points)
        trials = {p.run: pd.read_parquet(eval_root / p.run / "trials.parquet") for p in points}
        mine = [judge(grid, claim, points, trials) for claim in cfg.sweep.grids[grid].claims]
        verdicts += mine
        spec = cfg.sweep.grids[grid].decompose
        parts: list[str] = []
        if spec is not None:
            params = {p.run: runs[f"{grid}-{p.point}"].params for p in points}
            found = decompose(grid, spec, points, trials, params)
            decompositions.append(found)
            parts = ["\n## Decomposition\n", decomposition_markdown(found)]
            write_text_atomic(out / grid / "decomposition.csv", pd.DataFrame(
                [{"step": i + 1, "from": found.labels[i], "to": found.labels[i + 1], "changes": "; ".join(c),
                  "mean": v.mean, "low": v.low, "high": v.high, "seeds": v.seeds}
                 for i, (v, c) in enumerate(zip(found.steps, found.changes))]).to_csv(index=False))
        folder = out / grid
        # a point's in-domain suite is its own training population: varied, the rows below differ in
        # what they average over (weights, or opponents), and only the claims' paired figures compare
        caveat = ["In-domain is each point's own training population here (the grid varies "
                  + ", ".join(f"`{k}`" for k in cfg.sweep.grids[grid].vary if k.startswith("population."))
                  + "): these rows average over different opponents or weights; the claims above compare the "
                  "settings paired, meta-episode by meta-episode, on the opponents both played, unweighted.\n"] \
            if any(k.startswith("population.") for k in cfg.sweep.grids[grid].vary) else []
        reused = [f"`{p.point}` is `{p.run}`" for p in points if p.run != f"{grid}-{p.point}"]
        lines = [f"# Ablation {grid} (the reproduction's)\n",
                 f"Varied: {', '.join(f'`{k}`' for k in cfg.sweep.grids[grid].vary)}; shared: "
                 + (", ".join(f"`{k}={v}`" for k, v in cfg.sweep.grids[grid].set.items()) or "none")
                 + ". Every point played the report sets of Table 1 (`evaluation.seed`); intervals are 95%."
                 + (f" Points that are another run: {'; '.join(reused)}." if reused else "") + "\n",
                 "## Claims\n", verdicts_markdown(mine, with_grid=False) if mine else "No claim listed.\n", *parts,
                 "\n## Settings over training seeds (final episode, report set, in-domain)\n", *caveat, seeds_md,
                 "\n## Points\n", table, f"\n![{grid}](figure.png)\n"]
        write_text_atomic(folder / "summary.md", "\n".join(lines))
        write_text_atomic(folder / "summary.csv", numbers.to_csv(index=False))
        write_bytes_atomic(folder / "figure.png", figure_png(grid, numbers, tables.curves, points,
                                                                   bar_ceilings(episodes)))
    for v in verdicts:
        rows.append({"grid": v.grid, "claim": v.claim, "suite": v.suite, "measure": v.measure, "better": v.better,
                     "than": v.than, "seeds": v.seeds, "mean": v.mean, "low": v.low, "high": v.high,
                     "verdict": v.verdict})
    columns = ["grid", "claim", "suite", "measure", "better", "than", "seeds", "mean", "low", "high", "verdict"]
    write_text_atomic(out / "verdicts.csv", pd.DataFrame(rows, columns=columns).to_csv(index=False))
    unrun = claims_not_run(cfg)
    params_file = Path(source) if Path(source).is_file() else project / "params.yaml"
    not_run = recorded_markdown(project, unrun, recorded_claims(project, params_file, unrun, profile_params))
    write_text_atomic(out / "section.md", section_markdown(grids, verdicts, decompositions, not_run))
    return verdicts


def claims_not_run(cfg: Any) -> list[tuple[str, str, str]]:
    """(grid, claim, how to run it) for every claim of a grid of ``sweep.grids`` that
    ``reproduce.ablations`` leaves out: the profiles whose ``reproduce.ablations`` name the grid,
    else its ``mage sweep``."""
    out = []
    for grid, spec in cfg.sweep.grids.items():
        if grid in cfg.reproduce.ablations or not spec.claims:
            continue
        profiles = [name for name, overrides in cfg.reproduce.profiles.items()
                    if grid in (overrides.get("reproduce.ablations") or ())]
        how = (" or ".join(f"`mage reproduce --profile {name}`" for name in profiles) if profiles
               else f"`mage sweep {grid}`")
        out += [(grid, claim.text, how) for claim in spec.claims]
    return out


def section_markdown(grids: Mapping[str, Sequence[FlowPoint]], verdicts: Sequence[Verdict],
                     decompositions: Sequence[Decomposition] = (),
                     not_run: str = "") -> str:
    """The report's ablation section (``reports/report.md``); ``not_run``: the table of the claims
    the flow leaves out (``ablation_records.recorded_markdown``)."""
    if not grids:
        return ("## Ablations (the paper's section 4.4)\n\nNot run: `reproduce.ablations` names no grid "
                "(docs/commands.md, `mage reproduce`).\n" + not_run)
    runs = sum(len({p.run for p in points}) for points in grids.values())
    return ("## Ablations (the paper's section 4.4)\n\n"
            f"{len(grids)} grid(s), {runs} run(s) (points equal to a Table 1 run read its outputs). Each claim of "
            "the paper set beside what this project measured: the final episode's measure on the report set, better "
            "minus than, paired by task within each training seed; the interval is over the seeds (Student's t), or "
            "over one seed's tasks where a grid has one seed. Per grid: `reports/paper-ablations/<grid>/summary.md` "
            "and its figure.\n\n" + (verdicts_markdown(verdicts) if verdicts else "No grid lists a claim.\n")
            + "".join(f"\n### {d.grid}: decomposition\n\n" + decomposition_markdown(d) for d in decompositions)
            + "\n" + "".join(f"![{grid}](paper-ablations/{grid}/figure.png)\n" for grid in grids)
            + not_run)
