"""The report of a reproduction without Table 1 runs (``reproduce.runs: {}``, the
``ablations_strangers`` profile): its ablation section alone, every output of the report stage
written, none of them claiming a Table 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mage_core.schema import ConfigError
from mage_core.stages.report import FILES, NO_RUNS, report

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SECTION = ("## Ablations (the paper's section 4.4)\n\n| grid | claim | verdict |\n|---|---|---|\n"
           "| strangers | a co-evolving league plays unseen opponents better | not resolved at this scale |\n")


def test_ablations_only_report_holds_the_section_and_every_file(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    (out / "paper-ablations").mkdir(parents=True)
    (out / "paper-ablations" / "section.md").write_text(SECTION, encoding="utf-8")
    metrics = report({}, tmp_path / "eval", tmp_path / "train", out, {}, project_dir=tmp_path)
    assert metrics == {}
    assert json.loads((out / "metrics.json").read_text()) == {}
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == sorted(FILES)
    text = (out / "report.md").read_text()
    assert SECTION in text and NO_RUNS in text
    # No Table 1 of any kind: not its heading, not a run table.
    assert "Table 1 (" not in text and "## Runs" not in text
    assert text.index("Made from ") < text.index(NO_RUNS) < text.index(SECTION) < text.index("## Cost")
    assert NO_RUNS in (out / "table1.md").read_text() and NO_RUNS in (out / "per_opponent.md").read_text()
    assert (out / "table1.csv").read_text() == ""
    for name in ("adaptation.png", "training_curves.png"):
        assert (out / name).read_bytes().startswith(PNG_SIGNATURE)


def test_ablations_only_report_is_the_same_bytes_twice(tmp_path: Path) -> None:
    """No wall-clock time in any file: a rerun writes the same bytes (the stage's outputs are not cached)."""
    out = tmp_path / "reports"
    report({}, tmp_path / "eval", None, out, {}, project_dir=tmp_path)
    first = {name: (out / name).read_bytes() for name in FILES}
    report({}, tmp_path / "eval", None, out, {}, project_dir=tmp_path)
    assert {name: (out / name).read_bytes() for name in FILES} == first
    assert "Not summarized: run `mage ablations`" in first["report.md"].decode()


def test_a_dvc_lock_that_cannot_be_read_stops_it_before_any_file(tmp_path: Path) -> None:
    (tmp_path / "dvc.lock").write_text("schema: [unclosed", encoding="utf-8")
    out = tmp_path / "reports"
    with pytest.raises(ConfigError, match="dvc.lock"):
        report({}, tmp_path / "eval", None, out, {}, project_dir=tmp_path)
    assert not out.exists() or not any(out.iterdir())
