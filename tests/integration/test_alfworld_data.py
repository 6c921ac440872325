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
    from mage_core.envs.alfworld.env import AlfWorldDataError, AlfWorldEnv, split_games
    from mage_core.envs.alfworld.params import AlfWorldSettings

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


def _spoil(games: Path, root: Path, change) -> Path:
    """A copy of one generated game under ``root``/train with ``change`` applied to its JSON."""
    gamefile = _copy_game(games, root / "train")
    data = json.loads(gamefile.read_text())
    change(data)
    gamefile.write_text(json.dumps(data))
    return gamefile


def _refused_by_check_and_by_train(root: Path, gamefile: Path, expected: list[str], capsys,
                                   project_root: Path) -> None:
    """``mage alfworld check`` and ``mage train`` on ``root``: exit 2, one line naming the file and
    ``expected``, before anything is loaded or written."""
    assert main(["alfworld", "check", str(root)]) == 2
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("refused")]
    assert str(gamefile) in line and all(part in line for part in expected), line
    assert "Traceback" not in out
    trained = root.parent / "trained"
    assert main(["train", "--params", str(project_root / "params.yaml"), "--out", str(trained), "--set",
                 "env.name=alfworld", "--set", f"env.alfworld.data_path={root}"]) == 2
    err = capsys.readouterr().err
    (problem,) = [line for line in err.splitlines() if line.startswith("  - ")]
    assert problem.startswith("  - env.alfworld.data_path: ") and str(gamefile) in problem
    assert all(part in problem for part in expected) and not trained.exists()


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("{r.name}", "{open}", ["the grammar's rule", "holds 'open', and 'open' is no variable there"]),
    ("{r.name}", "{r.name.upper}", ["the grammar's rule 'GotoLocation.feedback'",
                                    "'r.name.upper' reads .upper of r.name"]),
    # r is a variable of many texts, but not of the intro's, which is derived with none.
    ("Your task is to: ", "Your task is to: {r.name} ",
     ["the grammar's rule 'task' holds 'r.name', and 'r' is no variable there when it is derived for the intro "
      "(it has none)"]),
], ids=["a builtin", "a method", "a variable out of scope"])
def test_an_expression_the_engine_would_not_play_is_refused_before_loading(
        games: Path, tmp_path: Path, capsys, project_root: Path, old: str, new: str, expected: list[str]) -> None:
    """Issue 39: {open} (TextWorld's eval finds the builtin; the engine's interpreter knows only the
    template's variables) and {r.name.upper} (a bound method, printed with its address) passed the
    check; the first was then played as "Nothing happens." after every action, the second printed
    "<built-in method upper of str object at 0x...>". A name is a variable only where the
    derivation that reaches it binds it."""
    root = tmp_path / "hostile"
    gamefile = _spoil(games, root, lambda data: data.update(grammar=data["grammar"].replace(old, new)))
    _refused_by_check_and_by_train(root, gamefile, expected, capsys, project_root)


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("#examineReceptacle.feedback#", "#examineReceptacle.feedbak#",
     "names #examineReceptacle.feedbak#, a rule the grammar does not hold"),
    ('"rhs": "On the {r.name}', '"condition": "openable(r:receptacle)", "rhs": "On the {r.name}',
     "the grammar's rule 'examineReceptacle.feedback' has a condition on every alternative"),
    ('"condition": "openable(r:receptacle) & opened(r:receptacle)"', '"condition": "openable(r:receptacle"',
     "has a condition that does not parse"),
    ("action look {", "action peek {", "the PDDL domain's action 'look' has no command in the grammar"),
], ids=["an unknown rule", "no unconditional alternative", "a condition that does not parse",
        "an action without command"])
def test_a_grammar_the_engine_could_not_derive_is_refused_before_loading(
        games: Path, tmp_path: Path, capsys, old: str, new: str, expected: str) -> None:
    """What TextWorld's derivation would fail on besides an expression (CSGUnknownSymbolError, an
    IndexError where no alternative holds, TatSu's parse error, a KeyError): refused by the check."""
    root = tmp_path / "broken"
    gamefile = _spoil(games, root, lambda data: data.update(grammar=data["grammar"].replace(old, new)))
    assert main(["alfworld", "check", str(root)]) == 2
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("refused")]
    assert str(gamefile) in line and expected in line, line


def test_an_expression_the_check_accepts_plays_as_textworlds_eval_would(games: Path, tmp_path: Path) -> None:
    """The other side of the rule: what passes the check is played, and gives what eval gives."""
    arrive = "You arrive at {r.name}."
    richer = "You arrive at {r.definite + ' ' + (r.name or r.id) + ', ' + r.indefinite + ' ' + r.type}."
    gamefile = _spoil(games, tmp_path / "games",
                      lambda data: data.update(grammar=data["grammar"].replace(arrive, richer)))
    assert main(["alfworld", "check", str(tmp_path / "games")]) == 0
    env = G.make_play_env()
    env.load(str(gamefile))
    state = env.reset()
    command = next(c for c in state["admissible_commands"] if c.startswith("go to "))
    state, _, _ = env.step(command)
    place = command.removeprefix("go to ")
    assert state["feedback"].startswith(f"You arrive at the {place}, a receptacle.")


def _undeclared_predicate(data: dict) -> None:
    at = data["pddl_problem"].index("(:goal")
    problem = data["pddl_problem"]
    data["pddl_problem"] = problem[:at] + problem[at:].replace("(objectType ", "(objectTypo ", 1)


@pytest.mark.parametrize(("change", "expected"), [
    (lambda data: data.update(pddl_problem=data["pddl_problem"][:data["pddl_problem"].rindex(")")]),
     ["refused before loading: its pddl_problem does not parse (fast-downward: ParseError: Missing ')')"]),
    (_undeclared_predicate, ["no task fast-downward reads (Undeclared predicate: objecttypo)"]),
], ids=["unparsable problem", "undeclared predicate"])
def test_pddl_that_fast_downward_cannot_read_is_refused_naming_the_file(
        games: Path, tmp_path: Path, capsys, project_root: Path, change, expected: list[str]) -> None:
    """Issue 39: a pddl_problem that does not parse ended in fast-downward's ParseError traceback, and
    an undeclared predicate in "Undeclared predicate: objecttypo" (its SystemExit) naming no file."""
    root = tmp_path / "broken"
    gamefile = _spoil(games, root, change)
    _refused_by_check_and_by_train(root, gamefile, expected, capsys, project_root)
