"""A game file's grammar holds code: what this project lets TextWorld run of it.

An ALFWorld game (``game.tw-pddl``, JSON) carries its text grammar, and TextWorld's
text generator hands every ``{...}`` expression of that grammar to Python's ``eval``
while the game is played (``textworld.envs.pddl.textgen.EvalSymbol``): a game file
from an untrusted source can run any code. ALFWorld's own grammar uses a tiny part
of Python there: a template variable (``r``), its text attributes (``r.name``), string
literals joined with ``+`` and ``or``. This module

- checks a game file before TextWorld loads it (``check_game_file``): it must be a
  JSON object with the three texts a game holds, its PDDL must parse (fast-downward's
  own parser, which the engine runs on load), its grammar must parse (TextWorld's own
  parsers, which build the expressions without running them), and every expression must
  be of that tiny part (``EXPRESSION_RULE``) and name only variables it has where it is
  derived (``scope_problems``); anything else is an ``AlfWorldDataError`` naming the file,
  the rule and the expression;
- replaces TextWorld's ``eval`` with an interpreter of that tiny part
  (``install``), so an expression that reaches the engine some other way still runs
  no code: it fails with the same message.

What a game can play, precisely (TextWorld 1.7's PDDL engine, read 2026-11-28): an
expression's names are looked up in the template's variables (``eval``'s ``locals()``),
else in textgen's module and Python's builtins (``{open}`` is the builtin; the interpreter
refuses it). The variables are the parameters of the PDDL action whose command or feedback
is derived (none for the intro), plus the placeholders of each enclosing ``{... | query}``;
a rule (``#name#``) is derived with the variables of the text that names it. Each variable
is an ``EntityInfo`` on which the engine sets ``id``, ``type``, ``name``, ``definite`` and
``indefinite`` (text) and leaves ``noun``, ``adj``, ``desc``, ``room_type`` and ``synonyms``
None; any other attribute is a method or Python's own (``{r.name.upper}`` would print a
bound method's address). So the check accepts those five attributes of a variable only,
``+`` between two texts or two numbers only, and a name only where every derivation that
reaches it binds it: in a game that passes it, every expression the engine reaches evaluates
without error (it also refuses a ``#rule#`` the grammar lacks and a rule whose alternatives
all have conditions, on which TextWorld's derivation fails).

The interpreter gives what ``eval`` gives for every expression it accepts (names are
looked up in the template's variables, as TextWorld's ``locals()`` would find them).
docs/environments.md (ALFWorld, "A game folder is code") says what this means for data you download.
"""

from __future__ import annotations

import ast
import functools
import json
from typing import Any, Iterator, Mapping, Sequence

from mage_core.envs.alfworld.layout import AlfWorldDataError

#: The attributes of a variable (TextWorld's ``EntityInfo``) the PDDL engine always sets to
#: text (``PddlEnv._get_entity_infos``, ALFWorld's ``AlfredDemangler``): the others are None.
TEXT_ATTRIBUTES = ("id", "type", "name", "definite", "indefinite")

#: What a grammar expression may be, in the words of the error messages.
EXPRESSION_RULE = ("a template variable (r), one of its text attributes ("
                   + ", ".join(f"r.{a}" for a in TEXT_ATTRIBUTES)
                   + "), string or number literals, + between two texts or two numbers, or/and")

#: The texts a game file must hold (TextWorld's PddlEnv.load reads them).
GAME_KEYS = ("pddl_domain", "grammar", "pddl_problem")
#: The end of every refusal of a game's PDDL.
PDDL_ADVICE = "regenerate the game (mage alfworld generate) or fix its PDDL"
#: The end of every refusal of a grammar expression.
CODE_ADVICE = ("A game folder is code: load only games you generated (mage alfworld generate) or trust "
               "(docs/environments.md)")

_NODES = (ast.Expression, ast.Name, ast.Attribute, ast.Constant, ast.BinOp, ast.BoolOp, ast.Load, ast.Add,
          ast.Or, ast.And)


class UnsafeExpression(Exception):
    """A grammar expression outside ``EXPRESSION_RULE``. Not a ValueError: TextWorld's
    ``PddlEnv.step`` turns a ValueError met while deriving an action's feedback into
    "Nothing happens." after the action was applied, which would hide it."""


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
        if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name) and node.attr in TEXT_ATTRIBUTES):
            raise UnsafeExpression(f"{text!r} reads .{node.attr} of {ast.unparse(node.value)}: only {EXPRESSION_RULE}")
        if isinstance(node, ast.Constant) and (isinstance(node.value, bool)
                                               or not isinstance(node.value, (str, int, float))):
            raise UnsafeExpression(f"{text!r} holds the literal {node.value!r}: only strings and numbers")
    _kind(tree.body, text)
    return tree


