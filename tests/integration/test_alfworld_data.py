"""ALFWorld games made offline: every generated game is won by its walkthrough in
the real engine (alfworld's wrappers over TextWorld's PDDL env), the problem text
is a function of the seed, and a broken game or folder is reported."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from mage_core.cli import main

pytestmark = pytest.mark.integration

G = pytest.importorskip("mage_core.envs.alfworld.generate", reason="the alfworld extra (make setup installs it)")


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("alfworld") / "games"
    assert main(["alfworld", "generate", "--out", str(out), "--train", "1", "--valid-seen", "0",
                 "--valid-unseen", "0"]) == 0
    return out


def test_one_game_of_each_task_type_and_each_walkthrough_wins(games: Path) -> None:
    files = G.game_files(str(games))
    assert len(files) == 6
    plain = games.parent / "plain"
    plain.mkdir()
    assert games.stat().st_mode == plain.stat().st_mode  # published with a plain folder's mode
    kinds = sorted(Path(f).parent.parent.name.split("-")[0] for f in files)
    assert kinds == sorted(G.TASK_TYPES.values())
    env = G.make_play_env()
    for gamefile in files:
        won, steps, problem = G.replay(env, gamefile)
        assert won and problem is None, (gamefile, problem)
        traj = json.loads((Path(gamefile).parent / "traj_data.json").read_text())
        assert traj["task_type"] in G.TASK_TYPES.values()
        assert traj["scene"]["scene_num"] in G.split_floor_plans("train")
        assert set(traj["pddl_params"]) >= {"object_target", "parent_target", "toggle_target", "mrecep_target"}
    # the real engine: an inadmissible command changes nothing
    env.load(files[0])
    state = env.reset()
    assert "Your task is to:" in state["feedback"] and "go to" in " ".join(state["admissible_commands"])
    after, _, _ = env.step("fly to the moon")
    assert after["feedback"].strip() == "Nothing happens."


def test_check_names_the_game_whose_walkthrough_does_not_win(games: Path, tmp_path: Path, capsys) -> None:
    import shutil

    files = [Path(f) for f in G.game_files(str(games))][:2]  # two games: one intact, one broken
    copies = []
    for f in files:
        dest = tmp_path / "games" / f.parent.relative_to(games)
        shutil.copytree(f.parent, dest)
        copies.append(dest / "game.tw-pddl")
    data = json.loads(copies[1].read_text())
    data["walkthrough"] = data["walkthrough"][:-1]  # stops one command short of winning
    copies[1].write_text(json.dumps(data))
    assert main(["alfworld", "check", str(tmp_path / "games")]) == 1
    out = capsys.readouterr().out
    assert out.count("not solvable") == 1 and "ends without winning" in out
    assert main(["alfworld", "check", str(tmp_path / "nowhere")]) == 2


def test_the_problem_is_a_function_of_the_seed_and_ood_uses_other_floor_plans() -> None:
    def problem(seed: int) -> str:
        rng = random.Random(seed)
        scene = G.build_receptacles(G.FloorPlan.load(7), rng)
        params = G.candidate_params(scene, "pick_heat_then_place_in_recep")[0]
        G.populate_objects(scene, params, "pick_heat_then_place_in_recep", rng)
        return G.problem_pddl(scene, G.make_traj_data(scene, "pick_heat_then_place_in_recep", params, seed))

    assert problem(1) == problem(1) and problem(1) != problem(2)
    assert not set(G.split_floor_plans("train")) & set(G.split_floor_plans("eval_out_of_distribution"))


PAYLOAD = "{__import__('os').system('touch PWNED') or ''}"


def _copy_game(games: Path, dest_root: Path) -> Path:
    import shutil

    source = Path(G.game_files(str(games))[0])
    dest = dest_root / source.parent.relative_to(games)
    shutil.copytree(source.parent, dest)
    return dest / "game.tw-pddl"


def test_a_grammar_that_runs_code_is_refused_before_textworld_sees_it(games: Path, tmp_path: Path, capsys,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25: TextWorld evals a grammar's {...}; such a game is refused, exit 2, and nothing runs."""
    from mage_core.envs.alfworld.env import AlfWorldDataError, AlfWorldEnv, AlfWorldSettings, split_games

    monkeypatch.chdir(tmp_path)
    gamefile = _copy_game(games, tmp_path / "hostile" / "train")
    data = json.loads(gamefile.read_text())
    assert "{r.name}" in data["grammar"]
    data["grammar"] = data["grammar"].replace("{r.name}", PAYLOAD, 1)
    gamefile.write_text(json.dumps(data))

    assert main(["alfworld", "check", str(tmp_path / "hostile")]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "refused" in out and gamefile.name in out and "__import__" in out and "A game folder is code" in out
    with pytest.raises(AlfWorldDataError, match="holds an expression TextWorld would run as Python code"):
        split_games(str(tmp_path / "hostile"), "train")
    import numpy as np

    env = AlfWorldEnv(AlfWorldSettings(data_path=str(tmp_path / "none")), np.random.default_rng(0),
                      games=[str(gamefile)])
    with pytest.raises(AlfWorldDataError, match="Call"):
        env.set_game(str(gamefile))
    assert not (tmp_path / "PWNED").exists()

    # defence in depth: the engines this project builds never eval a grammar expression, even
    # one that reaches them past the check
    from textworld.envs.pddl import textgen

    from mage_core.envs.alfworld.grammar import UnsafeExpression

    G.make_play_env()
    with pytest.raises(UnsafeExpression, match="Call"):
        textgen.EvalSymbol(PAYLOAD[1:-1]).derive({"variables": {"r": None}})
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("case", ["list", "no_grammar", "broken_grammar", "not_json"])
def test_a_file_that_is_no_game_is_refused_with_one_line(games: Path, tmp_path: Path, capsys, case: str) -> None:
    gamefile = _copy_game(games, tmp_path / "bad" / "train")
    data = json.loads(gamefile.read_text())
    text = {"list": json.dumps([data]), "no_grammar": json.dumps({k: v for k, v in data.items() if k != "grammar"}),
            "broken_grammar": json.dumps({**data, "grammar": data["grammar"].replace("{", "", 1)[:200]}),
            "not_json": "{ not json"}[case]
    gamefile.write_text(text)
    assert main(["alfworld", "check", str(tmp_path / "bad")]) == 2
    out = " ".join(capsys.readouterr().out.split())
    expected = {"list": "a JSON list, not a game", "no_grammar": "no grammar text in it",
                "broken_grammar": "its grammar does not parse", "not_json": "unreadable game file"}[case]
    assert "refused" in out and expected in out and "Traceback" not in out
