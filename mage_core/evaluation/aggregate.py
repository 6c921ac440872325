"""Tables of many runs' outputs, as the report and the ablation summary print them
(docs/method.md sections 8-9).

From the tables ``mage_core.evaluation.run_tables.load_runs`` reads (``RunTables``):
Table 1 (methods x environments), the per-opponent table, the DVC metrics, an
ablation's table, the Kuhn runs against the exact ceilings of each suite and their
first-hand opening bets; and the formatting they share (intervals, numbers,
markdown tables, the environments' paper order and titles).

Every cell is exactly the number in ``metrics.json``, never recomputed. pandas is
imported at module top because only stages import this module, and ``mage --help``
imports no stage.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd

from mage_core.envs.registry import GAMES, games_with, task
from mage_core.evaluation.run_tables import SUMMARY_KEYS, RunTables

#: Paper order of the environments (Table 1); others follow alphabetically.
ENV_ORDER = tuple(sorted(GAMES, key=lambda name: task(name).report_order))
ENV_LABELS = {name: task(name).title for name in ENV_ORDER}
IN_DOMAIN = "in_domain"
MISSING = "—"

#: ``train.select_on`` value -> the Table 1 column that is that selection score (read in
#: ``table1``): with ``exact_greedy`` the greedy policy's exact final-hand chips ARE the
#: figure that picked best/ (no set to hold out: the value is exact); ``sampled`` picks
#: on the selection set (``evaluation.selection_seed``), which no report figure comes from.
SELECTED_COLUMN = {"exact_greedy": "chips_exact"}
#: The marker of a Table 1 cell that is its run's selection score.
SELECTION_MARK = "‡"


def env_sort_key(env: str) -> tuple[int, str]:
    return (ENV_ORDER.index(env) if env in ENV_ORDER else len(ENV_ORDER), env)


def _one_run_per_cell(episodes: pd.DataFrame) -> None:
    """A table cell is one (env, method): two runs there (say two seeds) would be
    silently conflated, so they are an error the caller must resolve."""
    runs = episodes.drop_duplicates("run")
    clashes = runs[runs.duplicated(["env", "method"], keep=False)]
    if not clashes.empty:
        pairs = "; ".join(f"{env}/{method}: {', '.join(g.run)}"
                          for (env, method), g in clashes.groupby(["env", "method"]))
        raise ValueError(f"more than one run per (env, method): {pairs}")


def final_episode(episodes: pd.DataFrame, suite: str, group: str = "all") -> pd.DataFrame:
    """Each run's row of its last episode index (K) in ``suite`` for ``group``."""
    rows = episodes[(episodes.suite == suite) & (episodes.group == group)]
    return rows.loc[rows.groupby("run", sort=False)["episode"].idxmax()].reset_index(drop=True)


