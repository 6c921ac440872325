"""``mlflow_tracker.lock_entry`` reads one stage's entry of dvc.lock without parsing the rest:
the same entry as a full parse, for every stage of a lock written as DVC writes it."""

from __future__ import annotations

import yaml

from mage_core.tracking.mlflow_tracker import lock_entry

LOCK = """schema: '2.0'
stages:
  train@kuhn_poker-mage:
    cmd: mage train --run kuhn_poker-mage --resume auto --out
      artifacts/train/kuhn_poker-mage
    deps:
    - path: mage_core/algos
      hash: md5
      md5: 63402ab971694b6fd826f8e98e38e87d.dir
      size: 29175
      nfiles: 4
    outs:
    - path: artifacts/train/kuhn_poker-mage
      hash: md5
      md5: aaaa.dir
  'data@alfworld':
    cmd: mage data generate alfworld

    outs:
    - path: data/alfworld
      hash: md5
      md5: bbbb.dir
  report:
    cmd: mage report
    deps:
    - path: reports
      md5: cccc
"""


def test_every_stage_reads_as_a_full_parse_reads_it():
    full = yaml.safe_load(LOCK)["stages"]
    assert set(full) == {"train@kuhn_poker-mage", "data@alfworld", "report"}
    for name, entry in full.items():
        assert lock_entry(LOCK, name) == entry


def test_a_stage_the_lock_does_not_hold_has_an_empty_entry():
    assert lock_entry(LOCK, "train@sokoban-mage") == {}
    assert lock_entry("", "report") == {}


def test_a_key_nested_deeper_is_not_taken_for_a_stage():
    # "report:" also appears indented by four spaces inside another stage: not a stage key.
    text = LOCK.replace("    cmd: mage data generate alfworld", "    cmd: mage data generate alfworld\n    report: x")
    assert lock_entry(text, "report") == yaml.safe_load(text)["stages"]["report"]
    assert lock_entry(text, "data@alfworld")["report"] == "x"
