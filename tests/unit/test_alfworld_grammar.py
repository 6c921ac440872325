"""A game's grammar expressions (issue 25): the whitelist refuses code, and the
interpreter that replaces TextWorld's eval gives what eval gives for what it accepts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mage_core.envs.alfworld.grammar import UnsafeExpression, evaluate, expression_tree

pytestmark = pytest.mark.unit

#: Every expression of a grammar `mage alfworld generate` writes (read from a game on 2026-11-27).
GENERATED = ["o.name", "r.name", "r", "o", "o.indefinite + ' ' + o.name ", "outero.name", "r.name ",
             "o.indefinite", "r.indefinite", "r.name or r.id", "outero", "outerr.name",
             "o2.indefinite + ' ' + o2.name ", "co.name", "ko.name", "outerr", "co", "ko"]


def _variables() -> dict:
    def entity(name: str | None, ident: str) -> SimpleNamespace:
        return SimpleNamespace(name=name, id=ident, indefinite="a")
    names = ["o", "r", "outero", "outerr", "o2", "co", "ko"]
    variables = {n: entity(f"{n} 1", f"{n}_id") for n in names}
    variables["r"] = entity(None, "drawer_1")  # `r.name or r.id` falls back to the id
    return variables


@pytest.mark.parametrize("expression", GENERATED)
def test_every_generated_expression_is_accepted_and_equals_eval(expression: str) -> None:
    variables = _variables()
    assert evaluate(expression, variables) == eval(expression, {}, dict(variables))  # noqa: S307


@pytest.mark.parametrize("expression", [
    "__import__('os').system('touch PWNED') or ''",
    "r.__class__",
    "open('x')",
    "r.name.upper()",
    "r.name.upper",  # a bound method: eval prints its address (issue 39)
    "'x'.join",
    "r.adj",  # None in TextWorld's PDDL engine
    "r.name + 1",  # TypeError when played
    "r + ' 1'",
    "(r.name or 1) + 'x'",
    "True",
    "[x for x in ()]",
    "lambda: 0",
    "r if r else o",
    "r.name[0]",
    "_secret",
    "None",
    "r.name - 1",
    "r.name;",
])
def test_code_is_refused(expression: str) -> None:
    with pytest.raises(UnsafeExpression):
        expression_tree(expression)


def test_or_and_short_circuit_as_python() -> None:
    variables = {"a": SimpleNamespace(name="", id="x"), "b": SimpleNamespace(name="n", id="y")}
    for expression in ["a.name or a.id", "b.name or b.id", "a.name and a.id", "b.name and b.id",
                       "a.name or b.name or 'z'", "'p' + b.name + 's'", "1 + 2"]:
        assert evaluate(expression, variables) == eval(expression, {}, dict(variables))  # noqa: S307


def test_an_unknown_name_is_named() -> None:
    with pytest.raises(UnsafeExpression, match="'q' is not a variable of this template"):
        evaluate("q.name", {"r": SimpleNamespace(name="x")})
