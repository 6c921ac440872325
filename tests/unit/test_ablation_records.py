"""Recorded ablation verdicts (mage_core.stages.ablation_records): a profile run's verdicts copied
into reports/profiles/<profile>/ with their fingerprints, and the default report's table of the
claims it does not run, each with its recorded verdict marked current or stale."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from mage_core.config import load_config
from mage_core.stages.ablation_records import (RECORDS, load_records, record, recorded_claims,
                                               recorded_markdown)
from mage_core.stages.ablations import claims_not_run
from mage_core.stages.profiles import profile_params

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
ANCHOR = "the global anchor beats the local one"
HEADER = "grid,claim,suite,measure,better,than,seeds,mean,low,high,verdict\n"
ROW = (f"anchor,{ANCHOR},in_domain,chips,algorithm.preset=mage,algorithm.preset=ablation_local_anchor,3,"
       "-0.002,-0.046,0.042,not resolved at this scale\n")
MANIFESTS = ("train-kuhn_poker.md5", "evaluate-kuhn_poker.md5", "ablations.md5")


def _code(root: Path, tag: str = "") -> None:
    for name in MANIFESTS:
        path = root / "artifacts" / "code" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"0123  mage_core/{name}{tag}\n")


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy2(ROOT / "params.yaml", root / "params.yaml")
    _code(root)
    return root


def _workspace(project: Path, profile: str = "ablations_kuhn", rows: str = ROW) -> Path:
    """What a profile's succeeded flow leaves: its params, its ablations stage's outputs, its code manifests."""
    ws = project / "artifacts" / "profiles" / profile
    (ws / "reports" / "paper-ablations" / "reward_design").mkdir(parents=True)
    (ws / "params.yaml").write_text(yaml.safe_dump(profile_params(project / "params.yaml", profile), sort_keys=False))
    (ws / "reports" / "paper-ablations" / "verdicts.csv").write_text(HEADER + rows)
    (ws / "reports" / "paper-ablations" / "section.md").write_text(
        "## Ablations (the paper's section 4.4)\n\n![anchor](paper-ablations/anchor/figure.png)\n")
    (ws / "reports" / "paper-ablations" / "reward_design" / "decomposition.csv").write_text(
        "step,from,to,changes,mean,low,high,seeds\n1,lamer,ablation_cumulative,algorithm.reward_variant: lamer -> "
        "cumulative,0.005,-0.016,0.026,3\n")
    (ws / "reports" / "cost.md").write_text("# What the reproduction cost\n")
    _code(ws)
    return ws


def _claims(project: Path) -> list[tuple[str, str, str]]:
    return claims_not_run(load_config(project / "params.yaml"))


def _recorded(project: Path) -> dict:
    return recorded_claims(project, project / "params.yaml", _claims(project), profile_params)


def test_a_record_carries_the_verdicts_and_the_fingerprints_that_vouch_for_them(project: Path) -> None:
    folder = record(project, "ablations_kuhn", _workspace(project))
    assert folder == project / RECORDS / "ablations_kuhn"
    provenance = json.loads((folder / "provenance.json").read_text())
    assert provenance["profile"] == "ablations_kuhn"
    assert provenance["grids"] == ["reward_design", "grouping", "anchor"]
    assert provenance["command"] == "mage reproduce --profile ablations_kuhn"
    assert set(provenance["code"]) == {"train-kuhn_poker.md5", "evaluate-kuhn_poker.md5", "data-kuhn_poker.md5",
                                       "ablations.md5"}
    assert provenance["code"]["data-kuhn_poker.md5"] is None  # Kuhn has no data stage
    # every point of each grid (seed 0's MAGE is a Table 1 run, still a point of the grid)
    assert len(provenance["points"]["anchor"]) == 6 and len(provenance["points"]["reward_design"]) == 12
    assert (folder / "paper-ablations" / "verdicts.csv").read_text() == HEADER + ROW
    assert (folder / "cost.md").is_file()
    readme = (folder / "README.md").read_text()
    assert "## The profile's ablation section" in readme and "(paper-ablations/anchor/figure.png)" in readme


def test_the_report_sets_a_current_record_beside_its_claim(project: Path) -> None:
    record(project, "ablations_kuhn", _workspace(project))
    unrun = _claims(project)
    found = _recorded(project)
    assert set(found) == {("anchor", ANCHOR)}  # the record holds one claim: the others stay unrecorded
    assert found[("anchor", ANCHOR)].stale == ()
    text = recorded_markdown(project, unrun, found)
    assert (f"| anchor | {ANCHOR} | **not resolved at this scale** (recorded, current) | "
            "-0.002 [-0.046, +0.042], 3 seeds |") in text
    assert "([record](profiles/ablations_kuhn/README.md))" in text
    assert ("| grouping | agent-specific normalization beats non-stationary grouping | not run by this flow; "
            "no record |  | `mage reproduce --profile ablations_kuhn` |") in text
    assert "decomposition" not in text  # the record's reward_design decomposition: no claim of it drawn on


def test_the_recorded_decomposition_comes_with_its_grid(project: Path) -> None:
    rows = ROW + ("reward_design,the differential return beats the cumulative one,in_domain,chips,"
                  "algorithm.preset=mage,algorithm.preset=ablation_cumulative,3,-0.022,-0.070,0.026,"
                  "not resolved at this scale\n")
    record(project, "ablations_kuhn", _workspace(project, rows=rows))
    unrun = _claims(project)
    text = recorded_markdown(project, unrun, _recorded(project))
    assert "#### reward_design: decomposition (recorded by profile ablations_kuhn, current)" in text
    assert "| 1 | lamer -> ablation_cumulative | algorithm.reward_variant: lamer -> cumulative | " \
           "+0.005 [-0.016, +0.026] | 3 |" in text


def test_changed_training_code_makes_a_record_stale(project: Path) -> None:
    record(project, "ablations_kuhn", _workspace(project))
    (project / "artifacts" / "code" / "train-kuhn_poker.md5").write_text("4567  mage_core/changed.py\n")
    found = _recorded(project)
    assert found[("anchor", ANCHOR)].stale == ("code (train-kuhn_poker)",)
    text = recorded_markdown(project, _claims(project), found)
    assert "(recorded, stale: code (train-kuhn_poker) since)" in text


def _edit_params(project: Path, edit) -> None:  # noqa: ANN001
    data = yaml.safe_load((project / "params.yaml").read_text())
    edit(data)
    (project / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def test_changed_params_of_the_points_make_it_stale_and_other_keys_do_not(project: Path) -> None:
    record(project, "ablations_kuhn", _workspace(project))
    # a key no point's stages depend on: the record stands
    _edit_params(project, lambda d: d["tracking"].update(experiment="other"))
    assert _recorded(project)[("anchor", ANCHOR)].stale == ()
    # the grid's shared budget: every point would train differently
    _edit_params(project, lambda d: d["sweep"]["grids"]["anchor"]["set"].update({"train.iterations": 400}))
    stale = _recorded(project)[("anchor", ANCHOR)].stale
    assert stale == ("params of ablation_local_anchor-0, ablation_local_anchor-1, ablation_local_anchor-2 and "
                     "3 more",)


def test_a_record_whose_profile_is_gone_is_stale(project: Path) -> None:
    record(project, "ablations_kuhn", _workspace(project))
    _edit_params(project, lambda d: d["reproduce"]["profiles"].pop("ablations_kuhn"))
    found = _recorded(project)
    assert found[("anchor", ANCHOR)].stale == ("profile ablations_kuhn is no longer in reproduce.profiles",)


def test_a_profile_of_grids_the_project_does_not_define_records_nothing(project: Path) -> None:
    ws = _workspace(project, profile="smoke")  # its grid smoke_ablation lives in the profile only
    assert record(project, "smoke", ws) is None
    assert not (project / RECORDS / "smoke").exists()


def test_a_failed_record_leaves_the_earlier_one_whole(project: Path) -> None:
    folder = record(project, "ablations_kuhn", _workspace(project))
    before = (folder / "provenance.json").read_text()
    ws = project / "artifacts" / "profiles" / "ablations_kuhn"
    (ws / "reports" / "paper-ablations" / "verdicts.csv").unlink()
    with pytest.raises(FileNotFoundError, match="verdicts.csv"):
        record(project, "ablations_kuhn", ws)
    assert (folder / "provenance.json").read_text() == before
    (ws / "reports" / "paper-ablations" / "verdicts.csv").write_text(HEADER + ROW)
    (ws / "artifacts" / "code" / "ablations.md5").unlink()
    with pytest.raises(FileNotFoundError, match="ablations.md5"):
        record(project, "ablations_kuhn", ws)
    assert (folder / "provenance.json").read_text() == before


def test_an_unreadable_record_is_named(project: Path) -> None:
    folder = record(project, "ablations_kuhn", _workspace(project))
    (folder / "provenance.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"ablations_kuhn: not a readable ablation record"):
        load_records(project)


def test_the_code_stage_lists_the_manifests_the_records_name(project: Path) -> None:
    from mage_core.stages.ablation_records import RECORDED_CODE, file_md5, recorded_code_text

    code = project / "artifacts" / "code"
    assert recorded_code_text(project, code) == ""  # no record: nothing to depend on
    record(project, "ablations_kuhn", _workspace(project))
    text = recorded_code_text(project, code)
    lines = text.splitlines()  # sorted by manifest name
    assert [line.split("  ")[1] for line in lines] == [f"artifacts/code/{n}" for n in (
        "ablations.md5", "data-kuhn_poker.md5", "evaluate-kuhn_poker.md5", "train-kuhn_poker.md5")]
    assert lines[1] == "-  artifacts/code/data-kuhn_poker.md5"
    assert lines[3] == f"{file_md5(code / 'train-kuhn_poker.md5')}  artifacts/code/train-kuhn_poker.md5"
    # the ablations stage judges by what the code stage wrote (its declared dependency), not by the folder
    (code / RECORDED_CODE).write_text(text.replace(lines[3].split("  ")[0], "0" * 32))
    assert _recorded(project)[("anchor", ANCHOR)].stale == ("code (train-kuhn_poker)",)