def _kind(node: ast.AST, text: str) -> str:
    """What ``node`` gives: "text", "number", "entity" (a variable: it prints as its name) or
    "mixed" (an or/and of several kinds); ``UnsafeExpression`` for a ``+`` Python refuses
    (an entity, or a text and a number)."""
    if isinstance(node, ast.Constant):
        return "text" if isinstance(node.value, str) else "number"
    if isinstance(node, ast.Name):
        return "entity"
    if isinstance(node, ast.Attribute):
        return "text"
    if isinstance(node, ast.BinOp):
        left, right = _kind(node.left, text), _kind(node.right, text)
        if left != right or left not in ("text", "number"):
            raise UnsafeExpression(f"{text!r} adds {left} and {right}: + joins two texts or two numbers only")
        return left
    kinds = {_kind(operand, text) for operand in node.values}  # type: ignore[attr-defined]  (a BoolOp)
    return kinds.pop() if len(kinds) == 1 else "mixed"


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


def parse_grammar(grammar: str) -> tuple[dict, Any]:
    """The game's grammar text parsed by TextWorld's own parsers (nothing is run): its
    actions (name -> template and feedback) and its rules. ValueError when it does not parse."""
    from textworld.envs.pddl.logic import _parse_and_convert as parse_document

    try:
        return parse_document(grammar, rule_name="pddlStart")
    except Exception as err:  # noqa: BLE001  (TatSu and json raise many kinds)
        raise ValueError(f"its grammar does not parse ({_first_line(err)})") from None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__


def _symbols(text: str) -> list:
    """A template or rule text as TextWorld's derivation reads it; ValueError if it does not parse."""
    from textworld.envs.pddl import textgen

    try:
        return textgen._parse_and_convert(text, rule_name="symbols")
    except Exception as err:  # noqa: BLE001
        raise ValueError(f"its grammar does not parse ({_first_line(err)})") from None


def _inner(symbol: Any) -> Iterator[Any]:
    """The symbols a Conditional or List symbol derives (an EvalSymbol's are none)."""
    from textworld.envs.pddl import textgen

    if isinstance(symbol, textgen.ConditionalSymbol):
        yield symbol.expression
    elif isinstance(symbol, textgen.ListSymbol):
        yield symbol.symbol


def expressions(actions: Mapping[str, Any], rules: Any) -> Iterator[tuple[str, str]]:
    """Every ``{...}`` expression of a parsed grammar (``parse_grammar``), with where it
    stands (a rule's name, or an action's template or feedback)."""
    from textworld.envs.pddl import textgen

    texts = [(f"rule {name!r}", rule.rhs) for name, alternatives in rules._rules.items() for rule in alternatives]
    for name, action in actions.items():
        for part, text in (("template", action.template), ("feedback", action.feedback_rule)):
            texts.append((f"action {name!r} {part}", _symbols(text)))
    for where, symbols in texts:
        stack = list(symbols)
        while stack:
            symbol = stack.pop()
            if isinstance(symbol, textgen.EvalSymbol):
                yield where, symbol.expression
            stack.extend(_inner(symbol))


#: The rules TextWorld's ``display_list`` names around the items of a ``[...]`` list.
LIST_RULES = ("list_empty", "list_separator", "list_last_separator")


def scope_problems(actions: Mapping[str, Any], rules: Any,
                   parameters: Mapping[str, Sequence[str]]) -> Iterator[tuple[str, str]]:
    """(where, problem) for what would fail while a game is played: an expression naming a
    variable that a derivation reaching it does not bind, a ``#rule#`` the grammar does not
    hold, a rule without an alternative free of conditions, a condition or query that does
    not parse, a PDDL action without a command in the grammar.
    ``parameters``: each PDDL action's parameter names (without ``?``). The derivations are
    TextWorld's (module docstring): the intro with no variables, each action's command and
    feedback with its parameters; a ``{... | query}`` adds the query's placeholders."""
    from textworld.envs.pddl import textgen
    from textworld.logic import Rule

    stack: list[tuple[str, str, Any, frozenset]] = []
    for name in sorted(parameters):
        if name not in actions:
            yield f"the PDDL domain's action {name!r}", "has no command in the grammar (TextWorld fails on it)"
            continue
        for part, text in (("template", actions[name].template), ("feedback", actions[name].feedback_rule)):
            origin = f"action {name!r} {part}"
            stack += [(origin, origin, symbol, frozenset(parameters[name])) for symbol in _symbols(text)]
    stack += [("the intro", "the intro", symbol, frozenset()) for symbol in _symbols("#intro#")]
    seen: set[tuple[str, frozenset]] = set()
    while stack:
        where, origin, symbol, variables = stack.pop()
        if isinstance(symbol, textgen.EvalSymbol):
            unbound = sorted({node.id for node in ast.walk(expression_tree(symbol.expression))
                              if isinstance(node, ast.Name)} - variables)
            if unbound:
                yield f"the grammar's {where}", (
                    f"holds {symbol.expression!r}, and {', '.join(map(repr, unbound))} is no variable there when it "
                    f"is derived for {origin} (it has {', '.join(sorted(variables)) or 'none'}): TextWorld's eval "
                    "would look it up among Python's own names")
        elif isinstance(symbol, textgen.NonterminalSymbol):
            name = str(symbol)
            if (name, variables) in seen:
                continue
            seen.add((name, variables))
            if not rules._rules.get(name):
                yield f"the grammar's {where}", f"names #{name}#, a rule the grammar does not hold"
                continue
            if all(rule.condition for rule in rules._rules[name]):
                yield f"the grammar's rule {name!r}", ("has a condition on every alternative: TextWorld fails where "
                                                       "none holds (end it with one without a condition)")
                continue
            for rule in rules._rules[name]:
                try:
                    if rule.condition:
                        Rule.parse_conjunctive_query(rule.condition)
                except Exception as err:  # noqa: BLE001  (TatSu)
                    yield f"the grammar's rule {name!r}", f"has a condition that does not parse ({_first_line(err)})"
                    continue
                stack += [(f"rule {name!r}", origin, rhs, variables) for rhs in rule.rhs]
        elif isinstance(symbol, textgen.ConditionalSymbol) and symbol.given:
            try:
                bound = {placeholder.name for placeholder in Rule.parse_conjunctive_query(symbol.given).placeholders}
            except Exception as err:  # noqa: BLE001  (TatSu)
                yield f"the grammar's {where}", f"has a query that does not parse ({_first_line(err)})"
                continue
            stack.append((where, origin, symbol.expression, variables | bound))
        else:
            if isinstance(symbol, textgen.ListSymbol):
                stack += [(where, origin, textgen.NonterminalSymbol(rule), variables) for rule in LIST_RULES]
            stack += [(where, origin, inner, variables) for inner in _inner(symbol)]


