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
    from mage_core.envs.alfworld.expert import omniscient as act

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


def test_the_commands_own_words_as_candidates(alfworld_games: Path) -> None:
    """``compact_candidates: words``: the prompt lists the commands themselves, each answer is a
    command in its own words, no ``c<i>`` token is added to the vocabulary, and every word of a
    command is a word of the game's vocabulary (so the tiny model reads it as the prompt does)."""
    from mage_core.envs.alfworld.task import TASK
    from mage_core.rollout.corpus import action_tokens

    env = make(alfworld_games, compact_candidates="words")
    env.reset()
    legal = env.legal_actions()
    assert [env.compact_action(a) for a in legal] == legal
    assert env.compact_observation().endswith(", ".join(legal)) and " c1 " not in env.compact_observation()
    assert list(TASK.action_words(env)) == []
    base = yaml_params()
    for mode in ("index", "words"):
        cfg = parse_config({**base, "env": {**base["env"], "name": "alfworld",
                                            "alfworld": {**base["env"]["alfworld"], "data_path": str(alfworld_games),
                                                         "compact_candidates": mode}}})
        tokens = action_tokens(cfg)
        assert all(" " not in t for t in tokens)
        assert ("c1" in tokens) is (mode == "index"), mode
    with pytest.raises(ConfigError, match="compact_candidates"):
        parse_config({**base, "env": {**base["env"], "alfworld": {**base["env"]["alfworld"],
                                                                  "compact_candidates": "letters"}}})


def yaml_params() -> dict:
    import yaml

    return yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text(encoding="utf-8"))


def test_a_lost_attempt_reveals_what_its_looks_showed_and_nothing_else(alfworld_games: Path) -> None:
    from mage_core.envs.alfworld.knowledge import looked

    env = make(alfworld_games, max_turns=6)
    for gamefile in env.games:
        env.set_game(gamefile)
        shown: dict[str, list[str]] = {}  # each receptacle's first look, read from the feedback here
        for command in [a for a in env.legal_actions() if a.startswith("go to ")][:6]:
            env.step(command)
            if f"open {command[6:]}" in env.legal_actions() and not env.done:
                env.step(f"open {command[6:]}")
            look = looked(env.observation())
            if look is not None:
                shown.setdefault(*look)
            if env.done:
                break
        facts = env.revealed().facts
        expected = [f for recep, objs in shown.items()
                    for f in ([("saw", f"{o} in {recep}") for o in objs] if objs else [("empty", recep)])]
        assert list(facts) == expected and facts  # each look's objects, nothing from a receptacle not looked into
        hidden = set(env.receptacles()) - set(shown)
        assert not any(r in s.partition(" in ")[2] or s == r for r in hidden for _, s in facts)
        env.restart()
        assert env.revealed().facts == () and env.steps() == ()  # a new attempt starts afresh
    assert not env.compact_observation().startswith("searched")


def test_the_searching_expert_wins_more_in_later_attempts_of_a_replayed_game(alfworld_games: Path) -> None:
    from mage_core.envs.alfworld.expert import act

    env = make(alfworld_games)  # the protocol's 10 turns, no planner: the expert reads what a player reads
    rng = np.random.default_rng(0)
    wins = [0, 0, 0]
    for gamefile in env.games:
        env.set_game(gamefile)
        memory = []
        for attempt in range(3):
            if attempt:
                env.restart()
            while not env.done:
                command = act(env, rng, memory)
                assert command in env.legal_actions()
                env.step(command)
            wins[attempt] += env.won
            memory.append(env.revealed())
            if attempt and memory[0].subjects("saw"):  # a later attempt starts where the memory points
                goal_seen = [s for s in memory[0].subjects("saw") if s.split(" ")[0] in env.task]
                if goal_seen and not env.task.startswith("look"):
                    assert env.steps()[0][0] == f"go to {goal_seen[0].partition(' in ')[2]}"
    # what the memory hands down: more wins later than first (recorded on these six games of seed 0:
    # 3, 5, 5; the game lost throughout needs more than 10 turns even when everything is known)
    assert wins[0] < wins[1] <= wins[2]


def test_a_memory_of_another_game_or_a_room_it_does_not_have_is_refused(alfworld_games: Path) -> None:
    from mage_core.envs.alfworld.expert import act
    from mage_core.envs.base import Revealed

    env = make(alfworld_games)
    env.set_game(env.games[0])
    key, rng = env.task_key(), np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"^ALFWorld expert: memory item 1 was learnt on another game"):
        act(env, rng, [Revealed("alfworld (define (problem other))", (("empty", "drawer 1"),))])
    with pytest.raises(ValueError, match=r"^ALFWorld expert: memory item 2 has a fact of kind 'mine'"):
        act(env, rng, [Revealed(key, ()), Revealed(key, (("mine", "(1, 1)"),))])
    with pytest.raises(ValueError, match=r"^ALFWorld expert: memory item 1 names receptacle 'spaceship 9' "
                                         r"\('mug 1 in spaceship 9'\), not one of this room's \d+$"):
        act(env, rng, [Revealed(key, (("saw", "mug 1 in spaceship 9"),))])


