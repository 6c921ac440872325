"""The report's two figures, drawn from the run tables (``evaluation.run_tables.RunTables``):

- ``adaptation_png``: the in-domain population's success (scored games: the
  headline, e.g. Kuhn chips per hand) by episode index, a line per method with
  its 95% intervals, a panel per environment;
- ``training_curves_png``: per environment, the train and the training-time eval
  headline per iteration (top) and the policy entropy (bottom).

On Kuhn panels both draw the in-domain suite's exact ceilings
(``in_domain_ceilings``: Bayes-optimal final hand, best fixed strategy). Figures
are drawn on ``matplotlib.figure.Figure`` with the Agg canvas rather than through
pyplot (no global backend switch, no figure registry to leak) and hold no
wall-clock time: the same tables give the same PNG bytes. ``new_figure`` and
``png_bytes`` are shared with the ablation summary's bar chart (``stages.sweep``).
"""

from __future__ import annotations

import io
import math
from typing import Any, Mapping

import pandas as pd

from mage_core.envs.registry import games_with, task
from mage_core.evaluation.aggregate import ENV_LABELS, IN_DOMAIN, env_sort_key, final_episode
from mage_core.evaluation.run_tables import RunTables

#: Runs -> (Bayes-optimal final hand, best fixed strategy) of their in-domain suite.
Ceilings = Mapping[str, tuple[float, float]]


def in_domain_ceilings(episodes: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """The Kuhn runs' in-domain (Bayes-optimal, best fixed) ceilings, as written by
    ``mage evaluate`` for each run's own population, K and deals
    (``mage_core.envs.kuhn_poker.ceilings``), keyed by the runs that share them
    (``"all runs"`` when they all do). Runs evaluated without ceilings are left out."""
    rows = final_episode(episodes[episodes.env.isin(games_with("exact_values"))], IN_DOMAIN)
    rows = rows.dropna(subset=["ceiling_adaptive"])  # best fixed: NaN under early stop (not computed)
    by_value: dict[tuple[float, float], list[str]] = {}
    for r in rows.itertuples():
        by_value.setdefault((r.ceiling_adaptive, r.ceiling_best_fixed), []).append(r.run)
    if len(by_value) == 1:
        return {"all runs": next(iter(by_value))}
    return {", ".join(runs): values for values, runs in by_value.items()}


def new_figure(num_rows: int, num_panels: int) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.6 * max(num_panels, 1), 4.2 * num_rows), layout="constrained")
    axes = fig.subplots(num_rows, max(num_panels, 1), squeeze=False)
    return fig, axes


def _method_colors(tables: RunTables) -> dict[str, str]:
    """One colour per method across every panel, so a method reads the same everywhere."""
    return {method: f"C{i % 10}" for i, method in enumerate(dict.fromkeys(tables.overview.method))}