def fmt_interval(value: float, low: float, high: float, signed: bool = False) -> str:
    """``0.672 [0.601, 0.735]``; a missing value is ``—``."""
    if value is None or math.isnan(value):
        return MISSING
    f = "{:+.3f}" if signed else "{:.3f}"
    if math.isnan(low) or math.isnan(high):
        return f.format(value)
    return f"{f.format(value)} [{f.format(low)}, {f.format(high)}]"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured markdown table (no ``tabulate`` dependency)."""
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), "|" + "|".join("---" for _ in header) + "|", *map(line, rows)]) + "\n"


def _bounds(numbers: pd.DataFrame, method: str, column: str) -> tuple[float, float, float]:
    """Value, low, high read cell by cell (a whole row of mixed dtypes would turn NaN into NA)."""
    value, low, high = (float(numbers.at[method, column + suffix]) for suffix in ("", "_low", "_high"))
    return value, low, high


def table1(episodes: pd.DataFrame, suite: str = IN_DOMAIN,
           select_on: Mapping[str, str | None] | None = None) -> tuple[pd.DataFrame, str]:
    """The paper's Table 1 (docs/method.md section 9): methods x environments.

    Per environment: final-episode success and Pass@K with 95% intervals; for
    Kuhn also final-hand chips first, since a fixed strategy already maximizes
    the win rate (docs/method.md section 8), then, where the evaluation computed it,
    the greedy policy's exact final-hand chips (no sampling noise, no interval). Returns the numbers (index method,
    columns ``<env>/<name>``, NaN where a method was not run) and the markdown,
    where missing cells read ``—``. ``select_on`` maps a run to its ``train.select_on``
    (None: never trained): a cell that is the figure its run's best/ was selected on
    (``SELECTED_COLUMN``) carries ``SELECTION_MARK``."""
    _one_run_per_cell(episodes)
    final = final_episode(episodes, suite).set_index(["method", "env"])
    methods = list(dict.fromkeys(episodes.method))
    envs = sorted(dict.fromkeys(episodes.env), key=env_sort_key)
    numbers = pd.DataFrame(index=pd.Index(methods, name="method"))

    def value(method: str, env: str, column: str) -> float:
        return final.at[(method, env), column] if (method, env) in final.index else math.nan

    for env in envs:
        spec = task(env)
        names = {"score": spec.headline, "success": "success", "pass_at": "pass_at_k"}
        measures = ("score", "success", "pass_at") if spec.scored else ("success", "pass_at")
        for measure in measures:
            for suffix in ("", "_low", "_high"):
                numbers[f"{env}/{names[measure]}{suffix}"] = [value(m, env, measure + suffix) for m in methods]
        if spec.exact_values:
            numbers[f"{env}/{spec.headline}_exact"] = [value(m, env, "score_exact") for m in methods]
        numbers[f"{env}/selected_on"] = [
            SELECTED_COLUMN.get((select_on or {}).get(final.at[(m, env), "run"]) or "", "")
            if (m, env) in final.index else "" for m in methods]
        numbers[f"{env}/k"] = pd.array([final.at[(m, env), "episode"] if (m, env) in final.index else None
                                        for m in methods], dtype="Int64")
    # The exact greedy column appears once some run of the task has it (deterministic opponents).
    exact = {env: bool(task(env).exact_values) and bool(numbers[f"{env}/{task(env).headline}_exact"].notna().any())
             for env in envs}
    header = ["method"]
    for env in envs:
        spec, label, ks = task(env), ENV_LABELS.get(env, env), set(numbers[f"{env}/k"].dropna())
        if spec.scored:
            header.append(f"{label} {spec.headline}, final {spec.episode_noun}")
            if exact[env]:
                header.append(f"{label} greedy policy's exact {spec.headline}, final {spec.episode_noun}")
        header += [f"{label} success, final episode", f"{label} Pass@{int(ks.pop()) if len(ks) == 1 else 'K'}"]
    rows = []
    for method in methods:
        cells = [method]
        for env in envs:
            unit = task(env).headline
            if task(env).scored:
                cells.append(fmt_interval(*_bounds(numbers, method, f"{env}/{unit}"), signed=True))
                if exact[env]:
                    greedy = float(numbers.at[method, f"{env}/{unit}_exact"])
                    selected = numbers.at[method, f"{env}/selected_on"] == f"{unit}_exact"
                    mark = f" {SELECTION_MARK}" if selected else ""
                    cells.append(MISSING if math.isnan(greedy) else f"{greedy:+.3f}{mark}")
            cells += [fmt_interval(*_bounds(numbers, method, f"{env}/success")),
                      fmt_interval(*_bounds(numbers, method, f"{env}/pass_at_k"))]
        rows.append(cells)
    return numbers, markdown_table(header, rows)


def per_opponent(episodes: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, suite, group), the population (``all``) first: n, mean
    score, success, draw and Pass@k for every k, and for Kuhn the final hand's exact
    ceiling with the opponent known (``ceiling_known``: its best response, weighted
    over the suite in the ``all`` row; under early stop, a stopping agent's), the
    exploitation ratio (final-hand chips over it; NaN where ``mage evaluate`` wrote
    none: a ceiling near 0, ``stats.MIN_RATIO_CEILING``) and, where computed, the
    greedy policy's exact chips per hand (``score_exact_ep{k}``). Figures are read
    as written, never recomputed."""
    order = {run: i for i, run in enumerate(dict.fromkeys(episodes.run))}
    keys = ["env", "method", "run", "suite", "group"]
    rows = []
    for key, g in episodes.groupby(keys, sort=False):
        first = g.iloc[0]
        row: dict[str, Any] = {**dict(zip(keys, key)), "opponent": first.opponent, "seat": first.seat,
                               "unit": first.unit, "num_meta_episodes": first.num_meta_episodes,
                               "ceiling_known": first.ceiling_known, "exploitation_ratio": first.exploitation_ratio}
        for r in g.sort_values("episode").itertuples():
            row.update({f"score_ep{r.episode}": r.score, f"success_ep{r.episode}": r.success,
                        f"draw_ep{r.episode}": r.draw, f"pass_at_{r.episode}": r.pass_at})
            if not pd.isna(r.score_exact):
                row[f"score_exact_ep{r.episode}"] = r.score_exact
        rows.append(row)
    rows.sort(key=lambda r: (env_sort_key(r["env"]), order[r["run"]], r["suite"] != IN_DOMAIN, r["suite"],
                             r["group"] != "all", r["group"]))
    return pd.DataFrame(rows)


