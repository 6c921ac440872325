"""The co-evolving league (train.league, Kuhn Poker): every N iterations the policy's
first hand is read, its exact best response and a snapshot of it join the training
population; the league survives a resume; the exploitability curve is logged."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from mage_core.config import ConfigError, parse_config
from mage_core.envs.kuhn_poker.analysis import best_response, expected_value, exploitability
from mage_core.stages.train import train
from mage_core.trainers.checkpoint import CheckpointManager

pytestmark = pytest.mark.integration

PARAMS = {"env": {"name": "kuhn_poker"}, "tournament": {"matches": []},
          "train": {"iterations": 6, "groups_per_iteration": 2, "eval_every": 2, "checkpoint_every": 2,
                    "league": {"every": 2, "max_members": 3}},
          "algorithm": {"group_size": 2}, "evaluation": {"meta_episodes_per_opponent_seat": 2}}


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if '"step"' in line]


def test_the_league_grows_with_exploiters_and_snapshots_and_survives_a_resume(tmp_path: Path) -> None:
    cfg = parse_config(PARAMS)
    out = tmp_path / "run"
    train(cfg, out, stop_after=4)  # interrupted after iteration 4 (checkpointed), resumed below
    steps: dict[int, dict] = {}
    for record in records(out):  # an iteration's records merged (the final evaluation comes apart)
        steps.setdefault(record["step"], {}).update(record)
    # Two members at iteration 2, four at 4 less the oldest (max 3).
    assert steps[2]["league/members"] == 2 and steps[4]["league/members"] == 3
    # The exploiter's value is the first hand's exploitability, logged with every evaluation.
    assert steps[2]["league/exploiter_value"] == pytest.approx(steps[2]["eval/first_hand/exploitability"])
    assert steps[4]["eval/first_hand/exploitability"] > 0
    _, _, saved, _ = CheckpointManager(out / "checkpoints").load()
    league = {name: {key: Fraction(n, d) for key, n, d in table} for name, table in saved["league"]}
    assert list(league) == ["league_past_2", "league_exploiter_4", "league_past_4"]
    # The exploiter is the exact best response to the snapshot of the same iteration
    # (the snapshot rounds P(BET) to 1/1000; the best response is pure).
    from mage_core.opponents.kuhn import BehaviourStrategy

    past = BehaviourStrategy("past", league["league_past_4"])
    exploiter = league["league_exploiter_4"]
    assert set(exploiter.values()) <= {0, 1}
    for seat in (0, 1):  # the exploiter earns the best-response value against the policy it was built on
        assert float(expected_value(exploiter, past, seat)) == pytest.approx(
            float(best_response([(1, past)], seat)[0]), abs=5e-3)
    assert exploitability(past) == pytest.approx(steps[4]["league/exploiter_value"], abs=5e-3)
    # The resumed run starts from the saved league and extends it.
    train(cfg, out, resume=True)
    _, _, saved, _ = CheckpointManager(out / "checkpoints").load()
    assert [name for name, _ in saved["league"]] == ["league_past_4", "league_exploiter_6", "league_past_6"]


def test_the_league_needs_kuhn_constrained_actions_and_no_ray_workers() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"env": {"name": "tic_tac_toe"}, "rollout": {"workers": 2},
                      "train": {"league": {"every": 5}}})
    text = "\n".join(caught.value.problems)
    assert "train.league.every > 0 needs: env.name tic_tac_toe" in text and "rollout.workers > 0" in text
    with pytest.raises(ConfigError, match="name exploiter and/or snapshot"):
        parse_config({"train": {"league": {"every": 5, "add": []}}})
