"""ALFWorld as an agent environment through alfworld's own wrappers and engine:
the expert's walkthrough wins through the Env, restart replays the game, invalid
and inadmissible commands, parsing, compact names, and `mage train` / `mage
evaluate` end to end on generated games."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mage_core.config import ConfigError, parse_config
from mage_core.envs.alfworld.params import AlfWorldSettings
from mage_core.envs.base import Outcome

pytestmark = pytest.mark.integration

E = pytest.importorskip("mage_core.envs.alfworld.env")


def make(games: Path, **kw) -> "E.AlfWorldEnv":
    return E.AlfWorldEnv(AlfWorldSettings(data_path=str(games), **kw), np.random.default_rng(0))


def test_every_walkthrough_wins_through_the_env(alfworld_games: Path) -> None:
    env = make(alfworld_games, max_turns=200)
    assert len(env.games) == 6
    for gamefile in env.games:
        env.set_game(gamefile)
        assert env.observation().startswith(f"Your task is to: {env.task}") and env.task
        results = [env.step(command) for command in E.walkthrough(gamefile)]
        assert all(not r.invalid for r in results)
        assert results[-1].outcome is Outcome.WIN and results[-1].reward == 10.0 and env.won and env.done
        assert sum(r.reward for r in results) == 10.0
        assert env.legal_actions() == [] and env.observation().endswith("The task is done.")


def test_the_planner_expert_wins_every_game_within_the_turn_limit(alfworld_games: Path) -> None:
    from mage_core.envs.alfworld.expert import act

    from mage_core.envs.alfworld.generate import make_play_env

    env = make(alfworld_games, planner=True)
    eager = make_play_env(planner=True)  # TextWorld's own plan after every step, beside the env's on demand
    rng = np.random.default_rng(0)
    for gamefile in env.games:
        env.set_game(gamefile)
        eager.load(gamefile)
        state = eager.reset()
        while not env.done:
            command = act(env, rng)
            assert env.planner_commands() == state["policy_commands"]
            assert command == env.planner_commands()[0] and command in env.legal_actions()
            result = env.step(command)
            state, _, _ = eager.step(command)
        assert result.outcome is Outcome.WIN and env.turn <= len(E.walkthrough(gamefile))
    with pytest.raises(RuntimeError, match=r"plans only with AlfWorldSettings\(planner=True\)"):
        make(alfworld_games).planner_commands()
    assert act(env, rng) is None  # a won game leaves the planner nothing: no expert action, no guess


def test_an_evaluation_set_plays_each_game_once(alfworld_games: Path) -> None:
    env = make(alfworld_games)
    played = []
    for index in range(env.split_size()):
        env.reset_to(index)
        played.append(env.game)
    assert sorted(played) == sorted(env.games)  # all six, none twice
    with pytest.raises(ValueError, match=r"asks for game 7 of a split of 6"):
        env.reset_to(6)


def test_restart_replays_the_game_and_invalid_turns_change_nothing(alfworld_games: Path) -> None:
    env = make(alfworld_games, max_turns=3)
    env.reset()
    first, legal = env.observation(), env.legal_actions()
    result = env.step(None)
    assert result.invalid and result.reward == 0 and not result.done
    assert "Nothing happens." in env.observation() and env.legal_actions() == legal
    assert env.step("fly to the moon").invalid  # not admissible: no engine step either
    last = env.step(legal[0])
    assert not last.invalid and last.outcome is Outcome.TIMEOUT and last.reward == 0.0 and env.done
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step(legal[0])
    env.restart()
    assert env.observation() == first and env.turn == 0 and not env.done


def test_parse_action_and_compact_names(alfworld_games: Path) -> None:
    env = make(alfworld_games)
    assert env.parse_action("<action>go to cabinet 1</action>") is None  # before reset: no game
    env.reset()
    legal = env.legal_actions()
    target = next(a for a in legal if a.startswith("go to "))
    assert env.parse_action(f"I think... <action>  {target.upper()} </action>") == target
    assert env.parse_action(target + ".") == target
    assert env.parse_action("<action>dance</action>") is None and env.parse_action(None) is None  # type: ignore[arg-type]
    words = [env.compact_action(a) for a in legal]
    assert words == [f"c{i}" for i in range(1, len(legal) + 1)]
    compact = env.compact_observation()
    assert compact.startswith(f"task {E.compact_text(env.task)} ") and f"c1 {legal[0]}" in compact
    assert "welcome to textworld" not in compact


def test_a_lost_attempt_remembers_where_it_looked(alfworld_games: Path) -> None:
    env = make(alfworld_games, max_turns=3)
    env.reset()
    places = [a for a in env.legal_actions() if a.startswith("go to ")][:3]
    for command in places:
        env.step(command)
    assert env.done and not env.won
    looked = ", ".join(c.removeprefix("go to ") for c in places)
    assert env.compact_observation().endswith(f" searched {looked} lost")  # what the next attempt reads
    env.restart()
    env.step(None)
    env.step(None)
    env.step(None)
    assert env.compact_observation().endswith(" searched nothing lost")  # a new attempt starts afresh


def test_put_in_reads_as_move_to(alfworld_games: Path) -> None:
    env = make(alfworld_games, max_turns=200)
    for gamefile in env.games:
        env.set_game(gamefile)
        for command in E.walkthrough(gamefile):
            if command.startswith("move "):
                obj, recep = command[len("move "):].split(" to ")
                assert env.parse_action(f"<action>put {obj} in/on {recep}</action>") == command
                return
            env.step(command)
    pytest.fail("no walkthrough moves an object")


def test_train_and_evaluate_on_generated_games(alfworld_games: Path, tmp_path: Path) -> None:
    from mage_core.stages.evaluate import evaluate
    from mage_core.stages.train import train

    params = {"env": {"name": "alfworld", "alfworld": {"data_path": str(alfworld_games)}},
              "tournament": {"matches": []}, "tracking": {"mlflow": False},
              "train": {"iterations": 1, "groups_per_iteration": 1, "eval_every": 0},
              "algorithm": {"group_size": 2}, "evaluation": {"meta_episodes_per_opponent_seat": 1}}
    cfg = parse_config(params)
    assert train(cfg, tmp_path / "train")["iterations"] == 1
    evaluate(cfg, tmp_path / "train" / "best", tmp_path / "eval", "all", per_opponent_seat=1)
    trials = pd.read_parquet(tmp_path / "eval" / "trials.parquet")
    assert trials.groupby("suite").size().to_dict() == {"in_domain": 3, "ood_unseen_floor_plans": 3}
    assert set(trials.reward) <= {0.0, 10.0}
    missing = cfg.env.alfworld.replace(data_path=str(tmp_path / "nowhere"))
    bad = cfg.model_copy(update={"env": cfg.env.model_copy(update={"alfworld": missing})})
    with pytest.raises(ConfigError, match=r"env\.alfworld\.data_path: .*nowhere/train: no such folder"):
        train(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_memoized_engine_plays_exactly_as_the_original(alfworld_games: Path) -> None:
    # cache.py memoizes fast-downward's translation and the grammar's parses: every
    # observation, admissible command and win along each walkthrough, reset twice (the
    # second from the memo), equals the engine without the memos
    from mage_core.envs.alfworld.generate import make_play_env

    def trace(engine, gamefile: str) -> list:
        engine.load(gamefile)
        out = []
        for _ in range(2):
            state = engine.reset()
            steps = [(state["feedback"], state["admissible_commands"], state["won"])]
            for command in E.walkthrough(gamefile):
                state, _, _ = engine.step(command)
                steps.append((state["feedback"], state["admissible_commands"], state["won"]))
            out.append(steps)
        return out

    original, memoized = _without_and_with_memos(alfworld_games, make_play_env(), trace)
    assert memoized == original
    assert all(steps[-1][2] for per_game in memoized for steps in per_game)  # every walkthrough wins


def _without_and_with_memos(alfworld_games: Path, engine, play) -> tuple[list, list]:
    """``play(engine, game)`` for two training games, first with cache.py's memos uninstalled, then with them."""
    from mage_core.envs.alfworld import cache

    games = sorted(E.split_games(str(alfworld_games), "train"))[:2]
    cache.uninstall()
    try:
        original = [play(engine, g) for g in games]
    finally:
        cache.install()
    return original, [play(engine, g) for g in games]


def test_the_memoized_planner_plans_exactly_as_the_original(alfworld_games: Path) -> None:
    # cache.py memoizes the planner's plan by (replanning task, facts): along a seeded random
    # walk of each game, played twice (the second from the memo), every plan equals the
    # planner's own without the memos
    from mage_core.envs.alfworld.generate import make_play_env

    def plans(engine, gamefile: str) -> list:
        engine.load(gamefile)
        out = []
        for _ in range(2):
            rng = np.random.default_rng(7)
            state = engine.reset()
            walk = [state["policy_commands"]]
            for _ in range(6):
                commands = state["admissible_commands"]
                state, _, _ = engine.step(commands[int(rng.integers(len(commands)))])
                walk.append(state["policy_commands"])
            out.append(walk)
        return out

    original, memoized = _without_and_with_memos(alfworld_games, make_play_env(planner=True), plans)
    assert memoized == original
    assert all(walk[0] for per_game in memoized for walk in per_game)  # a plan from every start
