"""WebShop's purchase reward (Yao et al. 2022, section 3.1; the official
``web_agent_site/engine/goal.py``), written from its published definition.

    r = r_type x (|U_att & Y_att| + |U_opt & Y_opt| + 1[y_price <= u_price])
              / (|U_att| + |U_opt| + 1)

- attributes: a goal attribute matches when a product attribute has a fuzzy
  token-set ratio above 85 with it, or when it is a substring of the product's
  lower-cased title, bullet points or description;
- options: both sides are colour-normalised (the first word of ``COLOR_SET``
  that is a substring, case-sensitive), then a goal option matches when a chosen
  option has a token-set ratio above 85 with it. As in the official code the
  chosen options are the product's lower-cased values and the goal's are taken
  as the instructions file writes them, so a capital letter can keep a goal
  option from being colour-normalised ("Navy Blue" stays whole, and matches a
  chosen "navy"; "navy blue" becomes "blue", and does not);
- r_type: 1 by default; 0.5 when neither the search query, nor at least two
  parts of the category path, nor more than 20% of the goal title's nouns match;
  0.1 when fewer than 10% of the nouns match; 0 when none do.

Two documented differences from the official code (docs/environments.md):

1. Fuzzy matching: ``thefuzz`` 0.22 (rapidfuzz's Indel ratio) where the
   official code pinned ``thefuzz`` 0.19 (difflib); the two agree whenever one
   token set contains the other (both 100) and can differ by a point or two near
   the 85 threshold otherwise.
2. Title nouns: the official code tags nouns with spaCy's ``en_core_web_sm``,
   which no package registry ships. ``noun_extractor="spacy"`` uses it when it
   is installed; the default ``"words"`` keeps every lower-case word of three or
   more letters that is not a stop word or a number. That is a different set,
   not a superset: it keeps adjectives and verbs too (a larger denominator of
   ``title_score``) and drops nouns of one or two letters, so ``title_score``
   and r_type can differ either way for the same pair. The scripted expert's
   purchases score 1.0 under ``"words"`` on every generated goal (a test);
   spaCy's figures on the same catalogue were not measured (no model here).

Synthetic goals of the official code hold their options as a dict, which made
the option TYPE's words join the goal's tokens; this module takes the options
of human goals (a list of values), as every goal the project generates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

#: The official colour list (``normalize.py``), in its order: the first entry that
#: is a substring of an option wins ("navy blue" -> "blue", "light grey" -> "grey").
COLOR_SET: tuple[str, ...] = tuple(
    """alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze brown
    burgundy camel camo caramel champagne charcoal cheetah chestnut chocolate christmas coffee cognac
    copper coral cranberry cream crystal dark denim eggplant elephant espresso fuchsia gold granite grape
    graphite grass gray green grey heather indigo ivory ivy khaki lavender lemon leopard light lilac lime
    magenta maroon mauve merlot midnight mint mocha multicolor mushroom mustard natural navy nude olive
    orange peach pewter pink plum purple rainbow red rose royal rust sand sapphire seashell silver skull
    slate steel stone stonewash sunflower tan taupe teal tiger turquoise violet walnut wheat white wine
    yellow""".split()
)

#: Fuzzy matches need a token-set ratio strictly above this (official: 85).
FUZZY_THRESHOLD = 85

_STOP_WORDS = frozenset(
    """a an and are as at be by for from has have in into is it its of on or our that the their this
    to was were will with without your you pack count inch inches ounce ounces oz lb lbs set size""".split()
)
_WORD = re.compile(r"[a-z]+")


def normalize_color(option: str) -> str:
    """The first ``COLOR_SET`` entry that is a substring of ``option`` (no word
    boundary, as in the official code), else ``option`` unchanged."""
    for color in COLOR_SET:
        if color in option:
            return color
    return option


def fuzzy_ratio(a: str, b: str) -> int:
    """thefuzz's token-set ratio (0..100) with its default processing."""
    from thefuzz import fuzz  # imported here: the webshop extra

    return int(fuzz.token_set_ratio(a, b))


def _word_nouns(title: str) -> list[str]:
    return [w for w in _WORD.findall(title.lower()) if len(w) >= 3 and w not in _STOP_WORDS]


def _spacy_nouns(title: str) -> list[str]:
    try:
        import spacy
    except ImportError as err:  # pragma: no cover - depends on the machine
        raise RuntimeError(
            "noun_extractor='spacy' needs spaCy and its en_core_web_sm model "
            "(pip install spacy && python -m spacy download en_core_web_sm); "
            "use noun_extractor='words' (the default) without them"
        ) from err
    nlp = _spacy_model(spacy)
    return [t.text.lower() for t in nlp(title) if t.pos_ in ("NOUN", "PROPN")]