def _legend_below(ax: Any) -> None:
    """Legends under the panel: inside, they hide the curves they describe."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize="small", frameon=False)


def png_bytes(fig: Any) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # the Agg canvas: no display, no pyplot state
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def no_runs_png() -> bytes:
    """A figure that says so, for a reproduction without Table 1 runs (``report.NO_RUNS``)."""
    fig, axes = new_figure(1, 1)
    ax = axes[0][0]
    ax.text(0.5, 0.5, "no Table 1 run in this reproduction\n(reproduce.runs is empty):\nsee the ablation section",
            ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return png_bytes(fig)


def _draw_ceilings(ax: Any, ceilings: Ceilings) -> None:
    for i, (runs, (best, fixed)) in enumerate(ceilings.items()):
        which = "" if runs == "all runs" else f" ({runs})"
        ax.axhline(best, color="black", linestyle=("--", "-.", (0, (5, 5)))[i % 3], linewidth=1.2,
                   label=f"Bayes-optimal final hand {best:+.3f}{which}")
        if not math.isnan(fixed):
            ax.axhline(fixed, color="grey", linestyle=(":", (0, (1, 3)), (0, (3, 1, 1, 1)))[i % 3], linewidth=1.2,
                       label=f"best fixed strategy {fixed:+.3f}{which}")


def adaptation_png(tables: RunTables, ceilings: Ceilings) -> bytes:
    """Population success (Kuhn: chips per hand) of the in-domain suite by
    episode index, one line per method, one panel per environment."""
    rows = tables.episodes[(tables.episodes.suite == IN_DOMAIN) & (tables.episodes.group == "all")]
    envs = sorted(dict.fromkeys(rows.env), key=env_sort_key)
    colors = _method_colors(tables)
    fig, axes = new_figure(1, len(envs))
    for ax, env in zip(axes[0], envs):
        spec = task(env)
        column = "score" if spec.scored else "success"
        env_rows = rows[rows.env == env]
        runs = list(dict.fromkeys(env_rows.run))
        for i, run in enumerate(runs):
            r = env_rows[env_rows.run == run].sort_values("episode")
            offset = 0.06 * (i - (len(runs) - 1) / 2)  # side by side, so error bars do not hide each other
            errors = [(r[column] - r[f"{column}_low"]).clip(lower=0), (r[f"{column}_high"] - r[column]).clip(lower=0)]
            ax.errorbar(r.episode + offset, r[column], yerr=errors, marker="o", capsize=4, linewidth=1.8,
                        color=colors[r.method.iloc[0]], label=r.method.iloc[0])  # one run per method (table1)
        if spec.exact_values:
            _draw_ceilings(ax, ceilings)
        else:
            ax.set_ylim(-0.02, 1.02)
        ax.set_xticks(sorted(set(env_rows.episode)))
        ax.set_xlabel("episode index k within the meta-episode")
        ax.set_ylabel(f"{spec.headline} per {spec.episode_noun} (mean, 95% CI)" if spec.scored
                      else "success rate (95% CI)")
        ax.set_title(f"{ENV_LABELS.get(env, env)}: in-domain, by episode")
        ax.grid(alpha=0.3)
        _legend_below(ax)
    if not envs:
        axes[0][0].text(0.5, 0.5, "no in-domain evaluation among the runs", ha="center", va="center")
        axes[0][0].set_axis_off()
    return png_bytes(fig)


def training_curves_png(tables: RunTables, ceilings: Ceilings) -> bytes:
    """Top: train headline per iteration (faint raw, solid rolling mean) and the
    training-time eval headline (markers: the selection set, ``evaluation.selection_seed``,
    the figures best/ was picked on; never the report set); bottom: policy entropy, whose early
    collapse is the failure mode to look for (docs/learning.md, fresh-deal Kuhn)."""
    from matplotlib.ticker import MaxNLocator

    curves = tables.curves
    envs = sorted(dict.fromkeys(curves.env), key=env_sort_key)
    colors = _method_colors(tables)
    fig, axes = new_figure(2, len(envs))
    for col, env in enumerate(envs):
        top, bottom = axes[0][col], axes[1][col]
        spec = task(env)
        env_curves = curves[curves.env == env]
        for _, c in env_curves.groupby("run", sort=False):
            method = c.method.iloc[0]
            color = colors[method]
            window = max(1, len(c) // 20)
            if window > 1:  # raw values faint, their rolling mean solid
                top.plot(c.step, c.train_headline, color=color, alpha=0.25, linewidth=0.8)
            top.plot(c.step, c.train_headline.rolling(window, min_periods=1).mean(), color=color, linewidth=1.8,
                     label=f"{method}: train" + (f" (rolling mean of {window})" if window > 1 else ""))
            evals = c.dropna(subset=["eval_headline"])
            top.plot(evals.step, evals.eval_headline, color=color, marker="o", linestyle="--", linewidth=1,
                     label=f"{method}: eval on the selection set")
            bottom.plot(c.step, c.entropy, color=color, linewidth=1.5, label=method)
        if spec.exact_values:
            _draw_ceilings(top, ceilings)
        label, noun = ENV_LABELS.get(env, env), spec.episode_noun
        top.set_title(f"{label}: final-episode {spec.headline} during training")
        top.set_ylabel(f"{spec.headline} per {noun}, final {noun}" if spec.scored else "success rate, final episode")
        bottom.set_title(f"{label}: policy entropy")
        bottom.set_ylabel("entropy (nats)")
        for ax in (top, bottom):
            ax.set_xlabel("iteration")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
            _legend_below(ax)
    if not envs:
        for ax in axes[:, 0]:
            ax.text(0.5, 0.5, "no training logs among the runs", ha="center", va="center")
            ax.set_axis_off()
    return png_bytes(fig)
