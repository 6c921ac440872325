"""Sokoban: level rules, BFS solver, reverse-play generator, agent env (docs/method.md section 10).

Hand-made levels carry hand-counted optimal lengths and rewards; the fast
solver and the generator's reverse-BFS distances are checked against a plain
unpruned BFS (equivalence).
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mage_core.envs.base import Env, Outcome
from mage_core.envs.sokoban.env import SokobanEnv
from mage_core.envs.sokoban.params import SokobanSettings
from mage_core.envs.sokoban.generate import LevelGenerationError, generate_level, generate_level_with_stats
from mage_core.envs.sokoban.level import SokobanLevel
from mage_core.envs.sokoban.solver import solve, solve_reference
from mage_core.envs.sokoban.env import sokoban_return_floor
from mage_core.envs.sokoban.generate import _select, reverse_search, room_topology
from mage_core.envs.sokoban.level import cells_of
from mage_core.envs.sokoban.solver import live_cells, state_shift

pytestmark = pytest.mark.unit

# Player must first step down, then push twice: 3 moves.
AROUND = ["#######", "#P____#", "#_X_O_#", "#######"]
# Straight push: 2 moves.
STRAIGHT = ["######", "#PX_O#", "######"]
# Two boxes: push the top one twice (2), walk left, left, down (3), push twice (2) = 7.
TWO_ROWS = ["#######", "#_____#", "#PX_O_#", "#_X_O_#", "#######"]
# Box in a non-target corner: unsolvable.
CORNER = ["#####", "#X_O#", "#P__#", "#####"]
# Box on a target, a free target two cells to its right, the second box out of the way.
OFF_AND_ON = ["#######", "#P√_O_#", "#____X#", "#######"]
# Two boxes in a row: the first cannot be pushed into the second.
BLOCKED = ["#######", "#PXX_O#", "#____O#", "#######"]


def lv(rows: list[str]) -> SokobanLevel:
    return SokobanLevel.from_rows(rows)


def fixed_env(rows: list[str], **overrides: object) -> SokobanEnv:
    level = lv(rows)
    env = SokobanEnv(SokobanSettings(num_boxes=level.num_boxes, **overrides), np.random.default_rng(0), level)
    env.reset()
    return env


# ----- level ------------------------------------------------------------------
def test_level_round_trip_and_encoding() -> None:
    level = lv(TWO_ROWS)
    assert level.rows() == TWO_ROWS
    assert (level.height, level.width, level.num_boxes) == (5, 7, 2)
    assert level.player == 2 * 7 + 1
    assert cells_of(level.boxes) == [2 * 7 + 2, 3 * 7 + 2]
    assert cells_of(level.targets) == [2 * 7 + 4, 3 * 7 + 4]
    assert lv(OFF_AND_ON).boxes_on_target == 1
    with_targets = ["######", "#S√X_#", "######"]  # player on target, box on target, box
    assert lv(with_targets).rows() == with_targets and lv(with_targets).boxes_on_target == 1


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["#P?#"], "unknown symbol"),
        (["#PP√#"], "exactly one player"),
        (["#####", "#PX_#", "#####"], "as many boxes as targets"),
        (["#P#", "#"], "same length"),
    ],
)
def test_level_rejects_bad_rows(rows: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SokobanLevel.from_rows(rows)


def test_level_move_rules() -> None:
    level = lv(STRAIGHT)
    assert level.move("left") == level  # wall bump: nothing changes
    pushed = level.move("right")
    assert pushed.rows() == ["######", "#_PXO#", "######"]
    assert pushed.move("right").is_solved
    assert lv(BLOCKED).move("right") == lv(BLOCKED)  # box against box
    with pytest.raises(ValueError, match="direction must be one of"):
        level.move("north")


def test_live_cells_exclude_corners_and_walls() -> None:
    level = lv(CORNER)
    live = live_cells(level.height, level.width, level.walls, level.targets)
    # Only the target (1,3) and (1,2) (pushed right from (1,1)) are live: the corner
    # (1,1) has a wall on its left, and no box on row 2 can be pushed up from row 3 (wall).
    assert cells_of(live) == [1 * 5 + 2, 1 * 5 + 3]


# ----- solver -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (STRAIGHT, ["right", "right"]),
        (AROUND, ["down", "right", "right"]),
        (["#####", "#P√_#", "#####"], []),
    ],
)
def test_solver_hand_made_exact(rows: list[str], expected: list[str]) -> None:
    assert solve(lv(rows)) == expected
    assert solve_reference(lv(rows)) == expected


def test_solver_two_boxes_hand_counted_seven() -> None:
    moves = solve(lv(TWO_ROWS))
    assert moves is not None and len(moves) == 7
    level = lv(TWO_ROWS)
    for move in moves:
        level = level.move(move)
    assert level.is_solved
    assert len(solve_reference(lv(TWO_ROWS)) or []) == 7


def test_solver_unsolvable_and_move_bound() -> None:
    assert solve(lv(CORNER)) is None
    assert solve_reference(lv(CORNER)) is None
    assert solve(lv(AROUND), max_moves=2) is None  # optimum is 3
    assert solve(lv(AROUND), max_moves=3) == ["down", "right", "right"]
    with pytest.raises(ValueError, match="max_moves"):
        solve(lv(AROUND), max_moves=-1)


@pytest.mark.equivalence
def test_fast_solver_matches_plain_bfs_on_generated_levels() -> None:
    rng = np.random.default_rng(7)
    for num_boxes in (1, 2, 2, 3):
        for _ in range(15):
            level = generate_level(rng, 6, num_boxes)
            fast, plain = solve(level), solve_reference(level)
            assert fast is not None and plain is not None
            assert len(fast) == len(plain)


@pytest.mark.equivalence
def test_fast_solver_matches_plain_bfs_on_random_positions() -> None:
    """Boxes and player dropped anywhere (often unsolvable, often with boxes on
    dead cells): the pruned solver must agree with the plain BFS, None included."""
    rng = np.random.default_rng(8)
    outcomes = set()
    for _ in range(60):
        room = generate_level(rng, 6, 2)
        free = cells_of(((1 << room.num_cells) - 1) & ~room.walls)
        picks = rng.choice(free, size=3, replace=False).tolist()
        level = room.with_state(picks[0], (1 << picks[1]) | (1 << picks[2]))
        fast, plain = solve(level, max_moves=60), solve_reference(level, max_moves=60)
        assert (fast is None) == (plain is None)
        assert fast is None or len(fast) == len(plain or [])
        outcomes.add(fast is None)
    assert outcomes == {True, False}  # both kinds were exercised


# ----- generator ----------------------------------------------------------------
def _connected(floor: list[int], width: int) -> bool:
    cells = set(floor)
    seen = {floor[0]}
    queue = deque([floor[0]])
    while queue:
        c = queue.popleft()
        for n in (c - width, c + width, c - 1, c + 1):
            if n in cells and n not in seen and (abs(n - c) == width or n // width == c // width):
                seen.add(n)
                queue.append(n)
    return seen == cells


def test_room_topology_walled_border_and_connected_floor() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        walls = room_topology(rng, 6, 6, 20, 0.35)
        floor = cells_of(((1 << 36) - 1) & ~walls)
        assert floor and all(0 < c // 6 < 5 and 0 < c % 6 < 5 for c in floor)
        assert _connected(floor, 6)


@pytest.mark.equivalence
def test_reverse_search_depth_is_optimal_length() -> None:
    level = lv(TWO_ROWS)
    layers, pushes = reverse_search(level.height, level.width, level.walls, level.targets, 30)
    shift = state_shift(level.num_cells)
    rng = np.random.default_rng(1)
    for depth in range(1, len(layers), 2):
        for key in rng.choice(layers[depth], size=min(3, len(layers[depth])), replace=False).tolist():
            state = level.with_state(key & ((1 << shift) - 1), key >> shift)
            assert len(solve_reference(state) or []) == depth
    start = (level.boxes << shift) | level.player
    assert start in layers[7] and pushes[start] == 4


@pytest.mark.parametrize("num_boxes", [1, 2, 3])
def test_generated_levels_respect_bounds_and_replay_to_a_win(num_boxes: int) -> None:
    rng = np.random.default_rng(100 + num_boxes)
    for _ in range(25):
        level, stats = generate_level_with_stats(rng, 6, num_boxes)
        moves = solve(level)
        assert moves is not None and 5 <= len(moves) <= 21
        assert len(moves) == stats.optimal_moves and stats.num_tries >= 1
        assert level.num_boxes == num_boxes and level.boxes_on_target == 0
        env = SokobanEnv(SokobanSettings(num_boxes=num_boxes), np.random.default_rng(0), level)
        env.reset()
        chunks = [", ".join(moves[i : i + 3]) for i in range(0, len(moves), 3)]
        results = [env.step(chunk) for chunk in chunks]
        assert results[-1].outcome is Outcome.WIN and all(not r.done for r in results[:-1])


@pytest.mark.parametrize("selection", ["global", "window"])
def test_generated_levels_never_start_on_a_target(selection: str) -> None:
    # gym-sokoban (room_utils.depth_first_search) scores 0 any state in which fewer than
    # num_boxes cells show an empty target: neither a box nor the player may stand on one.
    # Before issue 39 the player could (356 of 2,000 2-box levels of seed 0).
    for num_boxes in (1, 2, 3):
        rng = np.random.default_rng(39 + num_boxes)
        for _ in range(150):
            level = generate_level(rng, 6, num_boxes, selection=selection)
            assert level.boxes & level.targets == 0
            assert not level.targets >> level.player & 1, str(level)


def test_selection_skips_a_higher_score_with_the_player_on_a_target() -> None:
    # Hand-made: a 5x5 grid, one box at cell 7 (row 1, col 2), the target at cell 12 (row 2,
    # col 2): displacement 1. State A has the player on the target and 3 pushes (score 3 x 1),
    # state B the player at cell 6 and 1 push (score 1 x 1). gym-sokoban scores A 0: B is chosen.
    shift = state_shift(25)
    boxes, target = 1 << 7, 1 << 12
    on_target, off_target = (boxes << shift) | 12, (boxes << shift) | 6
    layers = [[], [on_target, off_target]]
    pushes = {on_target: 3, off_target: 1}
    chosen = _select(np.random.default_rng(0), layers, pushes, target, 5, shift, range(2))
    assert chosen == (off_target, 1, 1)
    assert _select(np.random.default_rng(0), [[], [on_target]], pushes, target, 5, shift, range(2)) is None


def test_generation_window_mode_and_tight_bounds() -> None:
    rng = np.random.default_rng(5)
    for _ in range(10):
        level, stats = generate_level_with_stats(rng, 6, 2, 10, 12, selection="window")
        assert stats.optimal_moves in (10, 11, 12)
        assert len(solve(level) or []) == stats.optimal_moves


def test_generation_same_seed_same_level_different_seeds_differ() -> None:
    first = generate_level(np.random.default_rng(42))
    assert generate_level(np.random.default_rng(42)) == first
    levels = {generate_level(np.random.default_rng(seed)) for seed in range(8)}
    assert len(levels) >= 7


def test_generation_errors() -> None:
    with pytest.raises(LevelGenerationError, match="in 5 rooms"):
        generate_level(np.random.default_rng(0), 6, 2, 90, 95, max_tries=5)
    with pytest.raises(ValueError, match="selection must be one of"):
        generate_level(np.random.default_rng(0), selection="best")
    with pytest.raises(ValueError, match="min_solution_moves <= max_solution_moves"):
        generate_level(np.random.default_rng(0), 6, 2, 9, 5)
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        generate_level(42)  # type: ignore[arg-type]


# ----- env ----------------------------------------------------------------------
def test_env_protocol_and_settings_validation() -> None:
    env = SokobanEnv(SokobanSettings(), np.random.default_rng(0))
    assert isinstance(env, Env) and env.name == "sokoban"
    with pytest.raises(RuntimeError, match="reset"):
        env.observation()
    with pytest.raises(ValueError, match=r"num_boxes\s+Input should be less than or equal to 3"):
        SokobanSettings(num_boxes=4)
    with pytest.raises(ValueError, match=r"max_solution_moves\s+Value error, must be >= min_solution_moves \(9\)"):
        SokobanSettings(min_solution_moves=9, max_solution_moves=3)
    with pytest.raises(ValueError, match=r"max_solution_moves\s+Value error, must be >= min_solution_moves \(30\)"):
        SokobanSettings(min_solution_moves=30)  # against the default maximum (21)
    with pytest.raises(ValueError, match="settings.num_boxes is 2"):
        SokobanEnv(SokobanSettings(), np.random.default_rng(0), lv(STRAIGHT))


def test_observation_text_exact() -> None:
    env = fixed_env(STRAIGHT)
    assert env.observation() == (
        "Legend: # wall, _ floor, O target, X box, √ box on target, P player, S player on target. "
        "Row 1 is the top, column 1 the left.\n"
        "  1 2 3 4 5 6\n"
        "1 # # # # # #\n"
        "2 # P X _ O #\n"
        "3 # # # # # #\n"
        "Boxes on targets: 0 of 1"
    )


def test_rewards_sum_every_primitive_move_and_stop_when_solved() -> None:
    env = fixed_env(STRAIGHT)
    result = env.step("right, right, left")  # solved after 2 moves; "left" never applied
    assert result.reward == pytest.approx(2 * -0.1 + 1.0 + 10.0)
    assert result.done and result.outcome is Outcome.WIN and not result.invalid
    assert result.info == {"boxes_on_target": 1, "moves_applied": 2, "solved": True}
    assert env.level.rows() == ["######", "#__P√#", "######"]
    assert env.legal_actions() == []
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("up")


def test_box_off_and_on_target_rewards_counted_per_move() -> None:
    env = fixed_env(OFF_AND_ON)
    result = env.step("right, right, right")  # off (-1), on (+1), off (-1), 3 steps
    assert result.reward == pytest.approx(3 * -0.1 - 1.0 + 1.0 - 1.0)
    assert result.info == {"boxes_on_target": 0, "moves_applied": 3, "solved": False}
    assert env.level.rows() == ["#######", "#_O_SX#", "#____X#", "#######"]


def test_wall_bumps_and_blocked_pushes_cost_a_step() -> None:
    env = fixed_env(BLOCKED)
    result = env.step("right, up, left")  # box into box, wall, wall
    assert result.reward == pytest.approx(-0.3)
    assert result.info["moves_applied"] == 3
    assert env.level == lv(BLOCKED)
    assert env.step("down, right, right").reward == pytest.approx(-0.3)
    assert env.level.rows()[2] == "#__P_O#"


def test_an_unsolvable_position_does_not_end_the_episode() -> None:
    # LaMer ends an attempt as soon as its BFS finds no solution; this project plays on to the
    # turn limit (docs/environments.md, "Sokoban"). Hand-made: the player walks right, right, down
    # and pushes the box left into the corner (2, 1): no solution exists after turn 2.
    env = fixed_env(["######", "#P___#", "#_X_O#", "######"], max_turns=4)
    assert solve(env.level) == ["down", "right", "right"]
    first, second = env.step("right, right, down"), env.step("left")
    assert env.level.rows() == ["######", "#____#", "#XP_O#", "######"] and solve(env.level) is None
    assert (first.reward, second.reward) == (pytest.approx(-0.3), pytest.approx(-0.1))
    assert not second.done and env.legal_actions()
    third, last = env.step("up, up"), env.step("right")
    assert not third.done and last.done and last.outcome is Outcome.TIMEOUT
    assert (third.reward, last.reward) == (pytest.approx(-0.2), pytest.approx(-0.1))


def test_invalid_action_timeout_and_restart() -> None:
    env = fixed_env(AROUND, max_turns=3)
    start_text = env.observation()
    invalid = env.step(None)
    assert (invalid.reward, invalid.invalid, invalid.done, env.turn) == (0.0, True, False, 1)
    assert invalid.info["moves_applied"] == 0 and env.observation() == start_text
    assert env.step("down, right").reward == pytest.approx(-0.2)  # the push leaves the box off the target
    last = env.step("up")
    assert last.done and last.outcome is Outcome.TIMEOUT and env.turn == 3
    # Stalling rule (docs/rewards.md): the floor is 3 turns x 3 moves x -0.1 = -0.9 (no box starts on a
    # target), so the last turn pays -0.9 - (-0.2) = -0.7 instead of its own -0.1.
    assert env.legal_return_floor() == pytest.approx(-0.9)
    assert last.reward == pytest.approx(-0.7)
    env.restart()
    assert (env.turn, env.done, env.observation(), env.level) == (0, False, start_text, lv(AROUND))
    with pytest.raises(ValueError, match="canonical text"):
        env.step("Down")


def test_stalled_timeout_pays_the_floor_and_a_legal_timeout_its_own_reward() -> None:
    env = fixed_env(AROUND, max_turns=2)  # floor: 2 turns x 3 moves x -0.1 = -0.6
    assert [env.step("up").reward for _ in range(2)] == pytest.approx([-0.1, -0.1])  # wall bumps, legal
    env.restart()
    assert [env.step(None).reward, env.step("up").reward] == pytest.approx([0.0, -0.6])
    env.restart()  # the invalid turn does not carry over, and may come last
    assert [env.step("up").reward, env.step(None).reward] == pytest.approx([-0.1, -0.5])


def test_floor_counts_every_box_that_starts_on_a_target() -> None:
    assert fixed_env(OFF_AND_ON).legal_return_floor() == pytest.approx(7 * 3 * -0.1 - 1.0)
    env = fixed_env(OFF_AND_ON, max_turns=2)  # floor: 6 x -0.1 - 1 = -1.6
    assert env.step(None).reward == 0.0
    assert env.step("right").reward == pytest.approx(-1.6)  # its own reward would be -1.1 (box off)


def test_floor_of_other_reward_settings_is_reached_by_legal_play() -> None:
    # box_on_target 0.5 < 1: a box pushed off, on and off again loses 1.5; one turn of 3 moves
    # allows exactly that: floor = 3 x -0.1 - 1 + 0.5 - 1 = -1.8, which legal play reaches.
    settings = SokobanSettings(num_boxes=2, max_turns=1, box_on_target=0.5)
    assert sokoban_return_floor(settings, 1) == pytest.approx(-1.8)
    assert fixed_env(OFF_AND_ON, max_turns=1, box_on_target=0.5).step("right, right, right").reward == \
        pytest.approx(-1.8)
    # A negative solved bonus lowers the floor by itself; a positive step reward never raises it.
    assert sokoban_return_floor(SokobanSettings(all_boxes_on_target=-2.0), 0) == pytest.approx(-2.1 - 2.0)
    assert sokoban_return_floor(SokobanSettings(step_penalty=0.1), 2) == pytest.approx(-2.0)


def test_reset_draws_new_levels_and_restart_replays_exactly() -> None:
    env = SokobanEnv(SokobanSettings(), np.random.default_rng(11))
    env.reset()
    first = env.initial_level
    moves = solve(first) or []
    env.step(", ".join(moves[:3]))
    env.restart()
    assert env.level == first and env.turn == 0
    env.reset()
    assert env.initial_level != first
    same = SokobanEnv(SokobanSettings(), np.random.default_rng(11))
    same.reset()
    assert same.initial_level == first


def test_legal_actions_and_parsing() -> None:
    env = fixed_env(AROUND)
    actions = env.legal_actions()
    assert len(actions) == 4 + 16 + 64 == len(set(actions))
    assert actions[:5] == ["up", "down", "left", "right", "up, up"]
    assert actions[-1] == "right, right, right"
    assert all(env.parse_action(f"<action>{a}</action>") == a for a in actions)
    parse = env.parse_action
    assert parse("think <action>up</action> then <action>Up, LEFT,down</action>") == "up, left, down"
    assert parse("<action> right  left </action>") == "right, left"
    for bad in ["up, left", "<action>u, l</action>", "<action>up, up, up, up</action>",
                "<action></action>", "<action>up, north</action>", "<action>up.</action>"]:
        assert parse(bad) is None, bad


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parse_action_never_raises(text: str) -> None:
    env = fixed_env(AROUND)
    for response in (text, f"<action>{text}</action>"):
        parsed = env.parse_action(response)
        assert parsed is None or parsed in env.legal_actions()