def test_the_memory_line_in_both_styles(alfworld_games: Path) -> None:
    from mage_core.envs.base import Revealed

    env = make(alfworld_games)
    env.set_game(next(g for g in env.games if "pick_and_place_simple" in g))
    goal = E.knowledge.parse_goal(env.task)
    rooms = env.receptacles()
    facts = ((("saw", f"{goal.obj} 1 in {rooms[0]}"), ("saw", f"zzz 2 in {rooms[0]}"), ("empty", rooms[1]),
              ("saw", f"zzz 3 in {rooms[2]}")))
    revealed = Revealed(env.task_key(), facts)
    assert env.memory_line(revealed, "paper") == (f"saw: {goal.obj} 1 in {rooms[0]}, zzz 2 in {rooms[0]}, "
                                                  f"zzz 3 in {rooms[2]}; empty: {rooms[1]}.")
    # compact: where the goal's object was seen, then the other receptacles looked into
    assert env.memory_line(revealed, "compact") == f"{goal.obj} 1 in {rooms[0]} nothing in {rooms[1]} {rooms[2]}"


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


def test_the_compact_state_keeps_what_the_attempt_found(alfworld_games: Path) -> None:
    # the compact prompt holds the current state only: what the attempt has found so far rides in it
    from mage_core.envs.alfworld.expert import act
    from mage_core.envs.alfworld.knowledge import TRANSFORM

    env = make(alfworld_games, max_turns=30)
    env.set_game(next(g for g in env.games if "pick_heat" in g))
    goal = E.knowledge.parse_goal(env.task)
    rng, seen_goal_object = np.random.default_rng(0), False
    while not env.done:
        command = act(env, rng)
        env.step(command)
        if env.done:
            break
        compact = env.compact_observation()
        held = [o for o in env.steps() if o[0].startswith(f"take {goal.obj} ")]
        if held:  # once taken it is no longer where it was seen
            taken = held[0][0].split(" from ")[0].removeprefix("take ")
            assert f"{taken} in " not in compact
        elif any(f" {goal.obj} " in f" {f} " for _, f in env.steps()):
            seen_goal_object = True
            assert any(f"{o} in {r}" in compact for o, r in [s.split(" in ") for _, s in env.revealed().facts
                                                             if s.startswith(goal.obj + " ")])
        if any(TRANSFORM.match(a) for a, _ in env.steps()):
            assert f"hot {taken}" in compact
    assert env.won and seen_goal_object


@pytest.mark.parametrize("style", ["compact", "paper"])
def test_a_later_attempts_prompt_carries_what_the_earlier_revealed(alfworld_games: Path, style: str) -> None:
    from mage_core.envs.alfworld.expert import act
    from mage_core.rollout.imitation import play_expert
    from mage_core.rollout.meta_episode import MetaEpisode, MetaEpisodeSpec
    from mage_core.trainers.meta_rl import meta_settings

    cfg = parse_config({"env": {"name": "alfworld", "alfworld": {"data_path": str(alfworld_games)}},
                        "rollout": {"restart": "same", "early_stop": False},
                        "policy": {"prompt_style": style, "memory": "history_only"}})
    settings = meta_settings(cfg, "alfworld", num_episodes=2, reflect=True)
    meta = MetaEpisode(MetaEpisodeSpec("alfworld", None, 0, 0, 0), make(alfworld_games), settings,
                       lambda text: [len(text)], lambda text: [1])
    records = play_expert([meta], act, [np.random.default_rng(0)])
    first = meta.context.memory[0]
    assert first.facts is not None and first.facts.facts and first.facts_line == meta.env.memory_line(first.facts, style)
    later = next(r["prompt"] for r in records if r["attempt"] == 1)
    if style == "compact":
        assert f"ep1 task " in later and first.facts_line in later
    else:
        assert f"What trial #1 revealed: {first.facts.line('paper')}" in later
    assert all(first.facts_line not in r["prompt"] for r in records if r["attempt"] == 0)


def test_the_expert_benchmark_counts_what_a_direct_play_counts(alfworld_games: Path, capsys) -> None:
    # benchmarks/alfworld_expert.py (the figures of docs/learning.md) against the loop written out here
    import importlib.util

    from mage_core.envs.alfworld.expert import act

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "alfworld_expert.py"
    spec = importlib.util.spec_from_file_location("alfworld_expert", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    env, wins = make(alfworld_games), [0, 0]
    for gamefile in env.games:
        env.set_game(gamefile)
        memory = []
        for attempt in range(2):
            if attempt:
                env.restart()
            while not env.done:
                env.step(act(env, np.random.default_rng(0), memory))
            wins[attempt] += env.won
            memory.append(env.revealed())
    games, shares, _ = bench.play(str(alfworld_games), "train", attempts=2, turns=10, limit=None)
    assert games == 6 and shares == [w / 6 for w in wins]
    assert bench.main(["--data", str(alfworld_games), "--split", "train", "--limit", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["train", "2"]
    with pytest.raises(SystemExit):
        bench.main(["--attempts", "0"])
