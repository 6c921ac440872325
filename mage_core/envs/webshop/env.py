r"""The WebShop agent environment (Yao et al. 2022), written from its published
behaviour (docs/environments.md lists where it differs from the official code).

Pages and what can be clicked on them (clickables are lower case):

- search: ``WebShop [SEP] Instruction: [SEP] <goal> [SEP] Search``; only
  ``search[query]``;
- results: ``Instruction: [SEP] <goal> [SEP] Back to Search [SEP] Page p (Total
  results: n) [SEP] < Prev [SEP] Next > [SEP] <ASIN> [SEP] <title> [SEP] <price>
  ...`` (10 a page of at most 50 hits; "< Prev" from page 2; "Next >" always);
- item: ``... [SEP] Back to Search [SEP] < Prev [SEP] <option type> [SEP]
  <value> ... [SEP] <title> [SEP] Price: <price> [SEP] Rating: N.A. [SEP]
  Description [SEP] Features [SEP] Reviews [SEP] Buy Now``; clicking a value
  selects it for its type (the page does not show the selection, as the
  official text page does not);
- description / features / reviews: ``... [SEP] Back to Search [SEP] < Prev [SEP]
  <content>``.

Actions: ``search[query]`` on any page (a new search, options cleared) and
``click[name]`` for a clickable of the page, read as the official
``(.+)\[(.+)\]`` reads them (the argument runs to the last "]", text after it is
ignored) but with the verb's case and the argument's spacing and case
normalised. Anything else is invalid: the page stays, no reward (the official
env), and the turn counts. ``click[buy now]`` shows the done page ("Thank you for
shopping with us! ...") and ends the episode with the purchase's score in [0, 1]
(``reward.purchase_reward``);
the task reward is ``success_reward`` when the score is 1 (verl-agent's success)
and ``partial_reward_scale x score`` otherwise (0 by default, as verl-agent). An
episode the turn limit ends pays 0, the worst legal outcome, so stalling never
pays more than buying the wrong thing.
"""

from __future__ import annotations

import functools
import re
from typing import Sequence

import numpy as np

from mage_core.envs.base import Outcome, Revealed, StepResult, check_generator, extract_action_text, split_index_error
from mage_core.envs.webshop.catalogue import Catalogue, CatalogueError, Goal, load_catalogue
from mage_core.envs.webshop.params import WebShopSettings
from mage_core.envs.webshop.reward import RewardParts, purchase_reward
from mage_core.envs.webshop.schema import normalise_option
from mage_core.envs.webshop.search import TOP_N, SearchEngine

SEP = " [SEP] "
PAGE_SIZE = 10
#: The official ``(.+)\[(.+)\]`` for the two verbs: greedy, so the argument runs to
#: the last "]" and text after it is ignored.
_ACTION = re.compile(r"^\s*(search|click)\s*\[(.+)\]", re.IGNORECASE | re.DOTALL)
#: The page after ``buy now`` (the official done page, without its hidden debug text).
DONE_PAGE = "Thank you for shopping with us! [SEP] Your code: [SEP] None"
_SUB_PAGES = ("description", "features", "reviews")


#: Compact (one-token) names of the fixed clickables; results are r1..r10 by
#: position, option values o1..oN in the item page's order.
_COMPACT_CLICKS = {"back to search": "back", "< prev": "prev", "next >": "next", "description": "desc",
                   "features": "feat", "reviews": "rev", "buy now": "buy"}


@functools.lru_cache(maxsize=4)
def load_shop(data_path: str, load_seed: int, skip_unknown_goals: bool) -> tuple[Catalogue, SearchEngine]:
    """A catalogue folder and its search index, loaded once per process."""
    catalogue = load_catalogue(data_path, seed=load_seed, skip_unknown_goals=skip_unknown_goals)
    return catalogue, SearchEngine([p.search_text() for p in catalogue.products])


def split_goals(catalogue: Catalogue, settings: WebShopSettings) -> tuple[Goal, ...]:
    """The goals of ``settings.split`` (see ``WebShopSettings``)."""
    in_domain = catalogue.split("train", num_eval=0)  # every in-domain goal, in order
    first, second = settings.num_eval, settings.num_eval + settings.num_select
    goals = {"eval": in_domain[:first], "select": in_domain[first:second], "train": in_domain[second:],
             "ood": catalogue.split("ood")}[settings.split]
    if not goals:
        raise CatalogueError(
            f"{settings.data_path}: the WebShop split {settings.split!r} has no goals ({len(in_domain)} in-domain "
            f"goals, num_eval {settings.num_eval}, num_select {settings.num_select}); generate a larger catalogue "
            "or lower env.webshop.num_eval / num_select")
    return goals