def flat_metrics(tables: RunTables) -> dict[str, float]:
    """DVC metrics: ``report/<env>/<method>/<suite>_<name>`` for the population's
    final episode of every suite, and ``report/<env>/<method>/train_<name>``."""
    _one_run_per_cell(tables.episodes)
    out: dict[str, float] = {}
    for suite in dict.fromkeys(tables.episodes.suite):
        for r in final_episode(tables.episodes, suite).itertuples():
            prefix, k = f"report/{r.env}/{r.method}/{suite}_", r.episode
            for column, name in (("success", f"success_ep{k}"), ("draw", f"draw_ep{k}"),
                                 ("score", f"{r.unit}_ep{k}"), ("pass_at", f"pass_at_{k}")):
                for suffix in ("", "_low", "_high"):
                    value = getattr(r, column + suffix)
                    if not math.isnan(value):
                        out[prefix + name + suffix] = float(value)
            if not pd.isna(r.score_exact):
                out[prefix + f"chips_exact_ep{k}"] = float(r.score_exact)
    for r in tables.overview.itertuples():
        for name in SUMMARY_KEYS:
            value = getattr(r, name)
            if value is not None and not pd.isna(value):
                out[f"report/{r.env}/{r.method}/train_{name}"] = float(value)
    return dict(sorted(out.items()))


def headline_measure(env: str) -> str:
    """The figure an ablation is read by: final-hand chips for Kuhn (docs/method.md
    section 8: a fixed strategy already maximizes the win rate), success elsewhere."""
    return "score" if task(env).scored else "success"


ABLATION_COLUMNS = ("point", "env", "method", "k", "headline", "final", "final_low", "final_high", "first",
                    "first_low", "first_high", "success", "success_low", "success_high", "pass_at", "pass_at_low",
                    "pass_at_high")


def ablation_table(episodes: pd.DataFrame, values: Mapping[str, Mapping[str, Any]],
                   suite: str = IN_DOMAIN) -> tuple[pd.DataFrame, str]:
    """One row per grid point (``episodes.run`` is the point's name): the
    headline measure at the first and the final episode, final-episode success
    and Pass@K, each with its 95% interval; ``values`` maps a point to the
    values of the keys the grid varies, which lead the markdown table."""
    keys = list(dict.fromkeys(key for point_values in values.values() for key in point_values))
    rows, cells = [], []
    for point in values:
        mine = episodes[(episodes.run == point) & (episodes.suite == suite) & (episodes.group == "all")]
        if mine.empty:
            raise ValueError(f"point {point}: no {suite} population rows in its evaluation")
        env, method = mine.env.iloc[0], mine.method.iloc[0]
        measure = headline_measure(env)
        first, final = mine.loc[mine.episode.idxmin()], mine.loc[mine.episode.idxmax()]
        row = {"point": point, "env": env, "method": method, "k": int(final.episode),
               "headline": "chips" if measure == "score" else "success"}
        for name, source, column in (("final", final, measure), ("first", first, measure),
                                     ("success", final, "success"), ("pass_at", final, "pass_at")):
            for suffix in ("", "_low", "_high"):
                row[name + suffix] = float(source[column + suffix])
        rows.append(row)
        signed = measure == "score"
        cells.append([point, *(str(values[point].get(key, MISSING)) for key in keys), ENV_LABELS.get(env, env),
                      method, row["headline"],
                      fmt_interval(row["first"], row["first_low"], row["first_high"], signed),
                      fmt_interval(row["final"], row["final_low"], row["final_high"], signed),
                      fmt_interval(row["success"], row["success_low"], row["success_high"]),
                      fmt_interval(row["pass_at"], row["pass_at_low"], row["pass_at_high"])])
    header = ["point", *keys, "env", "method", "measure", "first episode", "final episode", "success, final",
              "Pass@K"]
    return pd.DataFrame(rows, columns=list(ABLATION_COLUMNS)), markdown_table(header, cells)


