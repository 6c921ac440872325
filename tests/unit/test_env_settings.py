"""Each environment's settings, declared once (``envs/<name>/params.py``, an
``envs.params.EnvSettings``): the class params.yaml's ``env.<name>`` validates into is the
class its environment takes; a copy with changes is validated like a new one; the settings
the code chooses (a split, ALFWorld's planner) are no keys of params.yaml; a rule once kept
by the environment's own dataclass is now reported by ``mage validate``, naming the key."""

from __future__ import annotations

import pickle

import pytest

from mage_core.config import ConfigError, parse_config
from mage_core.envs.params import EnvSettings
from mage_core.envs.registry import GAMES, resolve, task

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("game", GAMES)
def test_the_section_of_params_yaml_is_what_the_env_takes(game: str) -> None:
    settings = getattr(parse_config({}).env, game)
    cls = resolve(task(game).params)
    assert type(settings) is cls and issubclass(cls, EnvSettings)
    assert settings == cls()  # one set of defaults
    # Settings go to Ray rollout workers pickled, and are compared and hashed as values.
    back = pickle.loads(pickle.dumps(settings))
    assert back == settings and hash(back) == hash(settings)
    assert settings.replace() == settings and len({settings, settings.replace(), back}) == 1
    with pytest.raises(ValueError, match="frozen"):
        settings.max_turns = 99  # type: ignore[misc]


def test_a_copy_with_changes_is_validated_like_a_new_one() -> None:
    env = parse_config({}).env
    assert env.minesweeper.replace(num_mines=5).num_mines == 5 and env.minesweeper.num_mines == 3
    with pytest.raises(ValueError, match=r"num_mines\s+Value error, at most 34 on a 6 x 6 board"):
        env.minesweeper.replace(num_mines=40)
    with pytest.raises(ValueError, match=r"num_mines\s+Value error, at most 7 on a 3 x 3 board"):
        env.minesweeper.replace(board_size=3, num_mines=8)  # a rule across two changed fields
    with pytest.raises(ValueError, match=r"num_boxes\s+Input should be less than or equal to 3"):
        env.sokoban.replace(num_boxes=4)
    with pytest.raises(ValueError, match=r"split\s+Input should be 'train', 'select', 'eval' or 'ood'"):
        env.webshop.replace(split="test")
    with pytest.raises(ValueError, match=r"bogus\s+Extra inputs are not permitted"):
        env.sokoban.replace(bogus=1)
    # What ``replace`` is for: pydantic's own copy checks nothing.
    assert env.minesweeper.model_copy(update={"num_mines": 40}).num_mines == 40


@pytest.mark.parametrize(("game", "key", "value"), [("webshop", "split", "eval"), ("alfworld", "split", "train"),
                                                    ("alfworld", "planner", True)])
def test_settings_the_code_chooses_are_no_keys_of_params_yaml(game: str, key: str, value: object) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"env": {game: {key: value}}})
    assert err.value.problems == [
        f"env.{game}.{key}: unknown key (check the spelling; see params.yaml for the allowed keys)"]
    settings = getattr(parse_config({}).env, game)
    changed = settings.replace(**{key: value})
    assert getattr(changed, key) == value and getattr(type(settings)(**{key: value}), key) == value
    # Left out of every dump of the config (its digest, the protocol key: the file's keys
    # only), yet two settings apart in it are apart.
    assert key not in settings.model_dump() and key not in changed.model_dump(mode="json")
    assert (changed == settings) == (getattr(settings, key) == value)


@pytest.mark.parametrize(("env", "problem"), [
    ({"kuhn_poker": {"max_turns": 1}}, "env.kuhn_poker.max_turns: Input should be greater than or equal to 2 (got 1)"),
    ({"tic_tac_toe": {"win_reward": -20}},
     "env.tic_tac_toe.draw_reward: rewards must satisfy loss_reward <= draw_reward <= win_reward, got -10.0 / 0.0 / "
     "-20.0"),
    ({"sokoban": {"step_penalty": float("nan")}}, "env.sokoban.step_penalty: Input should be a finite number (got nan)"),
    ({"sokoban": {"min_solution_moves": 30}},
     "env.sokoban.max_solution_moves: must be >= min_solution_moves (30), got 21"),
    ({"alfworld": {"success_reward": float("inf")}},
     "env.alfworld.success_reward: Input should be a finite number (got inf)"),
])
def test_a_rule_the_env_once_kept_alone_is_one_line_naming_the_key(env: dict, problem: str) -> None:
    # Each of these passed params.yaml's section and was refused only when the environment's
    # dataclass was built, after `mage validate` had passed the file.
    with pytest.raises(ConfigError) as err:
        parse_config({"env": env})
    assert err.value.problems == [problem]
