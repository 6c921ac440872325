"""Memos for two pure, slow functions under TextWorld's PDDL engine.

A reset of an ALFWorld game costs ~2 s here, nearly all of it in two computations
that depend on their text inputs alone:

- ``fast_downward.pddl2sas(domain, problem)``: fast-downward's translation of
  the game's PDDL into its SAS task. ``PddlState`` runs it twice (plain and
  optimised) on ``load`` and twice again on every ``reset``, and a meta-episode
  restarts the same game K times.
- the grammar's parse of a template (``textgen._parse_and_convert``, a TatSu
  parser), run for every admissible command's text at every step.

A third is the planner of the warm start's expert (``PddlState.replan``, asked at every
step when ``AlfWorldSettings.planner`` is on): fast-downward's search from the current
state, a pure function of the game's replanning task and its facts, and a demonstration
passes the same states again and again (every later attempt replays the expert's path).
Its memo keeps the plan's operator names by (task text, facts) and names them for the
game's entities at every call, as the original does.

``install()`` wraps all three with a bounded memo, once per process. The translation's
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
#: Distinct (game, state) plans kept: a demonstration set visits a few hundred states a game.
PLANS = 65536

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
    _install_plans()
    _installed = True


def _install_plans() -> None:
    """Memoize the planner's operator plan by (replanning task, facts)."""
    import fast_downward
    from textworld.envs.pddl.logic import PddlState
    from textworld.utils import check_flag

    replan = PddlState.replan
    _originals.update(replan=replan)
    plans: dict[tuple[str, frozenset], tuple[str, ...]] = {}

    def memo_replan(self, infos):
        key = (self.sas_replan, frozenset(self.facts))
        plan = plans.get(key)
        if plan is None:  # what PddlState.replan does before naming the plan's entities
            if self.downward_lib.replan(check_flag("TW_PDDL_DEBUG")):
                operators = (fast_downward.Operator * self.downward_lib.get_last_plan_length())()
                self.downward_lib.get_last_plan(operators)
                plan = tuple(op.name for op in operators)
            else:
                plan = ()
            if len(plans) >= PLANS:
                plans.clear()
            plans[key] = plan
        return self.plan_to_templated_actions(list(plan), infos) if plan else []

    PddlState.replan = memo_replan


def uninstall() -> None:
    """Put the original functions back (for tests that compare the two)."""
    global _installed
    if not _installed:
        return
    import fast_downward
    from textworld.envs.pddl import textgen

    from textworld.envs.pddl.logic import PddlState

    fast_downward.pddl2sas = _originals["pddl2sas"]
    textgen._parse_and_convert = _originals["parse"]
    PddlState.replan = _originals["replan"]
    _installed = False