class WebShopEnv:
    """One shopping goal per episode, drawn from ``goals`` by the generator;
    ``restart()`` replays the same goal from the search page. Without
    ``catalogue``, the catalogue of ``settings.data_path`` and the goals of
    ``settings.split`` (``load_shop``, ``split_goals``)."""

    name = "webshop"

    def __init__(self, settings: WebShopSettings, rng: np.random.Generator, catalogue: Catalogue | None = None,
                 goals: Sequence[Goal] | None = None, engine: SearchEngine | None = None) -> None:
        if catalogue is None:
            catalogue, engine = load_shop(settings.data_path, settings.load_seed, settings.skip_unknown_goals)
        if goals is None:
            goals = split_goals(catalogue, settings)
        if not goals:
            raise ValueError("WebShopEnv needs at least one goal")
        missing = sorted({g.asin for g in goals} - set(catalogue.by_asin))
        if missing:
            raise ValueError(f"WebShop goals name products the catalogue lacks: {', '.join(missing[:5])}")
        self.settings = settings
        self.catalogue = catalogue
        self.goals = tuple(goals)
        self._rng = check_generator(rng, "WebShopEnv")
        self._engine = engine or SearchEngine([p.search_text() for p in catalogue.products])
        self.goal: Goal | None = None
        self.last_purchase: RewardParts | None = None

    # ------------------------------------------------------------------ life cycle
    def reset(self) -> None:
        self.goal = self.goals[int(self._rng.integers(len(self.goals)))]
        self.restart()

    def split_size(self) -> int:
        return len(self.goals)

    def reset_to(self, index: int) -> None:
        """Goal ``index`` of the split (the catalogue's goal order is already shuffled)."""
        if not 0 <= index < len(self.goals):
            raise split_index_error(index, len(self.goals), "goal")
        self.set_goal(self.goals[index])

    def set_goal(self, goal: Goal) -> None:
        """Start an episode on a given goal (evaluation over a fixed list)."""
        if goal.asin not in self.catalogue.by_asin:
            raise ValueError(f"goal names product {goal.asin}, which the catalogue lacks")
        self.goal = goal
        self.restart()

    def task_key(self) -> str:
        """The goal as asked and as scored: its instruction, attributes, options, price limit and
        the product type the reward matches (not the ASIN it was written for: two look-alike
        products' goals that ask the same are one task; ``envs.base.KeyedTask``)."""
        if self.goal is None:
            raise RuntimeError("WebShopEnv.task_key() before reset()")
        g = self.goal
        return repr(("webshop", g.instruction, g.attributes, g.options, g.price_upper, g.name, g.query,
                     g.product_category, g.category))

    def restart(self) -> None:
        if self.goal is None:
            raise RuntimeError("WebShopEnv.restart() before reset()")
        self._page = "search"
        self._hits: list[int] = []
        self._page_num = 1
        self._asin: str | None = None
        self._options: dict[str, str] = {}
        self._turn = 0
        self._done = False
        self.last_purchase = None

    @property
    def done(self) -> bool:
        return self._done

    @property
    def turn(self) -> int:
        return self._turn

    @property
    def page(self) -> str:
        """search, results, item, description, features, reviews or done (after buying)."""
        return self._page

    @property
    def open_asin(self) -> str | None:
        """The product whose item page (or sub-page) is open."""
        return self._asin

    @property
    def selected_options(self) -> dict[str, str]:
        """Option type -> the value clicked on the open item page."""
        return dict(self._options)

    # ------------------------------------------------------------------ pages
    def _product(self):
        return self.catalogue.by_asin[self._asin]

    def _page_items(self) -> list:
        return self.results_page(self._page_num)

    def clickables(self) -> list[str]:
        """What ``click[...]`` accepts on the current page, in page order."""
        if self._done or self._page == "search":
            return []
        if self._page == "results":
            names = ["back to search"] + (["< prev"] if self._page_num > 1 else []) + ["next >"]
            return names + [p.asin.lower() for p in self._page_items()]
        if self._page == "item":
            values = [v for vals in self._product().options.values() for v in vals]
            return list(dict.fromkeys(["back to search", "< prev", *_SUB_PAGES, "buy now", *values]))
        return ["back to search", "< prev"]

    def observation(self) -> str:
        goal = self.goal.instruction
        if self._page == "done":
            return DONE_PAGE
        if self._page == "search":
            return SEP.join(["WebShop", "Instruction:", goal, "Search"])
        head = ["Instruction:", goal, "Back to Search"]
        if self._page == "results":
            parts = head + [f"Page {self._page_num} (Total results: {len(self._hits)})"]
            parts += (["< Prev"] if self._page_num > 1 else []) + ["Next >"]
            for p in self._page_items():
                parts += [p.asin, p.name, p.price_text]
            return _join(parts)
        product = self._product()
        if self._page == "item":
            parts = head + ["< Prev"]
            for option_type, values in product.options.items():
                parts += [option_type, *values]
            parts += [product.name, f"Price: {product.price_text}", "Rating: N.A.", "Description",
                      "Features", "Reviews", "Buy Now"]
            return _join(parts)
        content = {"description": [product.description],
                   "features": list(product.bullets), "reviews": []}[self._page]
        return _join(head + ["< Prev", *content])

    def compact_observation(self) -> str:
        """The page in few tokens for the embedded model (prompt style ``compact``):
        the goal without its filler words, the page kind, and what can be clicked
        under its one-word name (``r3 <title> <price>``, ``o2 <value>``); once
        the episode is over, what was bought and ``won`` / ``lost`` / ``timeout``."""
        goal = compact_goal(self.goal.instruction)
        if self._done:
            if self.last_purchase is None:
                return f"{goal} timeout"
            product = self._product()
            chosen = " ".join(self._options.values())
            return f"{goal} bought {product.name.lower()} {chosen} {'won' if self.last_purchase.reward == 1.0 else 'lost'}"
        if self._page == "search":
            return f"{goal} search"
        if self._page == "results":
            rows = [f"r{i} {p.name.lower()} {p.price_text}" for i, p in enumerate(self._page_items(), start=1)]
            return " ".join([goal, f"results page{self._page_num}", *rows])
        product = self._product()
        if self._page == "item":
            values = [f"o{i} {v}" for i, v in enumerate(self._option_values(), start=1)]
            chosen = " ".join(self._options.values())
            return " ".join([goal, "item", product.name.lower(), product.price_text, *values,
                             f"chosen {chosen}" if chosen else "chosen none"])
        content = {"description": product.description, "features": " ".join(product.bullets),
                   "reviews": ""}[self._page]
        return " ".join(t for t in (goal, self._page, content.lower()) if t)

    def results_page(self, number: int) -> list:
        """The products results page ``number`` (1-based) of the last search lists, in page order
        (an agent sees them by paging there)."""
        start = (number - 1) * PAGE_SIZE
        return [self.catalogue.products[i] for i in self._hits[start:start + PAGE_SIZE]]

    @property
    def page_number(self) -> int:
        """The results page shown (1 on the first)."""
        return self._page_num

    def revealed(self) -> Revealed:
        """What this episode's purchase showed (``envs.base.Revealing``): nothing without one;
        else ``refuted`` (the purchase lost) or ``confirmed`` (it won) and the product's title as
        the pages write it, then ``chosen`` and each option value selected, in the order their
        types were chosen. The feedback is the purchase's result alone, so that is all an attempt
        learns: the goal product, its hidden attributes and the price it sells at stay hidden."""
        if self.last_purchase is None:
            return Revealed(self.task_key(), ())
        kind = "confirmed" if self.last_purchase.reward == 1.0 else "refuted"
        chosen = tuple(("chosen", value) for value in self._options.values())
        return Revealed(self.task_key(), ((kind, self._product().name),) + chosen)

    def memory_line(self, revealed: Revealed, style: str) -> str:
        """Compact, the words the pages show: the title in lower case as a results row and the
        item page write it, the values as the ``o<i>`` rows write them (``refuted lumora shampoo
        - tea tree, dry hair chosen 16 fl oz lavender``); paper, the title as written."""
        return revealed.line(style, str.lower if style == "compact" else None)

    def _option_values(self) -> list[str]:
        """The item page's option values, each once, in page order."""
        return list(dict.fromkeys(v for vals in self._product().options.values() for v in vals))

    def compact_action(self, action: str) -> str:
        """A legal action as ONE word: ``search``, ``r1``..``r10`` (results by
        position), ``o1``..``oN`` (option values in page order), or ``back``,
        ``prev``, ``next``, ``desc``, ``feat``, ``rev``, ``buy``."""
        if action.startswith("search["):
            return "search"
        name = action[len("click["):-1]
        if name in _COMPACT_CLICKS:
            return _COMPACT_CLICKS[name]
        if self._page == "results":
            return f"r{[p.asin.lower() for p in self._page_items()].index(name) + 1}"
        return f"o{self._option_values().index(name) + 1}"

    # ------------------------------------------------------------------ actions
    def search_action(self) -> str:
        """The search a constrained policy may issue: the goal's instruction
        without its price clause (the agent sees the whole instruction)."""
        text = self.goal.instruction.split(", and price lower than")[0]
        return f"search[{text}]"

    def legal_actions(self) -> list[str]:
        if self._done:
            return []
        if self._page == "search":
            return [self.search_action()]
        return [f"click[{c}]" for c in self.clickables()]

    def parse_action(self, response: str) -> str | None:
        """``search[q]`` (any page, q not empty) or ``click[x]`` for a clickable
        of this page, canonical lower case; the text may be wrapped in
        ``<action>`` tags. None if invalid; never raises."""
        if not isinstance(response, str) or self.goal is None or self._done:
            return None
        text = extract_action_text(response)
        match = _ACTION.match(text if text is not None else response)
        if match is None:
            return None
        verb, arg = match.group(1).lower(), " ".join(match.group(2).split()).lower()
        if not arg:
            return None
        if verb == "search":
            return f"search[{arg}]"
        return f"click[{arg}]" if arg in self.clickables() and arg != "search" else None

    def step(self, action: str | None) -> StepResult:
        if self._done:
            raise RuntimeError("WebShopEnv.step() after the episode ended; call restart() or reset()")
        self._turn += 1
        reward, outcome, info = 0.0, None, {}
        invalid = action is None or self.parse_action(action) != action
        if not invalid:
            verb, arg = action[: action.index("[")], action[action.index("[") + 1: -1]
            if verb == "search":
                self._hits = self._engine.search(arg, TOP_N)
                self._page, self._page_num, self._asin, self._options = "results", 1, None, {}
            else:
                outcome, reward, info = self._click(arg)
        if outcome is None and self._turn >= self.settings.max_turns:
            outcome = Outcome.TIMEOUT  # pays 0: every legal purchase earns >= 0
        if outcome is not None:
            self._done = True
        return StepResult(reward=reward, done=self._done, invalid=invalid, outcome=outcome, info=info)

    def _click(self, name: str):
        if name == "back to search":
            self._page, self._hits, self._page_num = "search", [], 1
            self._asin, self._options = None, {}
        elif self._page == "results":
            if name == "next >":
                self._page_num += 1
            elif name == "< prev":
                self._page_num -= 1
            else:
                self._asin, self._options, self._page = name.upper(), {}, "item"
        elif self._page == "item":
            if name == "< prev":
                self._page, self._asin, self._options = "results", None, {}
            elif name in _SUB_PAGES:
                self._page = name
            elif name == "buy now":
                return self._buy()
            else:  # an option value; one listed under two types goes to the last (the official radio map)
                option_type = [t for t, values in self._product().options.items() if name in values][-1]
                self._options[option_type] = name
        else:  # a sub-page: "< prev" back to the item, options kept
            self._page = "item"
        return None, 0.0, {}

    def _buy(self):
        product = self._product()
        parts = purchase_reward(product, self.goal, self._options.values(),
                                self.catalogue.prices[product.asin], self.settings.noun_extractor)
        self.last_purchase = parts
        self._page = "done"
        won = parts.reward == 1.0
        s = self.settings
        reward = s.success_reward if won else s.partial_reward_scale * parts.reward
        return (Outcome.WIN if won else Outcome.LOSS), reward, {"score": parts.reward, "asin": product.asin}

    def legal_return_floor(self) -> float:
        return 0.0


