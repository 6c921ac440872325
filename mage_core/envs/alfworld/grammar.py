"""A game file's grammar holds code: what this project lets TextWorld run of it.

An ALFWorld game (``game.tw-pddl``, JSON) carries its text grammar, and TextWorld's
text generator hands every ``{...}`` expression of that grammar to Python's ``eval``
while the game is played (``textworld.envs.pddl.textgen.EvalSymbol``): a game file
from an untrusted source can run any code. ALFWorld's own grammar uses a tiny part
of Python there: a template variable (``r``), its attributes (``r.name``), string
literals joined with ``+`` and ``or``. This module

- checks a game file before TextWorld loads it (``check_game_file``): it must be a
  JSON object with the three texts a game holds, its grammar must parse (TextWorld's
  own parsers, which build the expressions without running them), and every
  expression must be of that tiny part (``EXPRESSION_RULE``); anything else is an
  ``AlfWorldDataError`` naming the file, the rule and the expression;
- replaces TextWorld's ``eval`` with an interpreter of that tiny part
  (``install``), so an expression that reaches the engine some other way still runs
  no code: it fails with the same message.

The interpreter gives what ``eval`` gives for every expression it accepts (names are
looked up in the template's variables, as TextWorld's ``locals()`` would find them).
docs/environments.md (ALFWorld, "A game folder is code") says what this means for data you download.
"""

from __future__ import annotations

import ast
import functools
import json
from typing import Any, Iterator, Mapping

#: What a grammar expression may be, in the words of the error messages.
EXPRESSION_RULE = ("a template variable (r), its public attributes (r.name), string or number literals, "
                   "joined with + and or/and")

#: The texts a game file must hold (TextWorld's PddlEnv.load reads them).
GAME_KEYS = ("pddl_domain", "grammar", "pddl_problem")

_NODES = (ast.Expression, ast.Name, ast.Attribute, ast.Constant, ast.BinOp, ast.BoolOp, ast.Load, ast.Add,
          ast.Or, ast.And)


class UnsafeExpression(ValueError):
    """A grammar expression outside ``EXPRESSION_RULE``."""


