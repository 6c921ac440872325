"""What a MineSweeper attempt reveals (issue 41): the facts its memory line shows, the expert
that reads them, the exact ceiling of a board known, and the checks on bad memory."""

from __future__ import annotations

import numpy as np
import pytest

from mage_core.config import ConfigError, parse_config
from mage_core.envs.base import Outcome, Revealed
from mage_core.envs.minesweeper.board import Board, fewest_reveals
from mage_core.envs.minesweeper.env import MineSweeperEnv
from mage_core.envs.minesweeper.expert import act, clearable
from mage_core.envs.minesweeper.params import MineSweeperSettings
from mage_core.rollout.imitation import play_expert
from mage_core.rollout.meta_episode import MetaEpisode, MetaEpisodeSpec, Response
from mage_core.trainers.meta_rl import meta_settings

pytestmark = pytest.mark.unit

# A 4 x 4 board, 2 mines at (1, 4) and (4, 4) (1-based), its first reveal at (1, 1).
MINES = frozenset({(0, 3), (3, 3)})


def _board() -> Board:
    return Board(4, 4, MINES, frozenset()).reveal((0, 0))


def _env() -> MineSweeperEnv:
    settings = MineSweeperSettings(board_size=4, num_mines=2, max_turns=7)
    return MineSweeperEnv(settings, np.random.default_rng(0), board=_board())


def test_the_first_board_is_what_the_rules_give():
    # Worked out by hand: (1, 1) has no mine around and opens its neighbours, recursively, so
    # columns 1-3 open (column 3 counts the mines of column 4) and column 4 stays closed.
    board = _board()
    assert [" ".join(row) for row in board.symbol_rows()] == [". . 1 ?"] * 4
    assert fewest_reveals(board) == 2  # (2, 4) and (3, 4), each counting 1: no region to open


def test_fewest_reveals_by_hand():
    # 3 x 3, one mine in the middle: every other cell counts 1, none opens another: 8 reveals.
    middle = Board(3, 3, frozenset({(1, 1)}), frozenset())
    assert fewest_reveals(middle) == 8
    assert fewest_reveals(Board(3, 3, frozenset({(1, 1)}), frozenset({(0, 0)}))) == 7
    # 4 x 4, one mine in a corner: the twelve zeros are one region and open the three 1s.
    corner = Board(4, 4, frozenset({(0, 0)}), frozenset())
    assert fewest_reveals(corner) == 1
    # 1 x 5 with a mine in the middle: (0,0) is a zero that opens (0,1); (0,3) likewise (0,4):
    # two regions, two reveals.
    row = Board(1, 5, frozenset({(0, 2)}), frozenset())
    assert fewest_reveals(row) == 2


def test_clearable_compares_fewest_reveals_with_the_turn_limit():
    env = _env()
    env.reset()
    need = fewest_reveals(env.board)
    assert clearable(env) is (need <= 7)
    tight = MineSweeperEnv(MineSweeperSettings(board_size=4, num_mines=2, max_turns=max(1, need - 1)),
                           np.random.default_rng(0), board=_board())
    tight.reset()
    assert clearable(tight) is False


def _meta(style: str) -> MetaEpisode:
    cfg = parse_config({"env": {"name": "minesweeper", "minesweeper": {"board_size": 4, "num_mines": 2}},
                        "rollout": {"restart": "same", "early_stop": False},
                        "policy": {"prompt_style": style, "memory": "history_only"}})
    settings = meta_settings(cfg, "minesweeper", num_episodes=3, reflect=True)
    return MetaEpisode(MetaEpisodeSpec("minesweeper", None, 0, 0, 0), _env(), settings,
                       lambda text: [len(text)], lambda text: [len(text) + 1])


def _play(meta: MetaEpisode, action: str) -> None:
    request = meta.request()
    meta.apply(request, Response(action, 0.0, choice=request.candidate_texts.index(action)))


@pytest.mark.parametrize("style", ["compact", "paper"])
def test_a_replayed_boards_memory_carries_each_fact_and_nothing_hidden(style):
    meta = _meta(style)
    _play(meta, "(2, 4)")  # a safe cell (it counts 1), then the mine at (1, 4)
    _play(meta, "(1, 4)")
    assert meta.episodes[0].outcome is Outcome.LOSS
    facts = meta.context.memory[0].facts
    assert facts == Revealed(meta.env.task_key(), (("mine", "(1, 4)"), ("safe", "(2, 4)")))
    prompt = meta.request().prompt
    if style == "compact":
        assert prompt.startswith("mines ep1 . . 1 * / . . 1 1 / . . 1 ? / . . 1 ? boom mine (1,4) safe (2,4) ep2 ")
    else:
        assert "Then the task was NOT successfully completed.\nWhat trial #1 revealed: mine: (1, 4); safe: (2, 4)." in prompt
    # The other mine, (4, 4), was never revealed: no fact names it.
    assert "4, 4" not in meta.context.memory[0].facts_line and "4,4" not in meta.context.memory[0].facts_line


