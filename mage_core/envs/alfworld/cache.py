"""Memos for the pure, slow functions under TextWorld's PDDL engine and alfworld's expert.

A reset of an ALFWorld game cost ~2 s here and a step tens of milliseconds, nearly all
of it in computations that depend on their text inputs alone:

- ``fast_downward.pddl2sas(domain, problem)``: fast-downward's translation of the
  game's PDDL into its SAS task. ``PddlState`` runs it twice on every ``load`` and
  ``reset``: plainly (the task it plays) and optimised (the task its planner searches).
  The memo keeps both; and the optimised one is made only when a plan is first asked
  (``PddlState.replan``), since neither play nor alfworld's hand-coded expert ever plans
  (fast-downward's library only stores that text until it searches: ``load_sas_replan``).
- the grammar's parses: of the game's whole grammar document on every load
  (``logic._parse_and_convert``, the same text when the check replays a game the
  generator just played), of a template or rule text (``textgen._parse_and_convert``),
  and of a condition or query (``Rule.parse_conjunctive_query``), at every step;
- the derivation of a command's text from its template, at every step (derive.py);
- the hand-coded expert's ``remove_num_ids`` on every fact's text, at every step.

A third is the planner of the warm start's expert (``PddlState.replan``, asked at every
step when ``AlfWorldSettings.planner`` is on): fast-downward's search from the current
state, a pure function of the game's replanning task and its facts, and a demonstration
passes the same states again and again (every later attempt replays the expert's path).
Its memo keeps the plan's operator names by (task text, facts) and names them for the
game's entities at every call, as the original does.

``install()`` wraps them all with bounded memos, once per process. The translation's
outputs (the task object and the SAS text) and a parsed document or query are only read
by the engine; a template's parse is mutated (each symbol gets a context), so that memo
hands out a deep copy. None changes what the engine does: tests/integration/test_alfworld_env.py
plays walkthroughs and plans with and without the memos and compares every observation,
admissible command and plan, and tests/integration/test_alfworld_generate.py generates
games both ways and compares the files.
"""

from __future__ import annotations

import copy
import functools

#: Distinct (domain, problem, options) translations kept: a dataset's check replays the
#: games its generation just played, and a suite plays a few games.
TRANSLATIONS = 64
#: Distinct template texts kept: one per command template and feedback rule.
PARSES = 4096
#: Distinct grammar documents kept (one per game: its task sentence is in it).
DOCUMENTS = 64
#: Distinct (game, state) plans kept: a demonstration set visits a few hundred states a game.
PLANS = 65536

_installed = False
_originals: dict[str, object] = {}
#: True while a ``PddlState`` is built: the planner's translation waits until a plan is asked.
_deferring = False


