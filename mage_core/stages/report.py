"""The report stage: evaluation and training outputs -> what a person reads.

Composition root over ``mage_core.evaluation.run_tables`` (reading) and
``mage_core.evaluation.aggregate`` (tables): for the runs given
(run name -> (env, method)) it reads ``artifacts/eval/<run>/`` and, where it
exists, ``artifacts/train/<run>/``, and writes under ``out_dir`` (``reports/``):

- ``table1.md`` / ``table1.csv``: methods x environments in the layout of the
  paper's Table 1 (docs/method.md section 9), in-domain suite, final episode, 95%
  intervals;
- ``per_opponent.md``: every suite, opponent and seat, every episode index;
- ``adaptation.png``: the population's success (Kuhn: chips) by episode index;
- ``training_curves.png``: train headline and policy entropy per iteration;
- ``report.md``: all of the above with how to read them; under Table 1 every
  Kuhn run and suite next to the suite's exact ceilings (best fixed strategy,
  play fixed then respond, Bayes-optimal, opponent known: written by ``mage
  evaluate`` for the run's own opponents, K and deals), then each
  run's model, budget, seeds and every setting that differs from the paper profile
  of its game (``mage_core.stages.run_settings``): the layout is the paper's, the
  settings are not (the CPU default is a tiny model trained for minutes);
- ``metrics.json``: flat ``report/<env>/<method>/<name>`` figures for DVC.

A reproduction without Table 1 runs (``reproduce.runs: {}``: a profile of ablation grids alone)
gets ``report.md`` with its ablation section and nothing else; the other files exist (they are
the stage's outputs) and say there is no Table 1 run (``ablations_only_report``).

``report.md`` opens with where it came from: the git commit of the checkout and the
digest of the outputs dvc.lock records for the stages it reads (``tracking.lineage``;
``mage lineage`` checks both against a checkout).

Figures are drawn by ``stages.report_plots`` on ``matplotlib.figure.Figure`` with
the Agg canvas rather than through pyplot: no global backend switch, no figure
registry to leak, so the stage is safe inside a long-lived flow process. Every
file is written atomically, and none holds a wall-clock time: the same params and
outputs give the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from mage_core.envs.registry import games_with, task
from mage_core.evaluation.aggregate import (
    ENV_LABELS,
    IN_DOMAIN,
    MISSING,
    SELECTION_MARK,
    env_sort_key,
    final_episode,
    flat_metrics,
    fmt_interval,
    fmt_number,
    kuhn_ceiling_table,
    opening_bets_table,
    markdown_table,
    per_opponent,
    table1,
)
from mage_core.evaluation.run_tables import RunTables, load_runs
from mage_core.evaluation.stats import MIN_RATIO_CEILING
from mage_core.io.atomic import write_bytes_atomic, write_json_atomic, write_text_atomic
from mage_core.stages.report_plots import adaptation_png, in_domain_ceilings, no_runs_png, training_curves_png
from mage_core.stages.run_settings import RunSettings, settings_markdown

#: The report's last section: where the cost table is, and why it is not in this file.
COST_NOTE = ("What each section of this report cost in stage-minutes (Table 1 per environment, each ablation grid, "
             "the set-up), as the flow last measured it: [cost.md](cost.md), written by `mage reproduce` (and its "
             "evaluate flow), not by this stage: a run time is not a result, and this report is the same bytes on "
             "every run.\n")

FILES = ("table1.md", "table1.csv", "per_opponent.md", "adaptation.png", "training_curves.png", "report.md",
         "metrics.json")


def report(runs: Mapping[str, tuple[str, str]], eval_root: Path, train_root: Path | None,
           out_dir: Path, settings: Mapping[str, RunSettings], project_dir: Path | None = None) -> dict[str, float]:
    """Write the report files (module docstring); return the DVC metrics. ``settings``
    describes every run (``run_settings.run_settings`` of the params it was run with);
    ``project_dir`` (default: the current folder) is the checkout whose commit and
    dvc.lock the report states."""
    # First: a dvc.lock that cannot be read stops the report before any file is written.
    origin = lineage_line(Path.cwd() if project_dir is None else project_dir)
    if not runs:
        return ablations_only_report(out_dir, origin)
    tables = load_runs(eval_root, train_root, runs)
    missing = [run for run in runs if run not in settings]
    if missing:
        raise ValueError(f"no settings for run(s) {', '.join(missing)}: the report says what each run was")
    select_on = {r.run: (None if pd.isna(r.select_on) else r.select_on) for r in tables.overview.itertuples()}
    numbers, table_md = table1(tables.episodes, select_on=select_on)
    metrics = flat_metrics(tables)
    ceilings = in_domain_ceilings(tables.episodes)
    write_text_atomic(out_dir / "table1.md", table_md)
    write_text_atomic(out_dir / "table1.csv", numbers.to_csv())
    write_text_atomic(out_dir / "per_opponent.md", per_opponent_markdown(per_opponent(tables.episodes)))
    write_bytes_atomic(out_dir / "adaptation.png", adaptation_png(tables, ceilings))
    write_bytes_atomic(out_dir / "training_curves.png", training_curves_png(tables, ceilings))
    write_text_atomic(out_dir / "report.md", report_markdown(tables, table_md, eval_root, train_root,
                                                             {run: settings[run] for run in runs}, origin, out_dir))
    write_json_atomic(out_dir / "metrics.json", metrics)
    return metrics


#: What every Table 1 file says in a reproduction without Table 1 runs.
NO_RUNS = ("This reproduction has no Table 1 run (`reproduce.runs` is empty: a profile of ablation grids "
           "alone, such as `ablations_strangers`), so there is no Table 1, adaptation curve or training curve; "
           "its grids' runs are in the ablation section.")


def ablations_only_report(out_dir: Path, origin: str) -> dict[str, float]:
    """The report of a reproduction whose ``reproduce.runs`` is empty: ``report.md`` is its origin,
    the ablation section and the cost note; every other file of ``FILES`` says that there is no
    Table 1 run (the stage's outputs must exist), and there are no metrics."""
    write_text_atomic(out_dir / "table1.md", f"# Table 1\n\n{NO_RUNS}\n")
    write_text_atomic(out_dir / "table1.csv", "")
    write_text_atomic(out_dir / "per_opponent.md", f"# Per opponent and seat\n\n{NO_RUNS}\n")
    write_bytes_atomic(out_dir / "adaptation.png", no_runs_png())
    write_bytes_atomic(out_dir / "training_curves.png", no_runs_png())
    write_text_atomic(out_dir / "report.md", "\n".join([
        "# MAGE report\n", origin, f"{NO_RUNS}\n", ablations_markdown(out_dir), "## Cost\n", COST_NOTE]))
    write_json_atomic(out_dir / "metrics.json", {})
    return {}


def per_opponent_markdown(frame: pd.DataFrame) -> str:
    """One table per (run, suite): a row per opponent and seat, the population first."""
    parts = ["# Per opponent and seat\n",
             "Mean score (Kuhn: chips per hand), success rate and Pass@k at every episode index k; the `all` row "
             "is the population-weighted average. Kuhn adds the exact final-hand ceiling with the opponent known "
             "(`opponent known`: the best response's chips per hand; the `all` row weighs each opponent's by its "
             "probability; under early stop, the best a stopping agent that knows the opponent reports) and the "
             "exploitation ratio, final-hand chips over that ceiling (1 = fully exploited). "
             f"— in `exploitation`: the ceiling is below {MIN_RATIO_CEILING} chips per hand, or exceeds by less "
             "than that what an equilibrium strategy secures in the same seats (the game's value: -1/18 first to "
             "act, +1/18 second): an opponent such as CFR, whose best response earns only its residual "
             "exploitability, leaves nothing to exploit, and a ratio would only read sampling noise against the "
             "game value.\n"]
    for run, runs in frame.groupby("run", sort=False):
        env, method = runs.env.iloc[0], runs.method.iloc[0]
        parts.append(f"## {ENV_LABELS.get(env, env)}: {method} (run `{run}`)\n")
        for suite, rows in runs.groupby("suite", sort=False):
            ks = sorted(int(c[len("pass_at_"):]) for c in rows.columns
                        if c.startswith("pass_at_") and rows[c].notna().any())
            unit, exact = rows.unit.iloc[0], task(env).exact_values
            measures = [("score", unit), ("success", "success")] + ([("draw", "draw")] if task(env).draws else [])
            header = ["opponent", "seat", "n"] + [f"{name} ep{k}" for _, name in measures for k in ks]
            header += [f"Pass@{k}" for k in ks] + (["opponent known", "exploitation"] if exact else [])
            table = []
            for r in rows.to_dict("records"):
                cells = [r["opponent"], r["seat"], f"{r['num_meta_episodes']:.0f}"]
                cells += [fmt_number(r[f"{m}_ep{k}"], signed=m == "score") for m, _ in measures for k in ks]
                cells += [fmt_number(r[f"pass_at_{k}"]) for k in ks]
                if exact:
                    cells += [fmt_number(r["ceiling_known"], signed=True), fmt_number(r["exploitation_ratio"])]
                table.append(cells)
            parts.append(f"### suite `{suite}`\n\n" + markdown_table(header, table))
    return "\n".join(parts)


def _how_to_read() -> str:
    return ("**How to read this.** Every meta-episode plays K episodes against the same opponent (or task). "
            "Table 1 has the layout of the paper's, not necessarily its settings (each run's model, budget, seeds "
            "and differences from the paper profile of its game are listed under it): the in-domain suite's "
            "final episode, population-weighted, with 95% intervals "
            "(Wilson for rates and normal for means over one task or opponent; over a population of several "
            "(opponent, seat) pairs, the weighted mean's normal interval, each pair's standard error read off its "
            "own Wilson or normal interval); Pass@K is the share of meta-episodes won at least once in K "
            "episodes. The adaptation curve plots the same population figure at every episode index k: a curve "
            "that rises with k means the agent uses what earlier episodes revealed (it explores, then exploits); "
            "a flat curve is a fixed strategy however good, and a falling one spends later episodes worse than "
            "the first. In Kuhn Poker a single fixed strategy already maximizes the win rate, so read chips per "
            "hand (docs/method.md section 8) against the exact ceilings of each suite, computed for its own opponents, "
            "K and deals (table under Table 1): the best fixed strategy (no adaptation), play fixed then respond "
            "(the best fixed strategy until the last hand, then the best response to what it revealed: "
            "adaptation without probing), the Bayes-optimal final hand (no agent earns more) and the opponent "
            "known (a fresh deal's bound; with replayed deals probing can also reveal the opponent's card and "
            "beat it). Final-hand chips above the best fixed strategy are earned by adaptation; per opponent, "
            "the exploitation ratio is the share of the opponent-known ceiling the final hand takes (shown only "
            f"where that ceiling is at least {MIN_RATIO_CEILING} chips and exceeds the game's value in the same "
            "seats by as much: an exploitable opponent). The "
            "greedy policy's exact chips (where shown) play the most likely action at every decision against "
            "every opponent, seat and deal enumerated: no sampling noise, so no interval; the sampled chips are "
            "the policy as it plays, at temperature 1. Which figures picked the policy: every trained run keeps "
            "as best/ the checkpoint with the best `train.select_on` figure. `sampled` picks on the selection set "
            "(`evaluation.selection_seed`), which no figure here comes from except the training curves' eval "
            "points; `exact_greedy` picks on the greedy policy's exact chips themselves, so those cells are the "
            f"selection score (marked {SELECTION_MARK}): exact, so no sampling luck was selected, but not a "
            "measurement apart from the selection. The sampled columns always come from the report set "
            "(`evaluation.seed`).\n")


def table1_title(settings: Mapping[str, RunSettings]) -> str:
    """Table 1's heading, honest about the setting: the paper's only when every run
    has a paper profile and differs from it in nothing compared."""
    if all(s.paper_profile is not None and not s.differences for s in settings.values()):
        return "Table 1 (the paper profiles' settings): in-domain, final episode"
    embedded = all(s.model.startswith("embedded") for s in settings.values())
    return f"Table 1 ({'embedded tiny model, ' if embedded else ''}not the paper's setting): in-domain, final episode"


def _missing_note(tables: RunTables) -> str:
    """Table 1's legend: ``—``, the selection mark, and a paper environment without a run."""
    present = set(tables.overview.env)
    absent = [f"{ENV_LABELS[env]}: no run in reproduce.runs"
              for env in ENV_LABELS if env not in present]
    lines = ["— : the method was not run on that environment (not in `reproduce.runs`)."]
    exact = sorted(tables.overview.run[tables.overview.select_on == "exact_greedy"])
    if exact:
        lines.append(f"{SELECTION_MARK} : the figure the run's best/ was selected on (`train.select_on: exact_greedy`, "
                     f"runs {', '.join(f'`{run}`' for run in exact)}): the same number as its `summary.json` "
                     "best_score, exact, not a measurement apart from the selection. The sampled columns come from "
                     "the report set, which no run selected on.")
    if absent:
        lines.append("Not in the table: " + "; ".join(absent) + ".")
    return "\n".join(lines) + "\n"


def kuhn_ceilings_markdown(tables: RunTables) -> str:
    """Under Table 1: every Kuhn run and suite next to its exact ceilings."""
    frame, table = kuhn_ceiling_table(tables.episodes)
    if frame.empty:
        return ""
    kuhn = tables.overview[tables.overview.env.isin(games_with("exact_values"))]
    stopped = sorted(kuhn.run[kuhn.early_stop.astype(bool)])
    text = ("### Kuhn Poker against the exact ceilings of each suite\n\n"
            "Chips per hand, population-weighted; the final hand with its 95% interval (report set); the ceilings "
            "are exact for the suite's opponents, K, deals and protocol (`mage kuhn analyze` prints them per "
            "seat). — : the evaluation holds no such ceiling (K above 4; under early stop, best fixed and play "
            "fixed then respond).\n")
    if stopped:
        text += ("\nEarly stop (`rollout.early_stop`) in " + ", ".join(f"`{run}`" for run in stopped) + ": a "
                 "meta-episode ends after a won hand, and the later hands' figures repeat that hand's chips, so "
                 "the final hand is the last hand played. Its ceilings are those of that protocol: the "
                 "Bayes-optimal stopping agent and the same agent knowing the opponent (a policy that wins any "
                 "hand early reports that hand's chips, so these are far above the all-hands-played ceilings). "
                 "Best fixed and play fixed then respond are not computed for a stopping agent (—).\n")
    return text + "\n" + table + opening_bets_markdown(tables.episodes)


def opening_bets_markdown(episodes: pd.DataFrame, runs: Mapping[str, str] | None = None) -> str:
    """How each Kuhn policy opens its first hand, before it knows the opponent."""
    table = opening_bets_table(episodes, runs)
    if not table:
        return ""
    return ("\n#### Does the policy probe? First-hand opening bets\n\n"
            "The policy's probability of betting its first decision of the first hand, as the player to act "
            "first, per card (averaged over the suite's opponents met in that seat; read from its scores, no "
            "sampling). Against the exploration pair (population `probe`) the Bayes-optimal agent bets every "
            "card in the hands before the last (a bet's answer tells the two opponents apart), while play "
            "fixed then respond never bets J or Q.\n\n" + table)


def gain_markdown(episodes: pd.DataFrame) -> str:
    """Final attempt minus first, paired on each meta-episode of the in-domain suite
    (``success_gain``): does a later attempt do better than the first of the same
    meta-episode? Every run with K > 1, by environment and method."""
    rows = final_episode(episodes, IN_DOMAIN)
    rows = rows[rows.success_gain.notna()].copy()
    if rows.empty:
        return ""
    rows["order"] = rows.env.map(env_sort_key)
    first = episodes[(episodes.suite == IN_DOMAIN) & (episodes.group == "all") & (episodes.episode == 1)]
    first_success = dict(zip(first.run, first.success))
    table = []
    for r in rows.sort_values(["order", "run"]).itertuples():
        verdict = "yes" if r.success_gain_low > 0 else "no" if r.success_gain_high < 0 else "not shown"
        # A success ceiling (the hidden state known: MineSweeper's boards); Kuhn's is in chips, above.
        known = r.ceiling_known if task(r.env).headline == "success" and pd.notna(r.ceiling_known) else None
        table.append([ENV_LABELS.get(r.env, r.env), r.method, fmt_number(first_success[r.run]), fmt_number(r.success),
                      fmt_interval(r.success_gain, r.success_gain_low, r.success_gain_high, signed=True), verdict,
                      fmt_number(known) if known is not None else "—"])
    return "\n".join([
        "### Does a later attempt do better than the first? In-domain success, paired\n",
        "The final episode's success minus the first's on each meta-episode (a 95% normal interval of the "
        "mean difference); \"yes\" only when the interval lies above 0, \"no\" when below. With "
        "`rollout.restart: same` the task is replayed, so a gain is the use of what an earlier attempt revealed; "
        "with `rollout.restart: fresh` (a new deal or game every episode) it is not, and where a game is scored "
        "in chips, read chips against the ceilings above. The ceiling, where a task has one, is the share of the "
        "suite's tasks that a player who knows the hidden state wins within the turn limit (MineSweeper: the board "
        "known, `board.fewest_reveals`): no attempt of any method wins more.\n",
        markdown_table(["env", "method", "success, first", "success, final", "final minus first", "final beats first",
                        "ceiling, hidden state known"], table),
    ])


def baseline_markdown(tables: RunTables, settings: Mapping[str, RunSettings], eval_root: Path) -> str:
    """Each trained run of a single-agent task against its starting model played under the
    same protocol (an evaluation-only run with the same ``RunSettings.protocol``: MAGE and
    LaMer against ``warm_start``, GiGPO and GRPO against ``react``), the final-episode success
    paired on the tasks both played (``evaluation.paired``)."""
    from mage_core.envs.registry import is_single_agent
    from mage_core.evaluation.paired import paired_difference

    overview = tables.overview.assign(order=tables.overview.env.map(env_sort_key)).sort_values(["order", "run"])
    frozen = [r for r in overview.itertuples() if not settings[r.run].trained]
    last_episode = {row.run: int(row.episode) for row in final_episode(tables.episodes, IN_DOMAIN).itertuples()}
    rows, alone = [], []
    for r in overview.itertuples():
        if not settings[r.run].trained or not is_single_agent(r.env):
            continue
        matches = [b for b in frozen if settings[b.run].protocol == settings[r.run].protocol]
        if not matches:
            alone.append(f"`{r.run}`")
            continue
        k = last_episode[r.run]  # the K it was evaluated over (3 for a single-episode method)
        run_trials = pd.read_parquet(eval_root / r.run / "trials.parquet")
        for b in matches:
            d = paired_difference(run_trials, pd.read_parquet(eval_root / b.run / "trials.parquet"), IN_DOMAIN, k,
                                  (r.run, b.run))
            rows.append([ENV_LABELS.get(r.env, r.env), r.method, f"{b.method} (`{b.run}`)", fmt_number(d.baseline_final),
                         fmt_number(d.run_final), fmt_interval(d.mean, d.low, d.high, signed=True), d.verdict])
    if not rows and not alone:
        return ""
    note = (f"\nNo evaluation-only run was played under the protocol of {', '.join(alone)}: add its starting model's "
            "run (the `warm_start` preset for a meta-RL method, `react` for a single-episode one) with the same "
            "evaluation settings to `reproduce.runs`.\n" if alone else "")
    return "\n".join([
        "### Does training beat its starting point? In-domain final-episode success, paired\n",
        "Each trained run against its starting model (the warm start where the task has one) played under the "
        "trained run's own protocol: the same report tasks in the same order, the same K, memory and restart "
        "(`warm_start` remembers every earlier attempt as MAGE and LaMer do; `react` plays K attempts without "
        "memory as GiGPO and GRPO are evaluated). The difference of final-episode successes on each task, with a "
        "95% normal interval of the mean paired difference; \"above\" or \"below\" only where it clears 0.\n",
        markdown_table(["env", "method", "starting model under the same protocol", "its success, final",
                        "method's success, final", "method minus starting model", "verdict"], rows)
        if rows else "",
        note,
    ])


def lineage_line(project_dir: Path) -> str:
    """Where the report comes from: the checkout's commit and the digest of the outputs
    dvc.lock records for the stages it was made from (every stage's but the report's own,
    written after it);
    ``mage lineage`` reads this line back (``stages.lineage.REPORT_LINE``)."""
    from mage_core.tracking.lineage import git_state, lock_digest

    digest = lock_digest(project_dir / "dvc.lock")
    git = git_state(project_dir)
    code = f"git commit {git.describe()}" if git.commit else "no git commit (not made in a git checkout)"
    lock = (f"the outputs dvc.lock records for the stages it reads, digest `{digest}`" if digest
            else "no dvc.lock (no DVC stage recorded its inputs)")
    return f"Made from {code} and {lock}; `mage lineage` checks both against a checkout.\n"


def ablations_markdown(out_dir: Path | None) -> str:
    """The ablation section ``mage ablations`` wrote (``paper-ablations/section.md`` beside the
    report), or a line saying where it would be."""
    from mage_core.stages.ablations import OUT_DIR

    section = out_dir / OUT_DIR.name / "section.md" if out_dir is not None else None
    if section is not None and section.is_file():
        return section.read_text(encoding="utf-8")
    return ("## Ablations (the paper's section 4.4)\n\nNot summarized: run `mage ablations` (the `ablations` "
            "stage of `mage reproduce`).\n")


def report_markdown(tables: RunTables, table_md: str, eval_root: Path, train_root: Path | None,
                    settings: Mapping[str, RunSettings], origin: str, out_dir: Path | None = None) -> str:
    """``report.md``: where it came from (``origin``: ``lineage_line``), every output,
    linked or embedded, and how to read them; under Table 1, what each run was and how
    it differs from the paper; then the ablation section of ``out_dir`` (``ablations_markdown``)."""
    runs = []
    for r in tables.overview.itertuples():
        trained = not pd.isna(r.iterations)
        runs.append([f"`{r.run}`", ENV_LABELS.get(r.env, r.env), r.method, str(r.episodes_per_meta_episode),
                     f"{r.iterations:.0f}" if trained else MISSING,
                     f"{r.best_iteration:.0f}" if trained else MISSING,
                     f"`{r.select_on}`" if trained else MISSING, f"`{eval_root / r.run}`",
                     f"`{train_root / r.run}`" if trained and train_root is not None else MISSING])
    oods = sorted(set(tables.episodes.suite) - {IN_DOMAIN})
    ood_rows = [[f"`{s}`", r.method, ENV_LABELS.get(r.env, r.env),
                 fmt_number(r.score, signed=task(r.env).scored) + f" {r.unit}", fmt_number(r.success),
                 fmt_number(r.draw), fmt_number(r.pass_at)]
                for s in oods for r in final_episode(tables.episodes, s).itertuples()]
    return "\n".join([
        "# MAGE report\n", origin, _how_to_read(),
        f"## {table1_title(settings)}\n", table_md,
        _missing_note(tables),
        kuhn_ceilings_markdown(tables),
        "Numbers: [table1.csv](table1.csv); this table alone: [table1.md](table1.md).\n",
        settings_markdown(settings, ENV_LABELS),
        "## Out-of-domain suites, final episode\n",
        markdown_table(["suite", "method", "env", "score", "success", "draw", "Pass@K"], ood_rows)
        if ood_rows else "No out-of-domain suite was evaluated.\n",
        "## Adaptation across episodes\n", "![adaptation by episode index](adaptation.png)\n",
        gain_markdown(tables.episodes),
        baseline_markdown(tables, settings, eval_root),
        "## Training curves\n", "![training curves](training_curves.png)\n",
        ablations_markdown(out_dir),
        "## Per opponent and seat\n",
        "Every suite, opponent and seat at every episode index: [per_opponent.md](per_opponent.md).\n",
        "## Runs\n",
        markdown_table(["run", "env", "method", "K", "iterations", "best iteration", "selected on (train.select_on)",
                        "evaluation", "training"], runs),
        "Flat figures for `dvc metrics`: [metrics.json](metrics.json).\n",
        "## Cost\n", COST_NOTE,
    ])


def run(params: str, eval_root: str = "artifacts/eval", train_root: str | None = "artifacts/train",
        out: str = "reports", overrides: Sequence[str] = ()) -> int:
    """``mage report``: the report of ``reproduce.runs``; logged to MLflow when tracking is on."""
    from rich.console import Console

    import yaml

    from mage_core.config import apply_overrides, load_config
    from mage_core.stages.run_settings import run_settings
    from mage_core.tracking.runs import check_tracking, open_mlflow_run

    cfg = load_config(params, overrides)  # a bad file is reported here, in full
    if cfg.tracking.mlflow:
        check_tracking(Path.cwd())
    runs = {name: (r.env, r.method) for name, r in cfg.reproduce.runs.items()}
    data = apply_overrides(yaml.safe_load(Path(params).read_text(encoding="utf-8")) or {}, overrides)
    settings = run_settings(data, params)
    out_dir = Path(out)
    metrics = report(runs, Path(eval_root), Path(train_root) if train_root else None, out_dir, settings, Path.cwd())
    if cfg.tracking.mlflow:
        with open_mlflow_run("report", cfg.tracking.experiment, None, Path.cwd()) as tracker:
            tracker.log_params({"report.runs": ", ".join(runs)})
            tracker.log_metrics(0, metrics)
            for name in FILES:
                tracker.log_artifact(out_dir / name, "reports")
    Console().print(f"report written to {out_dir / 'report.md'}")
    return 0
