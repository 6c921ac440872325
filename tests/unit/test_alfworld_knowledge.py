"""What an ALFWorld player can know (knowledge.py) and what the searching expert does with it
(expert.next_command), on feedback written by hand in the engine's own sentences."""

from __future__ import annotations

import pytest

from mage_core.envs.alfworld.knowledge import Goal, Knowledge, first_looks, looked, names, parse_goal, room

pytestmark = pytest.mark.unit

INTRO = ("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you "
         "see a cabinet 2, a cabinet 1, a coffeemachine 1, a countertop 1, a drawer 1, a fridge 1, a microwave 1, "
         "and a sinkbasin 1.\n\nYour task is to: put a hot mug in coffeemachine.")
ROOM = ("cabinet 2", "cabinet 1", "coffeemachine 1", "countertop 1", "drawer 1", "fridge 1", "microwave 1",
        "sinkbasin 1")


def test_names_room_and_looks_read_the_engine_sentences():
    assert names("a bread 2, a cup 1, a egg 2, and a spatula 1") == ["bread 2", "cup 1", "egg 2", "spatula 1"]
    assert names("a mug 1") == ["mug 1"] and names("nothing") == []
    assert room(INTRO) == ROOM
    assert looked("You arrive at countertop 1. On the countertop 1, you see a mug 1, and a knife 2.") == (
        "countertop 1", ["mug 1", "knife 2"])
    assert looked("You open the cabinet 2. The cabinet 2 is open. In it, you see nothing.") == ("cabinet 2", [])
    assert looked("You arrive at fridge 1. The fridge 1 is open. In it, you see a egg 1.") == ("fridge 1", ["egg 1"])
    assert looked("You arrive at cabinet 2. The cabinet 2 is closed.") is None
    assert looked("You pick up the mug 1 from the countertop 1.") is None


@pytest.mark.parametrize("text, goal", [
    ("put a mug in cabinet.", Goal("place", "mug", "cabinet")),
    ("put some spraybottle on toilet.", Goal("place", "spraybottle", "toilet")),
    ("put a clean bowl in cabinet.", Goal("clean", "bowl", "cabinet")),
    ("clean some bowl and put it in cabinet.", Goal("clean", "bowl", "cabinet")),
    ("put a hot mug in coffeemachine.", Goal("heat", "mug", "coffeemachine")),
    ("heat some egg and put it in countertop.", Goal("heat", "egg", "countertop")),
    ("put a cool tomato in sidetable.", Goal("cool", "tomato", "sidetable")),
    ("cool some bread and put it in countertop.", Goal("cool", "bread", "countertop")),
    ("put two laptop in sofa.", Goal("two", "laptop", "sofa")),
    ("find two cd and put them in safe.", Goal("two", "cd", "safe")),
    ("look at alarmclock under the desklamp.", Goal("look", "alarmclock", "desklamp")),
    ("examine the book with the desklamp.", Goal("look", "book", "desklamp")),
])
def test_each_of_alfworlds_twelve_goal_templates_parses(text, goal):
    assert parse_goal(text) == goal


def test_a_goal_of_no_template_is_none():
    assert parse_goal("make some coffee.") is None


