"""Does the CPU default still learn? A few minutes of Kuhn training (slow tier).

A regression in learning (a prompt, a return, an advantage or an update that
stops the policy from adapting) fails here, not only in a benchmark someone has
to read. The CPU default (params.yaml, ``algorithm.preset: mage``, fresh deals,
the paper's population) trains for 500 iterations (~4 minutes on one core),
keeps the policy with the best exact greedy value, and is then judged on a
report set it was not selected on: its final hand must beat the best
non-adaptive strategy, 1/8 chips per hand (docs/method.md section 11), with the
whole 95% interval, and beat its own first hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mage_core.config import load_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BEST_FIXED = 1 / 8  # the best single fixed strategy against the paper's population


def test_the_cpu_default_learns_to_exploit_kuhn_opponents(tmp_path: Path) -> None:
    from mage_core.backends.hf import HFGenerator
    from mage_core.evaluation.meta_eval import summarize_trials
    from mage_core.evaluation.suites import suites_for
    from mage_core.evaluation.trials import trial_rows
    from mage_core.policy.model import load_policy
    from mage_core.stages.train import make_codec, train
    from mage_core.trainers.meta_rl import MetaRLTrainer

    cfg = load_config(ROOT / "params.yaml", [
        "env.name=kuhn_poker", "train.iterations=500", "train.eval_every=25", "train.select_on=exact_greedy",
        "tracking.mlflow=false", "tournament.matches=[]"])
    summary = train(cfg, tmp_path / "run")
    assert summary["best_score"] > BEST_FIXED + 0.04, summary  # the exact greedy value of best/

    model, tokenizer = load_policy(tmp_path / "run" / "best")
    report = cfg.model_copy(update={"evaluation": cfg.evaluation.model_copy(update={"seed": 777_000_777})})
    trainer = MetaRLTrainer(report, None, HFGenerator(model, pad_token_id=tokenizer.pad_token_id),  # type: ignore[arg-type]
                            make_codec(tokenizer))
    suite = suites_for(report, "in_domain")[0]
    metas = trainer.run_suite(suite, 2000)  # 12,000 meta-episodes the run never saw
    k = trainer.eval_settings.num_episodes
    metrics = summarize_trials(trial_rows(metas, "report", report.env.kuhn_poker.reward_per_chip), k, "chips",
                               suite.weights(), intervals=True)
    assert metrics[f"all/chips_ep{k}_low"] > BEST_FIXED, metrics
    assert metrics[f"all/chips_ep{k}"] > metrics["all/chips_ep1"]
