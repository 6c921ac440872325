"""The grammar's derivations made cheap: a memo keyed by everything a derivation reads,
and a context copied without copying the entities in it.

At every step TextWorld's PDDL engine derives the text of every admissible command
from its template (``PddlEnv._gather_infos``: ``grammar.derive(template, context)``),
and the feedback of the command played. A derivation copies its context deeply
for every symbol and parses the conditions it meets, so an ALFWorld step cost tens
of milliseconds, and the same commands ("go to cabinet 3") were derived again at
every step.

What a derivation reads (TextWorld 1.7's ``textgen``, read 2026-11-28):

- the grammar's rules: the memo lives on the grammar object, one per loaded game;
- the start text, and the variables its expressions name (with ``grammar.install``, an
  expression reads only a variable's text attributes, ``grammar.TEXT_ATTRIBUTES``);
- the context's ``mapping`` (placeholder -> entity) where its queries and the conditions
  of the rules it reaches look (``State.all_assignments``): the entries of their
  placeholders, and the mapping's values when a query may bind a new placeholder (it
  binds none to an entity the mapping holds);
- the state's facts, through those queries and conditions, and only the facts of the
  predicates they name (a query matches facts by predicate);
- the game's entity infos (the names a query's results print as): set when the game is
  loaded (``AlfredDemangler.load``) and not changed after.

So the memo's key is the start text and those parts of the context (found once per start
text by walking its symbols and the rules they name, as ``grammar.scope_problems`` does).
A text whose walk meets anything else (a rule the grammar lacks, a symbol kind it does not
know, a text that does not parse) is derived by TextWorld as before, unmemoized. A
derivation draws no random numbers, so the memo changes nothing else either.

``textgen.copy_context`` deep-copied the variables (entity infos) and the mapping
(placeholders and entities) for every symbol; nothing changes an entity, a placeholder
or a variable during a derivation (queries add entries to the copied dicts, expressions
read attributes), so copying the two dicts gives the same texts.
tests/integration/test_alfworld_env.py plays walkthroughs with and without both and
compares every observation and admissible command.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from mage_core.envs.alfworld.grammar import LIST_RULES, TEXT_ATTRIBUTES

#: Derivations kept per loaded game before the memo starts afresh.
DERIVATIONS = 50_000

_originals: dict[str, Any] = {}


def install() -> None:
    """Memoize ``ContextSensitiveGrammar.derive`` and copy contexts shallowly (once per
    process; installs ``grammar.install`` first, which makes an expression read nothing
    but the variables)."""
    if _originals:
        return
    from textworld.envs.pddl import textgen

    from mage_core.envs.alfworld import grammar

    grammar.install()
    _originals.update(derive=textgen.ContextSensitiveGrammar.derive, copy_context=textgen.copy_context)
    textgen.ContextSensitiveGrammar.derive = _derive
    textgen.copy_context = copy_context


def uninstall() -> None:
    """Put TextWorld's own derivation back (for tests that compare the two)."""
    if not _originals:
        return
    from textworld.envs.pddl import textgen

    textgen.ContextSensitiveGrammar.derive = _originals.pop("derive")
    textgen.copy_context = _originals.pop("copy_context")


def copy_context(context: dict) -> dict:
    """``textgen.copy_context`` with the variables and the mapping copied as dicts (the
    entities in them are shared: see the module docstring)."""
    return {
        "state": context["state"],
        "facts": context["facts"],
        "variables": dict(context["variables"]),
        "mapping": dict(context["mapping"]),
        "entity_infos": context["entity_infos"],
    }


