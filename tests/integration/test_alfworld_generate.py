"""The fast ALFWorld generator writes the games the reference path writes: TextWorld's
engine with this project's memos (cache.py, derive.py) and games made ahead by worker
processes (dataset.py) against the engine as TextWorld ships it, in one process; and the
order the loop predicts and takes is the order of the plain nested loops it replaced."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

G = pytest.importorskip("mage_core.envs.alfworld.generate", reason="the alfworld extra (make setup installs it)")

KINDS = ["pick_and_place_simple", "pick_two_obj_and_place"]


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under ``root``."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def _plain_loop_calls(seed: int, counts: dict, kinds: list, kept) -> list[tuple]:
    """The calls of generate_dataset's loop as it was written before the workers (c64d8ac),
    ``kept(call)`` standing for generate_game's outcome and the duplicate check."""
    calls = []
    for index, (split, count) in enumerate(sorted(counts.items())):
        rng = random.Random(f"{seed}-{split}")
        plans = G.split_floor_plans(split)
        for task_type in kinds:
            for game in range(count):
                for tries in range(20):
                    call = (split, task_type, rng.choice(plans), seed * 100_000 + index * 10_000 + game * 100 + tries)
                    calls.append(call)
                    if kept(call):
                        break
                else:
                    raise RuntimeError(f"{split}: no solvable {task_type} game in 20 floor plans (seed {seed})")
    return calls


@pytest.mark.parametrize("seed", [0, 3])
def test_the_order_and_its_prediction_are_the_plain_loops(seed: int) -> None:
    from mage_core.envs.alfworld.dataset import Order

    counts = {"train": 2, "eval_in_distribution": 1, "eval_out_of_distribution": 1}
    kinds = list(G.TASK_TYPES.values())

    def kept(call: tuple) -> bool:  # a try with a task keeps its game, but one in five fails (expert, duplicate)
        return G.has_task(call[2], call[1], call[3]) and call[3] % 5 != 1

    expected = _plain_loop_calls(seed, counts, kinds, kept)
    order, taken, predictions = Order(seed, counts, kinds), [], []
    while (call := order.call()) is not None:
        predictions.append(order.upcoming(4))
        taken.append((call.split, call.task_type, call.scene_num, call.seed))
        order.advance(kept(taken[-1]))
    assert taken == expected
    for position, predicted in enumerate(predictions):  # right as far as no try with a task fails
        ahead = [(c.split, c.task_type, c.scene_num, c.seed) for c in predicted]
        assert ahead[0] == expected[position]
        right = next((i + 1 for i, c in enumerate(ahead) if G.has_task(c[2], c[1], c[3]) and not kept(c)), len(ahead))
        assert ahead[:right] == expected[position:position + right]


def test_a_task_type_without_a_game_in_20_floor_plans_stops_the_order() -> None:
    from mage_core.envs.alfworld.dataset import Order

    order = Order(0, {"train": 1}, ["pick_heat_then_place_in_recep"])
    with pytest.raises(RuntimeError, match=r"train: no solvable pick_heat_then_place_in_recep game in 20 floor plans"):
        for _ in range(20):
            order.call()
            order.advance(False)


def test_workers_write_the_same_games_as_one_process(tmp_path: Path) -> None:
    from mage_core.envs.alfworld import dataset

    for workers in (0, 1):
        dataset.generate_dataset(str(tmp_path / str(workers)), 0, {"train": 1}, task_types=KINDS, workers=workers)
    assert _tree(tmp_path / "1") == _tree(tmp_path / "0")
    assert len([p for p in _tree(tmp_path / "1") if p.endswith("game.tw-pddl")]) == 2
    assert not list(tmp_path.glob(".alfworld-scratch-*"))  # the scratch folders are gone


@pytest.mark.slow
def test_the_fast_generator_writes_the_same_games_as_textworlds_engine(tmp_path: Path, monkeypatch) -> None:
    # the reference: TextWorld's engine without any memo (cache.install turned into nothing
    # while it runs), one process; then the fast path: memos and a worker
    from mage_core.envs.alfworld import cache, dataset

    counts = {"train": 1, "eval_out_of_distribution": 1}
    cache.uninstall()
    with monkeypatch.context() as patch:
        patch.setattr(cache, "install", lambda: None)
        patch.setattr(dataset, "_ENGINES", {})
        dataset.generate_dataset(str(tmp_path / "reference"), 0, counts, task_types=KINDS, workers=0)
    cache.install()
    dataset.generate_dataset(str(tmp_path / "fast"), 0, counts, task_types=KINDS, workers=1)
    reference = _tree(tmp_path / "reference")
    assert len([p for p in reference if p.endswith("game.tw-pddl")]) == 4
    assert _tree(tmp_path / "fast") == reference