def test_the_expert_replays_remembered_safe_cells_and_never_reveals_a_known_mine():
    env = _env()
    env.reset()
    # By hand, this board's numbers alone place both mines ((1, 4) and (4, 4)): without a
    # memory (2, 4) and (3, 4) are both sure safe and ties are drawn; with one, the remembered
    # safe cell comes first, every time.
    assert {act(env, np.random.default_rng(seed)) for seed in range(20)} == {"(2, 4)", "(3, 4)"}
    memory = [Revealed(env.task_key(), (("mine", "(1, 4)"), ("safe", "(2, 4)")))]
    assert {act(env, np.random.default_rng(seed), memory) for seed in range(20)} == {"(2, 4)"}
    env.step("(2, 4)")
    assert {act(env, np.random.default_rng(seed), memory) for seed in range(20)} == {"(3, 4)"}
    assert env.step("(3, 4)").outcome is Outcome.WIN


def test_on_replays_the_experts_later_attempts_beat_its_first():
    """200 boards of the default settings, three attempts each: the expert's success by
    attempt, next to the boards' exact ceiling (the board known)."""
    settings = MineSweeperSettings()
    by_attempt, ceiling = np.zeros(3), 0
    for seed in range(200):
        env = MineSweeperEnv(settings, np.random.default_rng(seed))
        env.reset()
        ceiling += clearable(env)
        rng, memory = np.random.default_rng(seed + 1000), []
        for k in range(3):
            if k:
                env.restart()
            while not env.done:
                result = env.step(act(env, rng, memory))
            by_attempt[k] += result.outcome is Outcome.WIN
            memory.append(env.revealed())
    assert by_attempt[2] > by_attempt[0] and by_attempt[1] > by_attempt[0]
    assert by_attempt[2] <= ceiling  # no play beats the board known


def test_bad_memory_is_refused_with_one_line_naming_it():
    env = _env()
    env.reset()
    other = Revealed("minesweeper 4x4 mines [(0, 0), (1, 1)] opened [(3, 3)]", (("mine", "(1, 1)"),))
    with pytest.raises(ValueError, match=r"memory item 1 was learnt on another board") as err:
        act(env, np.random.default_rng(0), [other])
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"memory item 1 names cell '\(5, 1\)', not a cell of this 4x4 board"):
        act(env, np.random.default_rng(0), [Revealed(env.task_key(), (("safe", "(5, 1)"),))])
    with pytest.raises(ValueError, match=r"a fact of kind 'receptacle'"):
        act(env, np.random.default_rng(0), [Revealed(env.task_key(), (("receptacle", "(1, 1)"),))])
    with pytest.raises(ValueError, match=r"both a mine and safe"):
        act(env, np.random.default_rng(0), [Revealed(env.task_key(), (("mine", "(1, 4)"), ("safe", "(1, 4)")))])


def test_demonstrations_hand_the_expert_the_memory_the_policy_reads():
    seen = []

    def recording(env, rng, memory=()):
        seen.append(list(memory))
        return act(env, rng, memory)

    meta = _meta("compact")
    play_expert([meta], recording, [np.random.default_rng(3)], detour=1.0)
    # Attempt 1 is all detours: the expert is asked in attempts 2 and 3, with 1 and 2 memories.
    assert {len(m) for m in seen} == {1, 2}
    assert all(m == [e.facts for e in meta.context.memory[:len(m)]] for m in seen)


def test_an_expert_that_reads_its_memory_must_gain_on_replays():
    from mage_core.stages.sft import check_expert_gain

    cfg = parse_config({"env": {"name": "minesweeper"}, "rollout": {"restart": "same"}})

    class Trainer:
        eval_settings = meta_settings(cfg, "minesweeper", num_episodes=3, reflect=True)

    with pytest.raises(ConfigError) as err:
        check_expert_gain(cfg, Trainer(), {"tasks": 100, "success_by_attempt": [0.8, 0.8, 0.79]})
    assert err.value.problems == [
        "env.name minesweeper: its expert reads its memory, yet on the 100 replayed tasks of the selection set its "
        "final attempt won 0.790 against 0.800 in its first, so its demonstrations do not show an earlier attempt "
        "used; nothing was cloned or written (check the task's expert and env.minesweeper's settings)"]
    check_expert_gain(cfg, Trainer(), {"tasks": 100, "success_by_attempt": [0.8, 0.9, 0.9]})
    fresh = parse_config({"env": {"name": "minesweeper"}, "rollout": {"restart": "fresh"}})

    class Fresh:
        eval_settings = meta_settings(fresh, "minesweeper", num_episodes=3, reflect=True)

    check_expert_gain(fresh, Fresh(), {"tasks": 100, "success_by_attempt": [0.8, 0.8, 0.8]})  # no replay: no check
