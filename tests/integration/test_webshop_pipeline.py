"""WebShop in the pipeline: `mage train` and `mage evaluate` on a generated
catalogue with the embedded tiny model (compact prompts, constrained clicks),
the eval / ood / select splits, and the data checks before any work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mage_core.config import ConfigError, parse_config
from mage_core.envs.webshop.catalogue import generate_catalogue, write_catalogue
from mage_core.stages.evaluate import evaluate
from mage_core.stages.train import train

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 40 products per category: 720 in-domain goals = 500 eval + 100 select + 120 train
    return write_catalogue(generate_catalogue(np.random.default_rng(0), 40), tmp_path_factory.mktemp("shop"))


def params(shop: Path, **env) -> dict:
    return {"env": {"name": "webshop", "webshop": {"data_path": str(shop), **env}}, "tournament": {"matches": []},
            "tracking": {"mlflow": False},
            "train": {"iterations": 2, "groups_per_iteration": 2, "eval_every": 0},
            "algorithm": {"group_size": 4}, "evaluation": {"meta_episodes_per_opponent_seat": 4}}


def test_train_then_evaluate_on_the_eval_and_ood_splits(shop: Path, tmp_path: Path) -> None:
    cfg = parse_config(params(shop))
    summary = train(cfg, tmp_path / "train")
    assert summary["iterations"] == 2
    transcript = (tmp_path / "train" / "transcripts.txt").read_text()
    assert "game webshop" in transcript and "response: search[" in transcript
    metrics = evaluate(cfg, tmp_path / "train" / "best", tmp_path / "eval", "all", per_opponent_seat=5)
    trials = pd.read_parquet(tmp_path / "eval" / "trials.parquet")
    assert trials.groupby("suite").size().to_dict() == {"in_domain": 5 * 3, "ood_unseen_categories": 5 * 3}
    assert set(trials.opponent) == {"none"}
    # a task reward is 10 (a purchase scoring 1) or 0 (anything else, verl-agent)
    assert set(trials.reward) <= {0.0, 10.0}
    assert metrics["eval/in_domain/all/success_ep3"] == pytest.approx(
        trials[(trials.suite == "in_domain") & (trials.episode == 3)].success.mean())
    saved = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert saved["game"] == "webshop"


def test_missing_catalogue_or_empty_split_stops_before_any_work(shop: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"env\.webshop\.data_path: .*nowhere: no such catalogue folder"):
        train(parse_config(params(tmp_path / "nowhere")), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    # 720 in-domain goals: 700 eval + 100 select leave no training goal
    with pytest.raises(ConfigError, match=r"split 'train' has no goals.*num_eval"):
        train(parse_config(params(shop, num_eval=700)), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match=r"env\.webshop\.data_path"):
        evaluate(parse_config(params(tmp_path / "nowhere")), tmp_path, tmp_path / "eval")
    assert not (tmp_path / "eval").exists()
