"""reports/cost.{csv,md}: the flow's stage seconds, merged run over run, summed per section."""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

import pytest

from mage_core.stages.cost import AGGREGATION, SETUP, section_of, update_costs

pytestmark = pytest.mark.unit

RUNS = {"kuhn-mage": "Table 1: kuhn_poker", "webshop-mage": "Table 1: webshop", "grid-a": "ablation: grid"}
GRAPH = ["code", "sft@webshop", "train@kuhn-mage", "evaluate@kuhn-mage", "train@webshop-mage",
         "evaluate@webshop-mage", "train@grid-a", "evaluate@grid-a", "ablations", "report"]


def ran(stage: str, seconds: float) -> dict:
    return {"stage": stage, "skipped": False, "seconds": seconds}


def skipped(stage: str) -> dict:
    return {"stage": stage, "skipped": True, "seconds": 0.0}


def rows(root: Path) -> dict[str, tuple[str, float, str]]:
    with (root / "reports" / "cost.csv").open(newline="") as handle:
        return {r["stage"]: (r["section"], float(r["seconds"]), r["measured"]) for r in csv.DictReader(handle)}


def test_sections_follow_the_stage_kind_and_the_run() -> None:
    assert section_of("code", RUNS) == section_of("sft@webshop", RUNS) == section_of("data@webshop", RUNS) == SETUP
    assert section_of("ablations", RUNS) == section_of("report", RUNS) == AGGREGATION
    assert section_of("evaluate@grid-a", RUNS) == "ablation: grid"
    assert section_of("train@kuhn-mage", RUNS) == "Table 1: kuhn_poker"
    assert section_of("tournament", RUNS) == "tournament"


def test_a_skipped_stage_keeps_its_last_figure_and_a_removed_one_is_dropped(tmp_path: Path) -> None:
    first = dt.datetime(2026, 11, 1, 9, 0, tzinfo=dt.timezone.utc)
    seconds = dict(zip(GRAPH, (6, 120, 300, 42, 170, 48, 100, 40, 12, 6)))
    update_costs(tmp_path, GRAPH, [ran(s, seconds[s]) for s in GRAPH], "reproduce", 540.0, RUNS, first)
    assert rows(tmp_path)["train@kuhn-mage"] == ("Table 1: kuhn_poker", 300.0, "2026-11-01 09:00 UTC")
    md = (tmp_path / "reports" / "cost.md").read_text()
    # Table 1 Kuhn: 300 + 42 s = 5.7 min; ablation grid: 140 s = 2.3 min; all 844 s = 14.1 min
    assert "| Table 1: kuhn_poker | 2 | 5.7 | 41% |" in md
    assert "| ablation: grid | 2 | 2.3 | 17% |" in md
    assert "| **all** | 10 | 14.1 | 100% | |" in md
    assert "9.0 min wall, 10 stage(s) run, 0 up to date" in md

    # the grid leaves the graph; Kuhn's evaluation reruns, its training is up to date
    later = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.timezone.utc)
    graph = [s for s in GRAPH if "grid-a" not in s]
    results = [ran("evaluate@kuhn-mage", 50.0)] + [skipped(s) for s in graph if s != "evaluate@kuhn-mage"]
    update_costs(tmp_path, graph, results, "evaluate", 50.0, RUNS, later)
    after = rows(tmp_path)
    assert list(after) == graph
    assert after["train@kuhn-mage"] == ("Table 1: kuhn_poker", 300.0, "2026-11-01 09:00 UTC")
    assert after["evaluate@kuhn-mage"] == ("Table 1: kuhn_poker", 50.0, "2026-11-02 09:00 UTC")
    md = (tmp_path / "reports" / "cost.md").read_text()
    assert "ablation" not in md.split("| section |")[1]
    assert "| Table 1: kuhn_poker | 2 | 5.8 | 49% | 2026-11-01, 2026-11-02 |" in md  # 350 of 712 s


def test_a_stage_never_measured_is_counted_and_an_unreadable_table_is_rebuilt(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "cost.csv").write_bytes(b"\xff\xfe not a table")
    update_costs(tmp_path, GRAPH, [ran("code", 6.0)] + [skipped(s) for s in GRAPH[1:]], "reproduce", 6.0, RUNS)
    assert list(rows(tmp_path)) == ["code"]
    assert "9 stage(s) of the graph have no figure yet" in (tmp_path / "reports" / "cost.md").read_text()


def test_a_flow_that_runs_nothing_leaves_the_table_as_it_was(tmp_path: Path) -> None:
    update_costs(tmp_path, GRAPH, [ran(s, 10.0) for s in GRAPH], "reproduce", 60.0, RUNS)
    before = [(tmp_path / "reports" / f).read_bytes() for f in ("cost.csv", "cost.md")]
    update_costs(tmp_path, GRAPH, [skipped(s) for s in GRAPH], "reproduce", 3.0, RUNS)
    assert [(tmp_path / "reports" / f).read_bytes() for f in ("cost.csv", "cost.md")] == before