#: Kuhn's exact ceilings of a suite (``envs.kuhn_poker.ceilings.CEILINGS``), in increasing order, as printed.
CEILING_LABELS = {"best_fixed": "best fixed", "passive": "play fixed, then respond",
                  "adaptive": "Bayes-optimal", "known": "opponent known"}
CEILING_COLUMNS = ("run", "method", "suite", "k", "first", "final", "final_low", "final_high",
                   *(f"ceiling_{name}" for name in CEILING_LABELS), "above_fixed", "above_fixed_low",
                   "above_fixed_high")


def kuhn_ceiling_table(episodes: pd.DataFrame, runs: Mapping[str, str] | None = None
                       ) -> tuple[pd.DataFrame, str]:
    """Every Kuhn run's first and final hand in every suite next to the suite's
    exact ceilings (``mage_core.envs.kuhn_poker.ceilings``) and the final hand's
    chips above the best fixed strategy (what adaptation earned), with its 95%
    interval. ``runs`` relabels runs (run -> label, e.g. a sweep's point values)
    and orders them; default: every Kuhn run, in order. In-domain suite first."""
    kuhn = episodes[episodes.env.isin(games_with("exact_values")) & (episodes.group == "all")]
    order = list(runs) if runs is not None else list(dict.fromkeys(kuhn.run))
    rows, cells = [], []
    groups = {key: g for key, g in kuhn.groupby(["run", "suite"], sort=False)}
    keys = sorted((key for key in groups if key[0] in order),
                  key=lambda key: (key[1] != IN_DOMAIN, key[1], order.index(key[0])))
    for run, suite in keys:
        g = groups[run, suite]
        first, final = g.loc[g.episode.idxmin()], g.loc[g.episode.idxmax()]
        row: dict[str, Any] = {"run": run, "method": final.method, "suite": suite, "k": int(final.episode),
                               "first": float(first.score), "final": float(final.score),
                               "final_low": float(final.score_low), "final_high": float(final.score_high)}
        row.update({f"ceiling_{name}": float(final[f"ceiling_{name}"]) for name in CEILING_LABELS})
        fixed = row["ceiling_best_fixed"]
        row.update({f"above_fixed{s}": row[f"final{s}"] - fixed for s in ("", "_low", "_high")})
        rows.append(row)
        label = runs[run] if runs is not None else run
        cells.append([label, row["method"], suite, str(row["k"]), fmt_number(row["first"], signed=True),
                      fmt_interval(row["final"], row["final_low"], row["final_high"], signed=True),
                      *(fmt_number(row[f"ceiling_{name}"], signed=True) for name in CEILING_LABELS),
                      fmt_interval(row["above_fixed"], row["above_fixed_low"], row["above_fixed_high"], signed=True)])
    header = ["run", "method", "suite", "K", "first hand", "final hand", *CEILING_LABELS.values(),
              "final - best fixed"]
    return pd.DataFrame(rows, columns=list(CEILING_COLUMNS)), markdown_table(header, cells) if cells else ""


def fmt_number(value: float | None, signed: bool = False) -> str:
    """``+0.238`` (``signed``) or ``0.238``, to three places; a missing value is ``—``."""
    return MISSING if value is None or math.isnan(value) else (f"{value:+.3f}" if signed else f"{value:.3f}")


def opening_bets_table(episodes: pd.DataFrame, runs: Mapping[str, str] | None = None) -> str:
    """Kuhn runs' first-hand opening bet probability per card where the agent acts
    first (``envs.kuhn_poker.probes.opening_bets``), per suite; empty when none was measured."""
    columns = [f"opening_bet_{card}_ep1" for card in "JQK"]
    kuhn = episodes[episodes.env.isin(games_with("strategy_probes")) & (episodes.group == "all")
                    & (episodes.episode == 1)]
    kuhn = kuhn.dropna(subset=columns)
    order = list(runs) if runs is not None else list(dict.fromkeys(kuhn.run))
    kuhn = kuhn[kuhn.run.isin(order)]
    if kuhn.empty:
        return ""
    rows = sorted(kuhn.itertuples(), key=lambda r: (r.suite != IN_DOMAIN, r.suite, order.index(r.run)))
    cells = [[runs[r.run] if runs is not None else r.run, r.method, r.suite,
              *(f"{getattr(r, c):.3f}" for c in columns)] for r in rows]
    return markdown_table(["run", "method", "suite", "P(bet) with J", "P(bet) with Q", "P(bet) with K"], cells)