def _derive(self: Any, start: str, context: dict = {}) -> str:  # noqa: B006  (TextWorld's signature)
    """``ContextSensitiveGrammar.derive`` through the memo."""
    state = context.get("state") if isinstance(context, dict) else None
    if state is None or not isinstance(start, str):
        return _originals["derive"](self, start, context)
    memo = self.__dict__.get("_mage_memo")
    if memo is None or memo["infos"] is not context.get("entity_infos") or len(memo["texts"]) > DERIVATIONS:
        memo = self.__dict__["_mage_memo"] = {"infos": context.get("entity_infos"), "reads": {}, "texts": {}}
    reads = memo["reads"].get(start)
    if reads is None:
        reads = memo["reads"][start] = _reads(self, start)
    key = _key(start, reads, context, state)
    if key is None:
        return _originals["derive"](self, start, context)
    text = memo["texts"].get(key)
    if text is None:
        text = memo["texts"][key] = _originals["derive"](self, start, context)
    return text


class Reads(NamedTuple):
    """What deriving a text can read besides the grammar and the entity infos."""

    predicates: frozenset  # names of the predicates its queries and conditions match facts of
    placeholders: frozenset  # the placeholders (name, type) of those queries and conditions
    names: frozenset  # the variable names its expressions read


def _key(start: str, reads: Reads | None, context: dict, state: Any) -> tuple | None:
    """The memo's key: the text, the variables its expressions name (their text attributes),
    the mapping's entries for the placeholders its queries or expressions name, the values of
    the whole mapping if a query may bind a new placeholder (``State.all_assignments`` gives
    a new placeholder no entity the mapping already holds), and the facts of its predicates.
    None for a text or context the memo leaves to TextWorld."""
    if reads is None:
        return None
    variables, mapping = context.get("variables"), context.get("mapping")
    try:
        named = tuple(sorted((name, *(getattr(variables[name], a) for a in TEXT_ATTRIBUTES))
                             for name in reads.names if name in variables))
        entries = frozenset((ph, var) for ph, var in mapping.items()
                            if ph in reads.placeholders or ph.name in reads.names)
        taken = None if reads.placeholders <= mapping.keys() else frozenset(mapping.values())
    except (AttributeError, TypeError):  # not TextWorld's entities and placeholders
        return None
    facts = frozenset(fact for signature, group in state._facts.items() if signature.name in reads.predicates
                      for fact in group)
    return start, named, entries, taken, facts


def _reads(grammar: Any, start: str) -> Reads | None:
    """What deriving ``start`` can read, from its symbols and every rule it can reach (the
    alternatives of a ``#rule#``, the list rules of a ``[...]``); None when the walk meets a
    rule the grammar lacks, a symbol it does not know or a text that does not parse."""
    import ast

    from textworld.envs.pddl import textgen
    from textworld.logic import Rule

    from mage_core.envs.alfworld.grammar import expression_tree

    predicates: set = set()
    placeholders: set = set()
    names: set = set()
    seen: set = set()

    def query(text: str) -> None:
        for predicate in Rule.parse_conjunctive_query(text).preconditions:
            predicates.add(predicate.name)
            placeholders.update(predicate.parameters)

    try:  # TatSu's and the expression check's errors: TextWorld's derive meets them itself
        stack = list(textgen._parse_and_convert(start, rule_name="symbols"))
        while stack:
            symbol = stack.pop()
            if isinstance(symbol, textgen.EvalSymbol):
                names.update(node.id for node in ast.walk(expression_tree(symbol.expression))
                             if isinstance(node, ast.Name))
            elif isinstance(symbol, textgen.ListSymbol):  # display_list may name the list rules
                stack.append(symbol.symbol)
                stack.extend(textgen.NonterminalSymbol(rule) for rule in LIST_RULES)
            elif isinstance(symbol, textgen.ConditionalSymbol):
                if symbol.given:
                    query(symbol.given)
                stack.append(symbol.expression)
            elif isinstance(symbol, textgen.NonterminalSymbol):
                if str(symbol) in seen:
                    continue
                seen.add(str(symbol))
                rules = grammar._rules.get(str(symbol))
                if not rules:
                    return None
                for rule in rules:
                    if rule.condition:
                        query(rule.condition)
                    stack.extend(rule.rhs)
            elif not isinstance(symbol, textgen.TerminalSymbol):
                return None
    except Exception:  # noqa: BLE001
        return None
    return Reads(frozenset(predicates), frozenset(placeholders), frozenset(names))
