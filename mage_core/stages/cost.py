"""What each section of the reproduction cost: ``reports/cost.csv`` and ``reports/cost.md``.

The flow (``flows/reproduce.py``) writes them after its stages, from the seconds each executed
stage took. They are not DVC outputs: a run time is not a result, and no hashed output may
change from one run to the next. A stage DVC found up to date keeps the seconds of the last
time it ran, so the table always prices the outputs the workspace holds, and a second flow
that runs nothing leaves it as it was.

A stage's section: ``code``, ``data@`` and ``sft@`` are the set-up; ``train@`` and
``evaluate@`` of a ``reproduce.runs`` run are its environment's Table 1 rows; those of an
ablation point (``reproduce.ablations``) its grid's; ``ablations`` and ``report`` the
aggregation. Anything else is named by its own stage kind.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
import platform
from pathlib import Path
from typing import Any, Mapping, Sequence

from mage_core.io.atomic import write_text_atomic

COST_COLUMNS = ("stage", "section", "seconds", "measured")
SETUP, AGGREGATION = "set-up (code manifests, task data, warm starts)", "aggregation and report"


def sections(params: Path) -> dict[str, str]:
    """Run name -> its section, for every run of ``params``' reproduction and ablation grids."""
    import yaml

    from mage_core.config import load_config
    from mage_core.config.ablations import ablation_runs

    cfg = load_config(params)
    out = {name: f"Table 1: {run.env}" for name, run in cfg.reproduce.runs.items()}
    for name, point in ablation_runs(yaml.safe_load(params.read_text(encoding="utf-8")), str(params)).items():
        if point.reuses is None:  # a point that is another run costs nothing of its own
            out[name] = f"ablation: {point.grid}"
    return out


def section_of(stage: str, runs: Mapping[str, str]) -> str:
    """The section ``stage`` belongs to, ``runs`` from ``sections``."""
    kind, _, run = stage.partition("@")
    if kind in ("code", "data", "sft"):
        return SETUP
    if kind in ("ablations", "report"):
        return AGGREGATION
    if kind in ("train", "evaluate") and run in runs:
        return runs[run]
    return kind


def read_costs(path: Path) -> dict[str, dict[str, Any]]:
    """The rows of an existing ``cost.csv`` by stage; {} when there is none or it cannot be read
    (it is rebuilt from what runs next, never a reason to stop a flow)."""
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error):
        return {}
    out = {}
    for row in rows:
        try:
            out[row["stage"]] = {"stage": row["stage"], "seconds": float(row["seconds"]),
                                 "measured": row["measured"]}
        except (KeyError, TypeError, ValueError):
            continue
    return out


def update_costs(root: Path, graph: Sequence[str], results: Sequence[Mapping[str, Any]], flow: str,
                 wall_seconds: float, runs: Mapping[str, str], when: dt.datetime | None = None) -> Path:
    """Merge ``results`` (``run_graph``'s) into ``root/reports/cost.csv`` and rewrite
    ``cost.md``: an executed stage takes its new seconds, one skipped keeps its old ones, a stage
    no longer in ``graph`` (the whole stage graph) is dropped; a flow that ran nothing changes
    nothing. Returns the path of cost.md."""
    reports = root / "reports"
    ran = [r for r in results if not r["skipped"]]
    if not ran and (reports / "cost.md").is_file():
        return reports / "cost.md"  # nothing ran: the table still prices what the workspace holds
    reports.mkdir(parents=True, exist_ok=True)
    when = when or dt.datetime.now(dt.timezone.utc)
    stamp = when.strftime("%Y-%m-%d %H:%M UTC")
    rows = {stage: row for stage, row in read_costs(reports / "cost.csv").items() if stage in graph}
    for result in ran:
        rows[result["stage"]] = {"stage": result["stage"], "seconds": float(result["seconds"]), "measured": stamp}
    ordered = [{**rows[s], "section": section_of(s, runs)} for s in graph if s in rows]
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(COST_COLUMNS)
    writer.writerows([r["stage"], r["section"], f"{r['seconds']:.1f}", r["measured"]] for r in ordered)
    write_text_atomic(reports / "cost.csv", table.getvalue())
    text = cost_markdown(ordered, graph, flow, wall_seconds, len(ran), len(results) - len(ran), stamp)
    write_text_atomic(reports / "cost.md", text)
    return reports / "cost.md"


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs{', ' + model if model else ''}, {platform.system()} {platform.machine()}"


def cost_markdown(rows: Sequence[Mapping[str, Any]], graph: Sequence[str], flow: str, wall_seconds: float,
                  executed: int, skipped: int, stamp: str) -> str:
    """cost.md: stage-minutes per section, largest first, with the last flow's wall time."""
    by: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = by.setdefault(row["section"], {"stages": 0, "seconds": 0.0, "measured": set()})
        entry["stages"] += 1
        entry["seconds"] += row["seconds"]
        entry["measured"].add(row["measured"][:10])
    total = sum(e["seconds"] for e in by.values())
    unpriced = len(graph) - len(rows)
    lines = ["# What the reproduction cost", "",
             "Stage-minutes per section: the sum of the run times of its stages, each the last time it ran "
             "(DVC skips a stage that is up to date, which then keeps its old figure). Stages run side by side "
             "(`reproduce.max_concurrent`), so the wall time is less than the sum. Written by the flow, not by "
             "DVC: a run time is not a result.", "",
             f"Last flow: `{flow}`, ended {stamp}, {wall_seconds / 60:.1f} min wall, {executed} stage(s) run, "
             f"{skipped} up to date. Machine: {machine()}.", "",
             "| section | stages | stage-min | share | measured |", "|---|---:|---:|---:|---|"]
    for section, e in sorted(by.items(), key=lambda kv: -kv[1]["seconds"]):
        share = f"{e['seconds'] / total:.0%}" if total else "—"
        lines.append(f"| {section} | {e['stages']} | {e['seconds'] / 60:.1f} | {share} | "
                     f"{', '.join(sorted(e['measured']))} |")
    lines.append(f"| **all** | {len(rows)} | {total / 60:.1f} | 100% | |")
    if unpriced:
        lines += ["", f"{unpriced} stage(s) of the graph have no figure yet (never run by a flow since cost.csv "
                      "existed)."]
    return "\n".join(lines) + "\n"