@functools.lru_cache(maxsize=4096)
def expression_tree(text: str) -> ast.Expression:
    """The parsed expression, or ``UnsafeExpression`` saying why it is refused."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise UnsafeExpression(f"{text!r} is not an expression ({err.msg})") from None
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            raise UnsafeExpression(f"{text!r} holds {type(node).__name__}: only {EXPRESSION_RULE}")
        if isinstance(node, ast.Name) and node.id.startswith("_"):
            raise UnsafeExpression(f"{text!r} names {node.id!r}: names starting with _ are refused")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise UnsafeExpression(f"{text!r} reads .{node.attr}: attributes starting with _ are refused")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (str, int, float)):
            raise UnsafeExpression(f"{text!r} holds the literal {node.value!r}: only strings and numbers")
    return tree


def evaluate(text: str, variables: Mapping[str, Any]) -> Any:
    """``eval(text)`` with ``variables`` as its names, for an expression of
    ``EXPRESSION_RULE`` only; ``UnsafeExpression`` otherwise or for an unknown name."""
    return _value(expression_tree(text).body, variables, text)


def _value(node: ast.AST, variables: Mapping[str, Any], text: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in variables:
            raise UnsafeExpression(f"{text!r}: {node.id!r} is not a variable of this template "
                                   f"(it has {', '.join(sorted(variables)) or 'none'})")
        return variables[node.id]
    if isinstance(node, ast.Attribute):
        return getattr(_value(node.value, variables, text), node.attr)
    if isinstance(node, ast.BinOp):  # only Add passes expression_tree
        return _value(node.left, variables, text) + _value(node.right, variables, text)
    if isinstance(node, ast.BoolOp):  # Or / And, short-circuit as Python's
        result = None
        for operand in node.values:
            result = _value(operand, variables, text)
            if bool(result) == isinstance(node.op, ast.Or):
                return result
        return result
    raise UnsafeExpression(f"{text!r}: {type(node).__name__} is refused")  # unreachable after expression_tree


def _derive(self: Any, context: Any = None) -> list:
    """``EvalSymbol.derive`` without ``eval`` (TextWorld 1.7's, line for line otherwise)."""
    from textworld.envs.pddl.textgen import TerminalSymbol

    context = context or self.context
    return [TerminalSymbol(evaluate(self.expression, context["variables"]))]


def install() -> None:
    """Make TextWorld's text generator use ``evaluate`` instead of ``eval`` (once per
    process; every engine this project builds calls it)."""
    from textworld.envs.pddl import textgen

    if getattr(textgen.EvalSymbol.derive, "_mage_safe", False):
        return
    _derive._mage_safe = True  # type: ignore[attr-defined]
    textgen.EvalSymbol.derive = _derive


def expressions(grammar: str) -> Iterator[tuple[str, str]]:
    """Every ``{...}`` expression of a game's grammar text, with where it stands
    (a rule's name, or an action's template or feedback), parsed by TextWorld's own
    parsers without running anything. Raises ValueError when the grammar does not parse."""
    from textworld.envs.pddl import textgen
    from textworld.envs.pddl.logic import _parse_and_convert as parse_document

    try:
        actions, rules = parse_document(grammar, rule_name="pddlStart")
        texts = [(f"rule {name!r}", rule.rhs) for name, alternatives in rules._rules.items()
                 for rule in alternatives]
        for name, action in actions.items():
            for part, text in (("template", action.template), ("feedback", action.feedback_rule)):
                texts.append((f"action {name!r} {part}", textgen._parse_and_convert(text, rule_name="symbols")))
    except Exception as err:  # noqa: BLE001  (TatSu and json raise many kinds)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"its grammar does not parse ({type(err).__name__}: {first})") from None

    def walk(symbol: Any) -> Iterator[str]:
        if isinstance(symbol, textgen.EvalSymbol):
            yield symbol.expression
        elif isinstance(symbol, textgen.ConditionalSymbol):
            yield from walk(symbol.expression)
        elif isinstance(symbol, textgen.ListSymbol):
            yield from walk(symbol.symbol)

    for where, symbols in texts:
        for symbol in symbols:
            for expression in walk(symbol):
                yield where, expression


def check_game_data(data: Any, where: str) -> None:
    """Refuse what TextWorld should never load (``AlfWorldDataError`` naming ``where``)."""
    from mage_core.envs.alfworld.env import AlfWorldDataError

    if not isinstance(data, dict):
        raise AlfWorldDataError(f"{where}: a JSON {type(data).__name__}, not a game (an object with "
                                f"{', '.join(GAME_KEYS)})")
    missing = [key for key in GAME_KEYS if not isinstance(data.get(key), str)]
    if missing:
        raise AlfWorldDataError(f"{where}: no {', '.join(missing)} text in it: not a TextWorld PDDL game "
                                "(regenerate it: mage alfworld generate)")
    try:
        found = list(expressions(data["grammar"]))
    except ValueError as err:
        raise AlfWorldDataError(f"{where}: {err}") from None
    for rule, expression in found:
        try:
            expression_tree(expression)
        except UnsafeExpression as err:
            raise AlfWorldDataError(
                f"{where}: refused before loading: the grammar's {rule} holds an expression TextWorld would run "
                f"as Python code: {err}. A game folder is code: load only games you generated (mage alfworld "
                "generate) or trust (docs/environments.md)") from None


def check_game_file(path: str) -> dict:
    """Read and check a game file (``check_game_data``); its JSON."""
    from mage_core.envs.alfworld.env import AlfWorldDataError

    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise AlfWorldDataError(f"{path}: unreadable game file ({err})") from None
    check_game_data(data, path)
    return data
