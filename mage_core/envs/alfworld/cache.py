"""Memos for two pure, slow functions under TextWorld's PDDL engine.

A reset of an ALFWorld game costs ~2 s here, nearly all of it in two computations
that depend on their text inputs alone:

- ``fast_downward.pddl2sas(domain, problem)``: fast-downward's translation of
  the game's PDDL into its SAS task. ``PddlState`` runs it twice (plain and
  optimised) on ``load`` and twice again on every ``reset``, and a meta-episode
  restarts the same game K times.
- the grammar's parse of a template (``textgen._parse_and_convert``, a TatSu
  parser), run for every admissible command's text at every step.

``install()`` wraps both with a bounded memo, once per process. The translation's
outputs (the task object and the SAS text) are only read by the engine; a parse
result is mutated (each symbol gets a context), so the memo hands out a deep copy.
Neither changes what the engine does: tests/integration/test_alfworld_env.py
plays walkthroughs with and without the memos and compares every observation and
admissible command.
"""

from __future__ import annotations

import copy
import functools

#: Distinct (domain, problem, options) translations kept: a suite plays a few games.
TRANSLATIONS = 64
#: Distinct template texts kept: one per command template and feedback rule.
PARSES = 4096

_installed = False
_originals: dict[str, object] = {}


def install() -> None:
    """Memoize fast-downward's translation and the grammar's template parse."""
    global _installed
    if _installed:
        return
    import fast_downward
    from textworld.envs.pddl import textgen

    translate = fast_downward.pddl2sas
    parse = textgen._parse_and_convert
    _originals.update(pddl2sas=translate, parse=parse)

    @functools.lru_cache(maxsize=TRANSLATIONS)
    def _translated(domain: str, problem: str, verbose: bool, optimize: bool):
        return translate(domain, problem, verbose=verbose, optimize=optimize)

    def pddl2sas(domain: str, problem: str, verbose: bool = False, optimize=False):
        return _translated(domain, problem, bool(verbose), bool(optimize))

    @functools.lru_cache(maxsize=PARSES)
    def _parsed(text: str, rule_name: str, trace: bool):
        return parse(text, rule_name=rule_name, trace=trace)

    def parse_and_convert(text, *args, rule_name=None, trace=False, **kwargs):
        if args or kwargs or not isinstance(text, str) or not isinstance(rule_name, str):
            return parse(text, *args, rule_name=rule_name, trace=trace, **kwargs)
        return copy.deepcopy(_parsed(text, rule_name, bool(trace)))

    fast_downward.pddl2sas = pddl2sas
    textgen._parse_and_convert = parse_and_convert
    _installed = True


def uninstall() -> None:
    """Put the original functions back (for tests that compare the two)."""
    global _installed
    if not _installed:
        return
    import fast_downward
    from textworld.envs.pddl import textgen

    fast_downward.pddl2sas = _originals["pddl2sas"]
    textgen._parse_and_convert = _originals["parse"]
    _installed = False
