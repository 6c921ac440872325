"""Each trained run against its starting model under its own protocol, paired (issue 39): a
tiny MineSweeper MAGE and GRPO run, their starting model evaluated as `warm_start` (MAGE's
protocol) and as `react` (GRPO's), then the report's section, its figures recomputed here from
the two trial tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mage_core.config import parse_config
from mage_core.stages.evaluate import evaluate
from mage_core.stages.report import report
from mage_core.stages.run_settings import describe
from mage_core.stages.train import train

pytestmark = pytest.mark.integration

RUNS = {"minesweeper-mage": ("minesweeper", "mage"), "minesweeper-grpo": ("minesweeper", "grpo"),
        "minesweeper-warm_start": ("minesweeper", "warm_start"), "minesweeper-react": ("minesweeper", "react")}
PER_PAIR = 12


def params(method: str) -> dict[str, Any]:
    return {"env": {"name": "minesweeper"}, "tournament": {"matches": []}, "rollout": {"restart": "same"},
            "algorithm": {"preset": method}, "reproduce": {"eval_per_pair": PER_PAIR},
            "train": {"iterations": 2, "groups_per_iteration": 2, "eval_every": 0, "checkpoint_every": 2},
            "evaluation": {"meta_episodes_per_opponent_seat": 2}}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("artifacts")
    train_root, eval_root = root / "train", root / "eval"
    for run, (_, method) in RUNS.items():
        cfg = parse_config(params(method))
        train(cfg, train_root / run)  # an evaluation-only preset trains 0 iterations: best/ is its start
        evaluate(cfg, train_root / run / "best", eval_root / run, "in_domain", per_opponent_seat=PER_PAIR)
    settings = {run: describe(parse_config(params(method)), None, "paper_minesweeper")
                for run, (_, method) in RUNS.items()}
    out = root / "reports"
    report(RUNS, eval_root, train_root, out, settings, project_dir=root)
    return {"eval": eval_root, "text": (out / "report.md").read_text()}


def final_successes(eval_root: Path, run: str) -> pd.Series:
    t = pd.read_parquet(eval_root / run / "trials.parquet")
    return t[t.episode == 3].set_index("meta_episode").success.astype(float)


@pytest.mark.parametrize("run, baseline", [("minesweeper-mage", "minesweeper-warm_start"),
                                           ("minesweeper-grpo", "minesweeper-react")])
def test_each_trained_run_meets_its_starting_model_under_its_own_protocol(outputs: dict[str, Any], run: str,
                                                                          baseline: str) -> None:
    text = outputs["text"]
    assert "### Does training beat its starting point? In-domain final-episode success, paired" in text
    mine, theirs = final_successes(outputs["eval"], run), final_successes(outputs["eval"], baseline)
    assert len(mine) == len(theirs) == PER_PAIR  # no early stop in these runs: every meta-episode played 3
    diff = (mine - theirs).to_numpy()
    method, base_method = RUNS[run][1], RUNS[baseline][1]
    line = next(line for line in text.splitlines() if line.startswith(f"| MineSweeper | {method} | {base_method} "))
    assert f"(`{baseline}`) | {theirs.mean():.3f} | {mine.mean():.3f} | {diff.mean():+.3f} [" in line
    # the other protocol's starting model is never this run's baseline
    other = {"warm_start": "react", "react": "warm_start"}[base_method]
    assert not any(line.startswith(f"| MineSweeper | {method} | {other} ") for line in text.splitlines())


def test_the_starting_model_under_both_protocols_played_the_same_tasks(outputs: dict[str, Any]) -> None:
    seeds = {run: pd.read_parquet(outputs["eval"] / run / "trials.parquet").groupby("meta_episode").task_seed.first()
             for run in RUNS}
    assert all(s.equals(seeds["minesweeper-mage"]) for s in seeds.values())


def test_the_later_attempt_table_shows_the_boards_ceiling_recomputed_from_their_seeds(outputs: dict[str, Any]) -> None:
    """``all/ceiling_known``: the share of the suite's boards that a player knowing the mines
    clears within 7 reveals, recomputed here by redrawing each board from its seed and finding
    its fewest reveals by brute force (a breadth-first search over the sets of opened cells),
    not by ``board.fewest_reveals``'s counting of regions."""
    import numpy as np

    from mage_core.envs.minesweeper.env import MineSweeperEnv
    from mage_core.envs.minesweeper.params import MineSweeperSettings

    def fewest_by_search(board) -> int:
        safe = [c for c in board.cells() if c not in board.mines]
        frontier, depth, seen = [board], 0, {board.opened}
        while frontier:
            if any(b.won for b in frontier):
                return depth
            nxt = []
            for b in frontier:
                for cell in safe:
                    if cell not in b.opened:
                        after = b.reveal(cell)
                        if after.opened not in seen:
                            seen.add(after.opened)
                            nxt.append(after)
            frontier, depth = nxt, depth + 1
        raise AssertionError("no way to clear the board")

    seeds = pd.read_parquet(outputs["eval"] / "minesweeper-mage" / "trials.parquet").groupby("meta_episode").task_seed.first()
    settings = MineSweeperSettings()
    clear = []
    for seed in seeds:
        env = MineSweeperEnv(settings, np.random.default_rng(int(seed)))
        env.reset()
        clear.append(fewest_by_search(env.first_board) <= settings.max_turns)
    expected = sum(clear) / len(clear)
    start = outputs["text"].index("### Does a later attempt do better than the first?")
    rows = [line for line in outputs["text"][start:].split("\n\n#")[0].splitlines() if line.startswith("| MineSweeper | ")]
    assert rows and all(line.endswith(f"| {expected:.3f} |") for line in rows)