def parse_pddl(domain: str, problem: str) -> Any:
    """fast-downward's parse of a game's PDDL, as TextWorld's engine runs it on load
    (``fast_downward.pddl2sas``: parse, then normalize), without the translation;
    ValueError naming the text and fast-downward's reason when it cannot read them."""
    import contextlib
    import io
    import sys

    argv = sys.argv
    sys.argv = ["translate.py", "domain", "task"]  # its options module parses sys.argv on import (as pddl2sas)
    try:
        from fast_downward.translate import normalize
        from fast_downward.translate.pddl_parser import lisp_parser, parsing_functions
    finally:
        sys.argv = argv
    parsed = []
    for key, text in (("pddl_domain", domain), ("pddl_problem", problem)):
        try:
            parsed.append(lisp_parser.parse_nested_list(text.split("\n")))
        except Exception as err:  # noqa: BLE001  (ParseError, and what a hostile text makes of the tokenizer)
            raise ValueError(f"its {key} does not parse (fast-downward: {_first_line(err)}); {PDDL_ADVICE}") from None
    # fast-downward reports a task it cannot read with SystemExit (e.g. "Undeclared predicate: x") and
    # asserts, and prints warnings: all of it becomes the one line that names the file.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            task = parsing_functions.parse_task(*parsed)
            normalize.normalize(task)
        except (SystemExit, Exception) as err:  # noqa: BLE001
            said = " ".join(str(err).split()) or type(err).__name__
            raise ValueError(f"its pddl_domain and pddl_problem are no task fast-downward reads ({said}); "
                             f"{PDDL_ADVICE}") from None
    return task


def check_game_data(data: Any, where: str) -> None:
    """Refuse what TextWorld should never load, or could not play (``AlfWorldDataError``
    naming ``where``)."""
    if not isinstance(data, dict):
        raise AlfWorldDataError(f"{where}: a JSON {type(data).__name__}, not a game (an object with "
                                f"{', '.join(GAME_KEYS)})")
    missing = [key for key in GAME_KEYS if not isinstance(data.get(key), str)]
    if missing:
        raise AlfWorldDataError(f"{where}: no {', '.join(missing)} text in it: not a TextWorld PDDL game "
                                "(regenerate it: mage alfworld generate)")
    try:
        actions, rules = parse_grammar(data["grammar"])
        found = list(expressions(actions, rules))
    except ValueError as err:
        raise AlfWorldDataError(f"{where}: {err}") from None
    for rule, expression in found:  # every expression, reachable or not: code is refused wherever it stands
        try:
            expression_tree(expression)
        except UnsafeExpression as err:
            raise AlfWorldDataError(
                f"{where}: refused before loading: the grammar's {rule} holds an expression TextWorld would run "
                f"as Python code: {err}. {CODE_ADVICE}") from None
    try:
        task = parse_pddl(data["pddl_domain"], data["pddl_problem"])
    except ValueError as err:
        raise AlfWorldDataError(f"{where}: refused before loading: {err}") from None
    parameters = {action.name: [p.name.lstrip("?") for p in action.parameters] for action in task.actions}
    try:
        site, problem = next(scope_problems(actions, rules, parameters))
    except StopIteration:
        return
    except ValueError as err:  # a template that does not parse
        raise AlfWorldDataError(f"{where}: {err}") from None
    raise AlfWorldDataError(f"{where}: refused before loading: {site} {problem}. {CODE_ADVICE}")


def check_game_file(path: str) -> dict:
    """Read and check a game file (``check_game_data``); its JSON."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise AlfWorldDataError(f"{path}: unreadable game file ({err})") from None
    check_game_data(data, path)
    return data