#: Words of the instructions that carry no request ("i am looking for a ...").
_FILLER = frozenset("i am im looking for a an need want would like to find me please buy get that is are "
                    "with and it".split())


def compact_goal(instruction: str) -> str:
    """An instruction without its filler words, lower case (the compact prompt's goal)."""
    return " ".join(w for w in instruction.lower().split() if w not in _FILLER)


def compact_action_words(catalogue: Catalogue) -> list[str]:
    """Every compact action word a page of ``catalogue`` can offer (for the
    embedded tokenizer's ``extra_tokens``, so that each stays one token)."""
    most = max((len({v for vals in p.options.values() for v in vals}) for p in catalogue.products), default=0)
    return ["search", *_COMPACT_CLICKS.values(), *(f"r{i}" for i in range(1, PAGE_SIZE + 1)),
            *(f"o{i}" for i in range(1, most + 1))]


def _join(parts: Sequence[str]) -> str:
    """The page's texts joined by " [SEP] ", empty ones dropped (as the official
    HTML-to-text conversion drops empty strings)."""
    return SEP.join(t.strip() for t in parts if t and t.strip())


def expert_action(env: WebShopEnv) -> str | None:
    """A scripted expert's next action (None when the episode is over): search
    the goal product's title, page to it, open it, pick the goal's options, buy.

    It knows the goal's product (as the human demonstrations' shoppers read the
    instruction and recognise it); it is the conformance oracle of the tests."""
    if env.done:
        return None
    goal = env.goal
    target = goal.asin.lower()
    if env.page == "search":
        return f"search[{env.catalogue.by_asin[goal.asin].name.lower()}]"
    if env.page == "results":
        return f"click[{target}]" if target in env.clickables() else "click[next >]"
    if env.page == "item" and env.open_asin == goal.asin:
        chosen = env.selected_options.values()
        missing = [value for value in map(normalise_option, goal.options) if value not in chosen]
        return f"click[{missing[0]}]" if missing else "click[buy now]"
    return "click[< prev]"  # another product's item page, or a sub-page
