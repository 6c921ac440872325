"""The K-independent comparison keys of an evaluation (mage_core.evaluation.comparison) and
the saved view built on them (mage_core.tracking.views): pure functions."""

from __future__ import annotations

import json

import pytest

from mage_core.evaluation.comparison import adaptation_metrics, final_episode, table1_metrics
from mage_core.tracking.views import MAX_TAG_CHARS, envelope, read_envelope, read_state, table1_view_state, view_url

pytestmark = pytest.mark.unit


def _metrics(k: int, unit: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for suite, shift in (("in_domain", 0.0), ("out_of_domain", 0.5)):
        for i in range(1, k + 1):
            out[f"eval/{suite}/all/success_ep{i}"] = 0.1 * i + shift
            out[f"eval/{suite}/all/success_ep{i}_low"] = 0.1 * i + shift - 0.05
            out[f"eval/{suite}/all/success_ep{i}_high"] = 0.1 * i + shift + 0.05
            out[f"eval/{suite}/all/{unit}_ep{i}"] = -0.2 + 0.1 * i + shift
            out[f"eval/{suite}/all/draw_ep{i}"] = 0.0
            out[f"eval/{suite}/all/pass_at_{i}"] = 0.2 * i + shift
            out[f"eval/{suite}/aggressive/first/success_ep{i}"] = 0.9  # a group: not Table 1's
    return out


def test_table1_reads_the_final_episode_whatever_k() -> None:
    one, three = _metrics(1, "reward"), _metrics(3, "chips")
    three["eval/in_domain/all/chips_exact_ep3"] = 0.25
    assert final_episode(one) == 1 and final_episode(three) == 3 and final_episode({}) is None
    assert table1_metrics(one) == pytest.approx({
        "table1/in_domain/success_final": 0.1, "table1/in_domain/success_final_low": 0.05,
        "table1/in_domain/success_final_high": 0.15, "table1/in_domain/pass_at_k": 0.2, "table1/in_domain/k": 1.0})
    got = table1_metrics(three)
    assert got["table1/in_domain/success_final"] == pytest.approx(0.3)
    assert got["table1/in_domain/pass_at_k"] == pytest.approx(0.6)
    assert got["table1/in_domain/chips_final"] == pytest.approx(0.1)
    assert got["table1/in_domain/chips_exact_final"] == 0.25 and got["table1/in_domain/k"] == 3.0
    assert set(table1_metrics(one)) < set(got)  # the shared keys: same names on both runs
    assert table1_metrics(three, suite="out_of_domain")["table1/out_of_domain/success_final"] == pytest.approx(0.8)


def test_adaptation_is_one_step_per_episode_index_for_every_suite() -> None:
    curves = adaptation_metrics(_metrics(3, "chips"))
    assert list(curves) == [1, 2, 3]
    assert curves[2] == pytest.approx({"adaptation/in_domain/success": 0.2, "adaptation/in_domain/chips": 0.0,
                                       "adaptation/out_of_domain/success": 0.7,
                                       "adaptation/out_of_domain/chips": 0.5})


def test_view_state_and_its_envelope_round_trip() -> None:
    state = table1_view_state("webshop")
    assert state["searchFilter"] == "tags.stage = 'evaluate' AND tags.env = 'webshop'"
    bars = [c["metricKey"] for c in state["compareRunCharts"] if c["type"] == "BAR"]
    assert bars == ["table1/in_domain/success_final", "table1/in_domain/pass_at_k"]
    sections = {c["metricSectionId"] for c in state["compareRunCharts"]}
    assert sections <= {s["uuid"] for s in state["compareRunSections"]}
    value = envelope("Table 1: WebShop by method", state, 1, 2)
    data = read_envelope(value)
    assert data is not None and data["name"] == "Table 1: WebShop by method" and data["createdAt"] == 1
    assert read_state(data) == state and len(value) <= MAX_TAG_CHARS
    # Past MLflow's limit on a tag, the state is deflated the way the UI inflates it.
    big = {**state, "groupsExpanded": {f"group-{i}": True for i in range(2000)}}
    packed = read_envelope(envelope("big", big, 1, 1))
    assert packed is not None and packed["state"].startswith("deflate;") and read_state(packed) == big
    assert read_envelope("not json") is None and read_envelope(json.dumps([1])) is None
    assert view_url("http://127.0.0.1:5000/", "3", "mage-table1-webshop", charts=True) == (
        "http://127.0.0.1:5000/#/experiments/3/runs?viewStateShareKey=mage-table1-webshop"
        "&workflowType=machine_learning&compareRunsMode=CHART")
