"""What a task tells the rest of the library about itself (docs/architecture.md, "Tasks").

Each environment declares one ``Task`` in its own folder (``mage_core/envs/<name>/task.py``)
and ``mage_core.envs.registry`` lists those modules. Code outside ``mage_core/envs/`` asks the
task (``task(name).headline``, ``task(name).data``, ...) instead of comparing its name, the way
OpenSpiel's algorithms read a game's ``GameType`` rather than branching on which game it is.

A task module stays cheap to import: what needs a heavy or game-specific module (rules,
catalogues, data readers) is a function of the task module that imports it when called, or
a ``"module:function"`` string (``TaskData.generate``, ``TaskExact``, ``TaskProbes``,
``analyze``, ``expert``) that ``registry.resolve`` imports when used. Those hooks point into the
game's own folder, so that code outside ``mage_core/envs/`` reaches a game's analyses through
its task and imports none of its modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Literal, Mapping

if TYPE_CHECKING:
    import numpy as np


#: The stages that read a data-backed task's files (``TaskData.problems``).
DataStage = Literal["train", "evaluate"]


@dataclass(frozen=True)
class TaskData:
    """A task whose levels, products or games live in files (``env.<name>.data_path``).

    ``problems(cfg, stage)``: what keeps ``stage`` from playing the task, as messages that
    name the key (empty: playable). ``params``: ``"module:Class"`` of its ``data.<name>``
    section of params.yaml (what the generator takes). ``generate``: ``"module:function"``
    of the function ``(cfg, out) -> exit code`` that writes the data folder from params
    (``mage data generate <name>``). ``texts(cfg)``: the task's
    own words for the embedded tokenizer's corpus (random play reaches few of them).
    ``corpus_meta_episodes``: at most this many random meta-episodes
    in the tokenizer corpus (None: as many as any game; a slow reset wants fewer).
    """

    problems: Callable[[Any, DataStage], list[str]]
    params: str
    generate: str
    texts: Callable[[Any], Iterator[str]]
    corpus_meta_episodes: int | None = None


@dataclass(frozen=True)
class TaskExact:
    """A two-player game whose greedy policy has an exact value against deterministic
    opponents and whose evaluation suites have exact ceilings (Kuhn Poker: docs/method.md
    section 11). Each field is ``"module:function"`` in the game's own folder, resolved when used.

    ``suite(entries, weights, opponent_settings, num_episodes, restart, early_stop, say)``: the
    exact figures an evaluation suite's scores are read against, as ``(figures, secured)``:
    ``figures`` holds ``all/ceiling_<name>`` and, per ``<opponent>/<seat>`` group,
    ``best_response_value`` and ``ceiling_known`` (the final episode with the opponent known);
    ``secured`` gives, for ``all`` and each group, what an equilibrium strategy secures in its
    seats (``mage evaluate`` writes an exploitation ratio only where ``ceiling_known`` exceeds
    it). ``entries`` are the suite's population entries, ``weights`` its (opponent, seat)
    probabilities; ``say`` prints a line (a ceiling left out, and why).
    ``greedy_cases(entries, opponent_settings, num_episodes, restart)``: every
    ((opponent, seat), chance outcomes, probability) the exact sum runs over, or None where an
    opponent is stochastic (no finite sum; ``train.select_on: exact_greedy`` checks this).
    ``greedy_values(policy, entries)``: the greedy policy's exact value by episode index
    (``all/<headline>_exact_ep<k>`` and per group), played through ``policy`` (an
    ``envs.policy_view.PolicyView``); empty where the population has no exact sum.
    """

    suite: str
    greedy_cases: str
    greedy_values: str


@dataclass(frozen=True)
class TaskProbes:
    """A two-player game whose policy's play reads as a strategy of the game (Kuhn Poker: its
    first hand as a behaviour strategy, from the scores of the legal actions). Each field is
    ``"module:function"`` in the game's own folder, resolved when used; ``policy`` is the
    policy as an ``envs.policy_view.PolicyView`` shows it (the trainer passes one in).

    ``strategy(policy)``: the policy's strategy, or None where it cannot be read (free-text
    actions). ``metrics(strategy)``: ``eval/...`` figures of it (Kuhn: its exploitability and
    P(BET) per information set). ``suite(policy, entries)``: figures of one evaluation suite
    (Kuhn: opening bets, hand-2 bets after hand 1). ``command(policy, entries, csv_path)``: what
    ``mage <tag> probe`` prints (and writes), its exit code. ``league_members(strategy, add,
    iteration)``: the members ``train.league`` gains from the policy's strategy (``add``: its
    ``exploiter`` and/or ``snapshot``), as ``({name: table}, the exploiter's value)``.
    ``league_opponents(opponent_settings, members)``: the opponent settings with the league's
    members playable by name.
    """

    strategy: str
    metrics: str
    suite: str
    command: str
    league_members: str
    league_opponents: str


@dataclass(frozen=True)
class TaskPrompt:
    """How a prompt introduces the task: ``tag`` heads a compact-style prompt (one word),
    ``rules`` opens a paper-style prompt (role, rules, goal) and ``action_format`` closes it
    (may use ``{moves}``, the moves per turn)."""

    tag: str
    rules: str
    action_format: str


@dataclass(frozen=True)
class Task:
    """One environment as the trainer, the evaluation and the reports see it.

    - ``title``: the name reports print (``Kuhn Poker``); ``report_order``: the position of
      its column in Table 1 (the paper's order: Kuhn, Tic-Tac-Toe, then the single-agent tasks).
    - ``env_class``: ``"module:Class"`` of the agent environment (``envs.base.Env``).
    - ``params``: ``"module:Class"`` of its settings (an ``envs.params.EnvSettings``): its
      section of params.yaml, ``env.<name>``, and what its environment takes.
    - ``prompt``: how the prompt introduces the task (``TaskPrompt``).
    - ``new_game``: two-player games only: a fresh rules state (``GameState``) from a
      generator (chance draws such as a deal use it). None marks a single-agent task:
      no opponents, no seats.
    - ``opponents``: two-player games: ``"module:ATTRIBUTE"`` of its opponent catalogue
      (``mage_core.opponents.registry.Catalogue``).
    - ``headline``: the per-episode measure a run is judged by (``success``, or ``chips``
      where a fixed strategy already maximises the win rate: section 8 of docs/method.md).
      A task with ``headline != "success"`` is *scored*: its reports lead with the score,
      in that unit (``score_unit``; ``reward`` for the others).
    - ``reward_scale(settings)``: task reward per score unit (Kuhn: reward per chip).
    - ``reward_bounds(settings)``: bounds of one episode's task reward R_k (section 3).
      ``settings`` is the task's settings (``cfg.env.<name>``).
    - ``episode_noun``: what one episode is called in reports (Kuhn: ``hand``).
    - ``draws``: the game can end level (its reports show a draw rate).
    - ``exact_values``: the greedy policy's value against deterministic opponents can be
      summed exactly (``chips_exact``), and suites have exact ceilings: the hooks that compute
      them (``TaskExact``), None otherwise.
    - ``strategy_probes``: the policy's first hand reads as a behaviour strategy (opening
      bets, first-hand exploitability, the league; constrained actions only): the hooks that
      read it (``TaskProbes``), None otherwise.
    - ``analyze``: ``"module:function"`` of the game's exact analysis, ``mage <tag> analyze``
      (``(cfg, **options) -> exit code``: best responses, ceilings), or None.
    - ``in_domain_params``: env overrides of the in-domain suite (a data split).
    - ``ood_param``: single-agent tasks: the env setting an out-of-domain suite changes
      (``num_boxes``, ``split``); None: an OOD suite is an opponent population.
      ``ood_suite``: ``"module:Class"`` of one such suite in ``evaluation.ood.<name>``, and
      ``ood_defaults`` the suites params.yaml gets when it names none ({suite: fields}).
    - ``reference_keys``: the keys beyond the common ones that the report's run settings
      compare with the paper's reference profile of the task.
    - ``method_values``: ``algorithm`` values every method preset takes on this task
      (Sokoban: ``gamma_traj`` 0.9, as the reference training script); explicit keys win.
    - ``action_words(env)``: compact action words that states after the first admit beyond
      the first state's (a reset env is given), so each stays one token of the embedded
      tokenizer (WebShop's pages, ALFWorld's c1..cN, MineSweeper's every cell).
    - ``data``: a data-backed task's hooks (``TaskData``), None otherwise.
    - ``expert``: single-agent tasks: ``"module:function"`` of ``act(env, rng) -> str``, an
      expert's next action from any position of a reset environment, one of its
      ``legal_actions()`` (the demonstrations of ``mage sft``); None: no expert yet.
      ``expert_settings``: what the expert needs of the environment's settings beyond a
      player's (none of today's experts: ALFWorld's searches instead of asking the engine's
      planner), applied to the demonstrations' environments only. ``expert_memory``:
      the expert reads its memory (what earlier attempts revealed: ``envs.base.Revealed``), so
      on a replayed task its later attempts must beat its first (``mage sft`` checks it before
      cloning). ``known_ceiling``: ``"module:function"`` of ``(env) -> bool``, whether a player
      who knows the hidden state of the task ``env`` plays (as reset, whatever was played since)
      can win it within the turn limit: the share of a set's tasks for which it can is the exact
      ceiling of any play on that set (MineSweeper: the board known), printed next to the
      expert's figures and written by ``mage evaluate`` (``all/ceiling_known``); None: no such
      ceiling.
    - ``seeded_tasks``: single-agent tasks whose seed makes the task (Sokoban's levels,
      MineSweeper's boards), so that two seeds can make the same one: the env names its task
      by content (``envs.base.KeyedTask``), and report, selection and training sets draw
      their tasks from disjoint content pools (``envs.task_sets``). False: the tasks are a
      fixed list split by index (WebShop's goals, ALFWorld's games) or a two-player game.
    """

    name: str
    title: str
    report_order: int
    env_class: str
    params: str
    prompt: TaskPrompt
    reward_bounds: Callable[[Any], tuple[float, float]]
    new_game: Callable[[np.random.Generator], Any] | None = None
    opponents: str | None = None
    headline: str = "success"
    reward_scale: Callable[[Any], float] = lambda settings: 1.0
    episode_noun: str = "episode"
    draws: bool = False
    exact_values: TaskExact | None = None
    strategy_probes: TaskProbes | None = None
    analyze: str | None = None
    in_domain_params: Mapping[str, Any] = field(default_factory=dict)
    ood_param: str | None = None
    ood_suite: str | None = None
    ood_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    reference_keys: tuple[str, ...] = ()
    method_values: Mapping[str, Any] = field(default_factory=dict)
    action_words: Callable[[Any], Iterable[str]] | None = None
    data: TaskData | None = None
    expert: str | None = None
    expert_settings: Mapping[str, Any] = field(default_factory=dict)
    expert_memory: bool = False
    known_ceiling: str | None = None
    seeded_tasks: bool = False

    @property
    def two_player(self) -> bool:
        return self.new_game is not None

    @property
    def scored(self) -> bool:
        """The headline is the score (chips), not the success rate."""
        return self.headline != "success"

    @property
    def score_unit(self) -> str:
        """What one unit of the score column is: the headline of a scored task, else ``reward``."""
        return self.headline if self.scored else "reward"
