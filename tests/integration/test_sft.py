"""``mage sft`` (the warm start by imitation) and a training run that starts from it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from mage_core.config import ConfigError, parse_config
from mage_core.stages.sft import check, clone, demonstrations, samples_of, sft
from mage_core.stages.train import train
from mage_core.stages.train_model import build_policy, make_codec, make_engine, make_generator
from mage_core.trainers.meta_rl import MetaRLTrainer

pytestmark = pytest.mark.integration

SMALL = {"env": {"name": "sokoban"}, "tracking": {"mlflow": False}, "tournament": {"matches": []},
         "evaluation": {"meta_episodes_per_opponent_seat": 4},
         "train": {"groups_per_iteration": 2, "iterations": 1, "eval_every": 0},
         "warm_start": {"meta_episodes": 8, "epochs": 2, "detour": 0.3}}


def test_cloning_makes_the_experts_choices_likelier(tmp_path: Path) -> None:
    cfg = parse_config(SMALL)
    tokenizer, model = build_policy(cfg, tmp_path)
    engine = make_engine(cfg, model)
    trainer = MetaRLTrainer(cfg, engine, make_generator(cfg, tokenizer, tmp_path / "policy-init", model),
                            make_codec(tokenizer, cfg.policy))
    metas, records = demonstrations(trainer, cfg)
    samples = samples_of(metas, records)
    assert sum(len(m.decisions) for m in metas) == len(records) > len(samples) > 0
    # the records are the decisions as shown; a detour is never a target
    kept = [r for r in records if not r["detour"]]
    assert len(kept) == len(samples) and all(r["candidates"][s.choice] == r["action"] for r, s in zip(kept, samples))
    assert {r["attempt"] for r in records if r["detour"]} == {0}  # detours only in first attempts
    assert all(s.candidates is not None and len(s.candidates) == 84 for s in samples)  # Sokoban's move texts
    before = torch.cat(engine.logprobs(samples)).mean().item()
    losses = clone(engine, samples, cfg)
    after = torch.cat(engine.logprobs(samples)).mean().item()
    assert len(losses) == 2 and after > before
    assert losses[0] == pytest.approx(-before, abs=0.05)  # the first epoch starts from the untrained policy


def test_sft_writes_a_warm_start_that_a_training_run_starts_from(tmp_path: Path) -> None:
    cfg = parse_config(SMALL)
    summary = sft(cfg, tmp_path / "sft")
    demos = summary["demonstrations"]
    assert demos["meta_episodes"] == 8 and demos["decisions"] > 8
    assert demos["expert_success_by_attempt"][-1] == 1.0  # later attempts are the expert's own
    assert 0.0 <= summary["selection"]["eval/all/success_ep1"] <= 1.0
    # The expert's own play of the same 4 selection levels: the solver wins every attempt, and
    # Sokoban has no hidden state, so no ceiling beyond it.
    assert summary["expert_on_selection"] == {"tasks": 4, "success_by_attempt": [1.0, 1.0, 1.0], "ceiling_known": None}
    model_dir = tmp_path / "sft" / "model"
    assert (model_dir / "warm_start.json").is_file()
    lines = (tmp_path / "sft" / "demonstrations.jsonl").read_text().splitlines()
    assert len(lines) == demos["decisions"] > demos["imitated_decisions"] > demos["held_out_decisions"] > 0
    assert sum(not json.loads(line)["detour"] for line in lines) == demos["imitated_decisions"] + demos["held_out_decisions"]

    run = parse_config({**SMALL, "model": {"init": str(model_dir)}})
    train(run, tmp_path / "train")
    warm = load_file(model_dir / "model.safetensors")
    init = load_file(tmp_path / "train" / "policy-init" / "model.safetensors")
    assert warm.keys() == init.keys() and all(torch.equal(warm[k], init[k]) for k in warm)

    other = parse_config({**SMALL, "env": {"name": "minesweeper"}, "model": {"init": str(model_dir), "hidden_size": 32}})
    with pytest.raises(ConfigError) as err:
        build_policy(other, tmp_path / "other")
    problems = err.value.problems
    assert problems[0] == f"model.init: {model_dir} was made with env.name 'sokoban', this run has 'minesweeper'"
    assert problems[1] == f"model.init: {model_dir} has hidden_size 64, model.hidden_size is 32"
    assert problems[2].startswith(f"model.init: {model_dir}'s vocabulary lacks ")
    assert not (tmp_path / "other" / "policy-init").exists()

    # Issue 39: warm_start.json is saved with the policy (its manifest lists it); a warm start that
    # gained a file, or lost its manifest, is refused in one line naming it, before anything is built.
    import shutil

    from mage_core.policy.model import MANIFEST

    assert "warm_start.json" in json.loads((model_dir / MANIFEST).read_text())["sha256"]
    damaged = tmp_path / "damaged"
    shutil.copytree(model_dir, damaged)
    (damaged / "notes.txt").write_text("x")
    (damaged / MANIFEST).unlink()
    for expected in (f"{damaged / MANIFEST} is missing, yet {damaged / 'config.json'} says this project saved",
                     f"{damaged / 'notes.txt'} was not saved with the policy ({MANIFEST} does not list it)"):
        with pytest.raises(ConfigError) as err:
            build_policy(parse_config({**SMALL, "model": {"init": str(damaged)}}), tmp_path / "from-damaged")
        (problem,) = err.value.problems
        assert problem.startswith(f"model.init: {damaged}: {expected}"), problem
        assert not (tmp_path / "from-damaged").exists()
        shutil.copy2(model_dir / MANIFEST, damaged / MANIFEST)


def test_what_keeps_a_task_from_a_warm_start_is_named() -> None:
    with pytest.raises(ConfigError) as err:
        check(parse_config({"env": {"name": "kuhn_poker"}, "policy": {"action_mode": "free"}}))
    assert err.value.problems[0].startswith("env.name kuhn_poker: no expert to imitate (tasks with one: ")
    assert err.value.problems[1].startswith("policy.action_mode free: demonstrations are constrained actions")
    with pytest.raises(ConfigError, match="model: init: a warm start of a local checkpoint is its path"):
        parse_config({"model": {"source": "local", "path": "x", "init": "y"}})


def test_an_expert_that_cannot_solve_its_task_stops_sft_before_cloning(tmp_path: Path) -> None:
    # One move a turn and one turn, for levels of at least 5 moves: the expert loses every attempt.
    cfg = parse_config({**SMALL, "env": {"name": "sokoban", "sokoban": {"max_turns": 1, "moves_per_turn": 1}}})
    earlier = tmp_path / "sft" / "model" / "config.json"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("an earlier warm start")
    with pytest.raises(ConfigError) as err:
        sft(cfg, tmp_path / "sft")
    found = re.match(r"warm_start.min_expert_success 0.5: the expert of env.name sokoban won 0 of its (\d+) "
                     r"attempts without a detour", err.value.problems[0])
    # 8 meta-episodes x 3 one-step attempts; the 16 later ones have no detour, a first one with p = 0.7
    assert found and 16 <= int(found.group(1)) <= 24
    # nothing written: the earlier warm start stays, no demonstrations or summary
    assert earlier.read_text() == "an earlier warm start"
    assert sorted(p.name for p in (tmp_path / "sft").iterdir()) == ["model", "policy-init"]


def test_a_selection_set_larger_than_its_split_stops_sft_before_the_demonstrations(
        tmp_path: Path, alfworld_games: Path) -> None:
    # ALFWorld selects on its training games (6 here): a selection set of 7 would play a game twice,
    # found before the expert's meta-episodes are made (they took minutes before the check)
    cfg = parse_config({**SMALL, "env": {"name": "alfworld", "alfworld": {"data_path": str(alfworld_games)}},
                        "evaluation": {"meta_episodes_per_opponent_seat": 7}})
    with pytest.raises(ConfigError) as err:
        sft(cfg, tmp_path / "sft")
    assert err.value.problems == [
        "evaluation.meta_episodes_per_opponent_seat 7: the in_domain set plays each of its split's 6 alfworld tasks "
        "once; lower it (reproduce.eval_per_pair in `mage reproduce`) to at most 6, or make the split larger"]
    assert not (tmp_path / "sft" / "demonstrations.jsonl").exists() and not (tmp_path / "sft" / "model").exists()


def test_sft_is_an_mlflow_run_with_its_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.chdir(tmp_path)
    cfg = parse_config({**SMALL, "tracking": {"mlflow": True, "system_metrics": False}})
    summary = sft(cfg, tmp_path / "sft")
    client = MlflowClient(store)
    [run] = client.search_runs([client.get_experiment_by_name("mage").experiment_id])
    assert run.data.tags["stage"] == "sft" and run.data.tags["env"] == "sokoban"
    assert run.data.params["warm_start.detour"] == "0.3" and run.data.params["warm_start.meta_episodes"] == "8"
    losses = [m.value for m in client.get_metric_history(run.info.run_id, "sft/loss")]
    assert losses == pytest.approx(summary["loss_by_epoch"])
    assert run.data.metrics["sft/decisions"] == summary["demonstrations"]["decisions"]
    assert run.data.metrics["eval/all/success_ep1"] == summary["selection"]["eval/all/success_ep1"]


def test_minesweeper_sft_prints_its_experts_gain_next_to_the_board_known(tmp_path: Path) -> None:
    """MineSweeper's expert reads its memory: on the replayed selection boards its later
    attempts win more than its first, never more than the boards' exact ceiling."""
    cfg = parse_config({**SMALL, "env": {"name": "minesweeper"}, "rollout": {"restart": "same", "early_stop": False},
                        "evaluation": {"meta_episodes_per_opponent_seat": 30}})
    summary = sft(cfg, tmp_path / "sft")
    figures = summary["expert_on_selection"]
    first, second, final = figures["success_by_attempt"]
    assert figures["tasks"] == 30 and first < final and first <= second <= figures["ceiling_known"]
    assert final <= figures["ceiling_known"] <= 1.0


def test_runs_of_every_seed_start_from_one_warm_start(tmp_path: Path) -> None:
    """The vocabulary is the task's, not the seed's: before issue 41 a MineSweeper run of seed 2
    was refused the warm start of seed 0 (its random play had met other closed-cell counts)."""
    base = {**SMALL, "env": {"name": "minesweeper"}, "rollout": {"restart": "same"}}
    sft(parse_config(base), tmp_path / "sft")
    made = {}
    for seed in (0, 2):
        cfg = parse_config({**base, "seed": seed, "model": {"init": str(tmp_path / "sft" / "model")}})
        tokenizer, _ = build_policy(cfg, tmp_path / f"run-{seed}")
        made[seed] = tokenizer.get_vocab()
    assert made[0] == made[2]