def test_first_looks_keep_the_start_state():
    steps = [("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a mug 1, and a knife 2."),
             ("take mug 1 from countertop 1", "You pick up the mug 1 from the countertop 1."),
             ("go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is closed."),
             ("open cabinet 1", "You open the cabinet 1. The cabinet 1 is open. In it, you see nothing."),
             ("move mug 1 to cabinet 1", "You move the mug 1 to the cabinet 1."),
             ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a knife 2."),
             ("go to drawer 1", "You arrive at drawer 1. The drawer 1 is closed.")]
    # countertop 1 at its first look (the mug was there), cabinet 1 empty, the drawer never seen into
    assert first_looks(steps) == [("countertop 1", ["mug 1", "knife 2"]), ("cabinet 1", [])]
    # a receptacle first looked into after the attempt took an object elsewhere leaves that object out
    later = [("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a mug 1."),
             ("take mug 1 from countertop 1", "You pick up the mug 1 from the countertop 1."),
             ("go to sinkbasin 1", "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing."),
             ("move mug 1 to sinkbasin 1", "You move the mug 1 to the sinkbasin 1."),
             ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed.")]
    assert first_looks(later) == [("countertop 1", ["mug 1"]), ("sinkbasin 1", [])]


def test_knowledge_folds_memory_then_the_attempt():
    know = Knowledge.of(ROOM, [], [("saw", "mug 1 in cabinet 1"), ("saw", "knife 2 in countertop 1"),
                                   ("empty", "drawer 1")])
    assert know.where == {"mug 1": "cabinet 1", "knife 2": "countertop 1"}
    assert know.looked == {"cabinet 1", "countertop 1", "drawer 1"} and know.at is None
    know = Knowledge.of(ROOM, [("go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is closed."),
                               ("open cabinet 1", "You open the cabinet 1. The cabinet 1 is open. In it, you see a mug 1."),
                               ("take mug 1 from cabinet 1", "You pick up the mug 1 from the cabinet 1."),
                               ("go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed."),
                               ("heat mug 1 with microwave 1", "You heat the mug 1 using the microwave 1.")],
                        [("saw", "mug 1 in cabinet 1")])
    assert know.at == "microwave 1" and know.holding == ["mug 1"] and know.transformed == {"mug 1"}
    assert "mug 1" not in know.where and know.opened == {"cabinet 1"}


class TestTheSearchingExpert:
    """``next_command`` on hand-built knowledge: what the goal, the memory and the priors give."""

    @pytest.fixture(autouse=True)
    def _priors(self):
        pytest.importorskip("alfworld", reason="the alfworld extra (make setup installs it): its object priors")

    def test_with_nothing_known_it_searches_what_needs_no_opening_first(self):
        from mage_core.envs.alfworld.expert import next_command

        goal = parse_goal("put a hot mug in coffeemachine.")
        know = Knowledge.of(ROOM, [])
        # ALFWorld's priors let a mug be in each of these classes; the coffeemachine, the countertop
        # and the sinkbasin need no opening and come first, in the room's order
        assert next_command(goal, know, ["go to cabinet 1"]) == "go to coffeemachine 1"
        looked_around = Knowledge.of(ROOM, [], [("empty", "coffeemachine 1"), ("empty", "countertop 1"),
                                                ("empty", "sinkbasin 1")])
        assert next_command(goal, looked_around, []) == "go to cabinet 2"
        at_closed = Knowledge.of(ROOM, [("go to cabinet 2", "You arrive at cabinet 2. The cabinet 2 is closed.")])
        assert next_command(goal, at_closed, ["open cabinet 2", "go to cabinet 1"]) == "open cabinet 2"

    def test_with_the_object_remembered_it_goes_straight_there_and_finishes(self):
        from mage_core.envs.alfworld.expert import next_command

        goal = parse_goal("put a hot mug in coffeemachine.")
        memory = [("saw", "mug 1 in cabinet 1"), ("empty", "countertop 1")]
        plays = [(["go to cabinet 1"], "go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is closed."),
                 (["open cabinet 1"], "open cabinet 1",
                  "You open the cabinet 1. The cabinet 1 is open. In it, you see a mug 1."),
                 ([], "take mug 1 from cabinet 1", "You pick up the mug 1 from the cabinet 1."),
                 ([], "go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed."),
                 ([], "heat mug 1 with microwave 1", "You heat the mug 1 using the microwave 1."),
                 ([], "go to coffeemachine 1", "You arrive at coffeemachine 1. On the coffeemachine 1, you see nothing."),
                 ([], "move mug 1 to coffeemachine 1", "You move the mug 1 to the coffeemachine 1.")]
        steps: list[tuple[str, str]] = []
        for legal, command, feedback in plays:
            assert next_command(goal, Knowledge.of(ROOM, steps, memory), legal + [command]) == command
            steps.append((command, feedback))

    def test_a_look_goal_finds_a_lamp_while_holding_the_object(self):
        from mage_core.envs.alfworld.expert import next_command

        goal = parse_goal("look at book under the desklamp.")
        bedroom = ("drawer 1", "desk 1", "sidetable 1")
        steps = [("go to desk 1", "You arrive at desk 1. On the desk 1, you see a book 1."),
                 ("take book 1 from desk 1", "You pick up the book 1 from the desk 1.")]
        know = Knowledge.of(bedroom, steps)
        assert next_command(goal, know, []) == "go to sidetable 1"  # no lamp known: search, surfaces first
        steps.append(("go to sidetable 1", "You arrive at sidetable 1. On the sidetable 1, you see a desklamp 1."))
        assert next_command(goal, Knowledge.of(bedroom, steps), []) == "use desklamp 1"