def install() -> None:
    """Memoize the translation, the parses, the derivations, the planner and the expert's
    text clean-up (and put off the planner's translation until a plan is asked)."""
    global _installed
    if _installed:
        return
    import fast_downward
    from alfworld.agents.expert import handcoded_expert
    from textworld.envs.pddl import logic, textgen
    from textworld.logic import Rule

    from mage_core.envs.alfworld import derive

    translate = fast_downward.pddl2sas
    parse = textgen._parse_and_convert
    parse_document = logic._parse_and_convert
    parse_query = Rule.parse_conjunctive_query.__func__
    remove_num_ids = handcoded_expert.BasePolicy.remove_num_ids
    _originals.update(pddl2sas=translate, parse=parse, parse_document=parse_document, parse_query=parse_query,
                      remove_num_ids=remove_num_ids)

    @functools.lru_cache(maxsize=TRANSLATIONS)
    def _translated(domain: str, problem: str, verbose: bool, optimize: bool):
        return translate(domain, problem, verbose=verbose, optimize=optimize)

    def pddl2sas(domain: str, problem: str, verbose: bool = False, optimize=False):
        if optimize and _deferring:
            return None, ""  # PddlState keeps the text and hands it to load_sas_replan, which only stores it
        return _translated(domain, problem, bool(verbose), bool(optimize))

    @functools.lru_cache(maxsize=PARSES)
    def _parsed(text: str, rule_name: str, trace: bool):
        return parse(text, rule_name=rule_name, trace=trace)

    def parse_and_convert(text, *args, rule_name=None, trace=False, **kwargs):
        if args or kwargs or not isinstance(text, str) or not isinstance(rule_name, str):
            return parse(text, *args, rule_name=rule_name, trace=trace, **kwargs)
        return copy.deepcopy(_parsed(text, rule_name, bool(trace)))

    @functools.lru_cache(maxsize=DOCUMENTS)
    def _document(text: str, rule_name: str):
        return parse_document(text, rule_name=rule_name)

    def parse_document_once(text, *args, rule_name=None, **kwargs):
        if args or kwargs or not isinstance(text, str) or not isinstance(rule_name, str):
            return parse_document(text, *args, rule_name=rule_name, **kwargs)
        return _document(text, rule_name)  # GameLogic copies its actions and rules into its own containers

    query = functools.lru_cache(maxsize=PARSES)(functools.partial(parse_query, Rule))
    clean = functools.lru_cache(maxsize=PLANS)(functools.partial(remove_num_ids, None))  # it never reads self

    fast_downward.pddl2sas = pddl2sas
    textgen._parse_and_convert = parse_and_convert
    logic._parse_and_convert = parse_document_once
    Rule.parse_conjunctive_query = classmethod(lambda cls, expr: query(expr))
    handcoded_expert.BasePolicy.remove_num_ids = lambda self, text: clean(text)
    _install_plans()
    derive.install()
    _installed = True


def _install_plans() -> None:
    """Memoize the planner's operator plan by (replanning task, facts), and build a state
    without the planner's translation (made at its first plan)."""
    import fast_downward
    from textworld.envs.pddl.logic import PddlState
    from textworld.utils import check_flag

    replan = PddlState.replan
    init = PddlState.__init__
    _originals.update(replan=replan, init=init)
    plans: dict[tuple[str, frozenset], tuple[str, ...]] = {}

    def deferred_init(self, downward_lib, pddl_problem, logic):
        global _deferring
        _deferring = True
        try:
            init(self, downward_lib, pddl_problem, logic)
        finally:
            _deferring = False

    def memo_replan(self, infos):
        verbose = check_flag("TW_PDDL_DEBUG")
        if not self.sas_replan:  # built while deferring: the translation PddlState's init would have made
            _, self.sas_replan = fast_downward.pddl2sas(self._logic.domain, self.pddl_problem, verbose=verbose,
                                                       optimize=True)
        key = (self.sas_replan, frozenset(self.facts))
        plan = plans.get(key)
        if plan is None:  # what PddlState.replan does before naming the plan's entities
            self.downward_lib.load_sas_replan(self.sas_replan.encode("utf-8"))  # this state's task, as at its init
            if self.downward_lib.replan(verbose):
                operators = (fast_downward.Operator * self.downward_lib.get_last_plan_length())()
                self.downward_lib.get_last_plan(operators)
                plan = tuple(op.name for op in operators)
            else:
                plan = ()
            if len(plans) >= PLANS:
                plans.clear()
            plans[key] = plan
        return self.plan_to_templated_actions(list(plan), infos) if plan else []

    PddlState.__init__ = deferred_init
    PddlState.replan = memo_replan


def uninstall() -> None:
    """Put the original functions back (for tests that compare the two)."""
    global _installed
    if not _installed:
        return
    import fast_downward
    from alfworld.agents.expert import handcoded_expert
    from textworld.envs.pddl import logic, textgen
    from textworld.envs.pddl.logic import PddlState
    from textworld.logic import Rule

    from mage_core.envs.alfworld import derive

    fast_downward.pddl2sas = _originals["pddl2sas"]
    textgen._parse_and_convert = _originals["parse"]
    logic._parse_and_convert = _originals["parse_document"]
    Rule.parse_conjunctive_query = classmethod(_originals["parse_query"])
    handcoded_expert.BasePolicy.remove_num_ids = _originals["remove_num_ids"]
    PddlState.replan = _originals["replan"]
    PddlState.__init__ = _originals["init"]
    derive.uninstall()
    _installed = False