_SPACY_NLP = None


def _spacy_model(spacy):  # pragma: no cover - depends on the machine
    global _SPACY_NLP
    if _SPACY_NLP is None:
        try:
            _SPACY_NLP = spacy.load("en_core_web_sm")
        except OSError as err:
            raise RuntimeError(
                "spaCy is installed but its en_core_web_sm model is not "
                "(python -m spacy download en_core_web_sm); or use noun_extractor='words'"
            ) from err
    return _SPACY_NLP


#: How title nouns are found: "words" (default, no model) or "spacy" (the official way).
NOUN_EXTRACTORS: dict[str, Callable[[str], list[str]]] = {"words": _word_nouns, "spacy": _spacy_nouns}


@dataclass(frozen=True)
class RewardParts:
    """One purchase's reward and what made it (the official ``verbose`` info)."""

    reward: float
    r_type: float
    query_match: bool
    category_match: bool
    title_score: float
    attributes_matched: int
    attributes_total: int
    options_matched: int
    options_total: int
    price_ok: bool


def _category_parts(path: str) -> set[str]:
    return {part.strip() for part in re.split(r"[›>]", path) if part.strip()}


def type_reward(
    product_query: str,
    product_category: str,
    product_title: str,
    goal_query: str,
    goal_category: str,
    goal_title: str,
    noun_extractor: str = "words",
) -> tuple[float, bool, bool, float]:
    """(r_type, query_match, category_match, title_score) of buying a product
    for a goal whose target product has ``goal_*``."""
    if noun_extractor not in NOUN_EXTRACTORS:
        raise ValueError(f"noun_extractor must be one of {sorted(NOUN_EXTRACTORS)}, got {noun_extractor!r}")
    nouns = NOUN_EXTRACTORS[noun_extractor]
    query_match = product_query.strip().lower() == goal_query.strip().lower()
    category_match = len(_category_parts(product_category) & _category_parts(goal_category)) >= 2
    desired = nouns(goal_title)
    bought = set(nouns(product_title))
    title_score = len(bought & set(desired)) / len(desired) if desired else 0.2
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def attributes_matched(
    goal_attributes: Sequence[str], product_attributes: Sequence[str], title: str,
    bullets: Sequence[str], description: str,
) -> int:
    """How many goal attributes the product has (fuzzy, or a substring of its text)."""
    texts = (title.lower(), " ".join(bullets).lower(), description.lower())
    count = 0
    for wanted in goal_attributes:
        if any(fuzzy_ratio(have, wanted) > FUZZY_THRESHOLD for have in product_attributes):
            count += 1
        elif any(wanted in text for text in texts):
            count += 1
    return count


def options_matched(goal_options: Iterable[str], chosen_options: Iterable[str]) -> int:
    """How many goal options are among the chosen ones (colour-normalised, fuzzy), as the
    official ``get_option_reward``: neither side is lower-cased here (``normalize_color``
    is case-sensitive; the fuzzy ratio lower-cases both), so goal options must be passed
    as written."""
    chosen = [normalize_color(c) for c in chosen_options]
    count = 0
    for wanted in goal_options:
        wanted = normalize_color(wanted)
        if any(fuzzy_ratio(c, wanted) > FUZZY_THRESHOLD for c in chosen):
            count += 1
    return count


def purchase_reward(product, goal, chosen_options: Iterable[str], price: float,
                    noun_extractor: str = "words") -> RewardParts:
    """The reward of buying ``product`` (a ``catalogue.Product``) at ``price`` with
    ``chosen_options`` (the selected option values) for ``goal`` (a ``catalogue.Goal``)."""
    r_type, query_match, category_match, title_score = type_reward(
        product.query, product.product_category, product.name,
        goal.query, goal.product_category, goal.name, noun_extractor,
    )
    n_att = attributes_matched(goal.attributes, product.attributes, product.name,
                               product.bullets, product.description)
    n_opt = options_matched(goal.options, list(chosen_options))
    price_ok = price <= goal.price_upper
    total = (n_att + n_opt + int(price_ok)) / (len(goal.attributes) + len(goal.options) + 1)
    return RewardParts(
        reward=total * r_type, r_type=r_type, query_match=query_match,
        category_match=category_match, title_score=title_score,
        attributes_matched=n_att, attributes_total=len(goal.attributes),
        options_matched=n_opt, options_total=len(goal.options), price_ok=price_ok,
    )
