"""What a WebShop attempt reveals (issue 41): the refuted or confirmed purchase its memory line
shows, the expert that reads only the pages and that memory, and the checks on bad memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mage_core.config import parse_config
from mage_core.envs.base import Outcome, Revealed
from mage_core.envs.webshop.catalogue import Catalogue, Goal, Product, generate_catalogue, load_catalogue, \
    write_catalogue
from mage_core.envs.webshop.env import WebShopEnv
from mage_core.envs.webshop.expert import act
from mage_core.envs.webshop.params import WebShopSettings
from mage_core.envs.webshop.reward import purchase_reward
from mage_core.rollout.meta_episode import MetaEpisode, MetaEpisodeSpec, Response
from mage_core.trainers.meta_rl import meta_settings

pytestmark = pytest.mark.unit

PATH = "Beauty & Personal Care › Hair Care › Shampoo"


def _product(asin: str, name: str, attributes: tuple[str, ...], price: float, sizes: tuple[str, ...],
             scents: tuple[str, ...], noun: str = "shampoo") -> Product:
    return Product(asin=asin, category="beauty", query=noun, name=name, product_category=PATH,
                   description=f"{name}. A {noun} that is {', '.join(attributes)}.",
                   bullets=tuple(a.capitalize() for a in attributes), pricing=(price,),
                   options={"size": sizes, "scent": scents}, attributes=attributes)


# By hand: the instruction's words (search tokens, price clause out) are shampoo, tea, tree,
# paraben, free, size, 16, fl, oz, scent, lavender. Lumora's title holds five of them, Verdant's
# three, Galena's none: the expert's first guess is Lumora. Lumora offers no 16 fl oz, so it is
# bought with lavender alone: 2 attributes + 1 option + the price of 5 parts, 0.8, lost. Verdant
# has tea tree (title) and paraben free (hidden: description only), 16 fl oz and lavender, $20.
LUMORA = _product("B000000001", "Lumora Shampoo - Tea Tree, Paraben Free", ("tea tree", "paraben free", "dry hair",
                  "travel size"), 12.5, ("8 fl oz",), ("lavender", "mint"))
VERDANT = _product("B000000002", "Verdant Shampoo - Tea Tree, Dry Hair", ("tea tree", "dry hair", "paraben free",
                   "long lasting"), 20.0, ("8 fl oz", "16 fl oz"), ("lavender", "coconut"))
GALENA = _product("B000000003", "Galena Hair Oil - Long Lasting, Cruelty Free", ("long lasting", "cruelty free",
                  "sulfate free", "natural ingredients"), 9.0, ("8 fl oz",), ("mint",), noun="hair oil")
PRODUCTS = (LUMORA, VERDANT, GALENA)
HIDDEN = ("verdant", "b000000002", "dry hair", "travel size", "0.8", "20.0", "12.5")


def _goal(instruction: str, target: Product, attributes: tuple[str, str], options: tuple[str, str]) -> Goal:
    return Goal(asin=target.asin, category="beauty", query=target.query, name=target.name,
                product_category=PATH, instruction=instruction, attributes=attributes, options=options,
                price_upper=30.0)


TEA_TREE = _goal("i am looking for a shampoo that is tea tree and paraben free, with size: 16 fl oz, and scent: "
                 "lavender, and price lower than 30.00 dollars", VERDANT, ("tea tree", "paraben free"),
                 ("16 fl oz", "lavender"))
# Verdant is the only shampoo whose title holds "dry hair": the first guess, and it wins.
DRY_HAIR = _goal("i am looking for a shampoo that is dry hair and long lasting, with size: 8 fl oz, and scent: "
                 "coconut, and price lower than 30.00 dollars", VERDANT, ("dry hair", "long lasting"),
                 ("8 fl oz", "coconut"))
CATALOGUE = Catalogue(PRODUCTS, {p.asin: p.pricing[0] for p in PRODUCTS}, (TEA_TREE, DRY_HAIR))


def _env(goal: Goal = TEA_TREE) -> WebShopEnv:
    env = WebShopEnv(WebShopSettings(), np.random.default_rng(0), CATALOGUE, (goal,))
    env.set_goal(goal)
    return env


def _attempts(env: WebShopEnv, count: int, seed: int = 0) -> tuple[list[bool], list[Revealed]]:
    """``count`` attempts of the expert at ``env``'s goal, each reading the earlier ones' facts."""
    won, memory, rng = [], [], np.random.default_rng(seed)
    for k in range(count):
        if k:
            env.restart()
        while not env.done:
            action = act(env, rng, memory)
            assert action in env.legal_actions()
            result = env.step(action)
        won.append(result.outcome is Outcome.WIN)
        memory.append(env.revealed())
    return won, memory


def test_by_hand_the_first_guess_loses_and_the_memory_moves_the_second_to_the_right_product():
    won, memory = _attempts(_env(), 3)
    assert won == [False, True, True]
    assert memory[0].facts == (("refuted", LUMORA.name), ("chosen", "lavender"))
    assert memory[1].facts == memory[2].facts == (("confirmed", VERDANT.name), ("chosen", "16 fl oz"),
                                                   ("chosen", "lavender"))
    assert _attempts(_env(DRY_HAIR), 3)[0] == [True, True, True]  # by attempt: 1/2, 2/2, 2/2


def _meta(style: str) -> MetaEpisode:
    cfg = parse_config({"env": {"name": "webshop"}, "rollout": {"restart": "same", "early_stop": False},
                        "policy": {"prompt_style": style, "memory": "history_only"}})
    settings = meta_settings(cfg, "webshop", num_episodes=3, reflect=True)
    return MetaEpisode(MetaEpisodeSpec("webshop", None, 0, 0, 0), _env(), settings,
                       lambda text: [len(text)], lambda text: [len(text) + 1])


@pytest.mark.parametrize("style", ["compact", "paper"])
def test_a_replayed_goals_memory_carries_each_fact_and_nothing_hidden(style):
    meta = _meta(style)
    while not meta.episodes:
        request = meta.request()
        action = act(meta.env, np.random.default_rng(0))
        meta.apply(request, Response(action, 0.0, choice=request.candidate_texts.index(action)))
    assert meta.episodes[0].outcome is Outcome.LOSS
    line = meta.context.memory[0].facts_line
    prompt = meta.request().prompt
    if style == "compact":
        assert line == "refuted lumora shampoo - tea tree, paraben free chosen lavender"
        # The title as the results row showed it ("r1 lumora shampoo - tea tree, paraben free $12.5").
        assert ("bought lumora shampoo - tea tree, paraben free lavender lost refuted lumora shampoo - tea tree, "
                "paraben free chosen lavender ep2 ") in prompt
    else:
        assert line == "refuted: Lumora Shampoo - Tea Tree, Paraben Free; chosen: lavender."
        assert ("Then the task was NOT successfully completed.\nWhat trial #1 revealed: refuted: Lumora Shampoo - "
                "Tea Tree, Paraben Free; chosen: lavender.") in prompt
    assert not any(hidden in line.lower() for hidden in HIDDEN)


def test_bad_memory_is_refused_with_one_line_naming_it():
    env = _env()
    key = env.task_key()
    other = Revealed(_env(DRY_HAIR).task_key(), (("refuted", LUMORA.name),))
    with pytest.raises(ValueError, match=r"memory item 1 was learnt on another goal") as err:
        act(env, np.random.default_rng(0), [other])
    assert "\n" not in str(err.value)
    cases = [((("mine", "(1, 1)"),), r"memory item 1 has a fact of kind 'mine'"),
             ((("refuted", "Cobalt Shampoo"),), r"memory item 1 names product 'Cobalt Shampoo', which the catalogue"),
             ((("refuted", LUMORA.name), ("chosen", "coconut")), r"names option 'coconut', which 'Lumora Shampoo - Tea Tree, Paraben Free' does not offer"),
             ((("chosen", "lavender"),), r"names option 'lavender' before a purchase"),
             ((("refuted", LUMORA.name), ("confirmed", VERDANT.name)), r"names two purchases")]
    for facts, message in cases:
        with pytest.raises(ValueError, match=message) as err:
            act(env, np.random.default_rng(0), [Revealed(key, facts)])
        assert "\n" not in str(err.value)


def test_an_attempt_without_a_purchase_reveals_nothing():
    env = _env()
    while not env.done:
        env.step("click[< prev]" if env.page != "search" else env.search_action())
    assert env.revealed() == Revealed(env.task_key(), ())


def test_on_replays_the_expert_never_rebuys_a_refuted_purchase_and_its_later_attempts_win_more(tmp_path: Path):
    """60 goals of a generated catalogue, three attempts each. Every refuted purchase is checked
    lost by the purchase reward itself, and none is bought again in a later attempt."""
    catalogue = load_catalogue(write_catalogue(generate_catalogue(np.random.default_rng(0), products_per_category=10),
                                               tmp_path))
    env = WebShopEnv(WebShopSettings(), np.random.default_rng(0), catalogue, catalogue.goals)
    titles = {p.name: p for p in catalogue.products}
    by_attempt = np.zeros(3)
    for goal in catalogue.goals[:60]:
        env.set_goal(goal)
        won, memory = _attempts(env, 3)
        by_attempt += np.array(won)
        refuted = [m.facts for m in memory if m.facts and m.facts[0][0] == "refuted"]
        assert len(refuted) == len(set(refuted))  # never the same (product, options) twice
        for facts in refuted:
            product = titles[facts[0][1]]
            chosen = [value for kind, value in facts[1:]]
            assert purchase_reward(product, goal, chosen, catalogue.prices[product.asin]).reward < 1.0
    assert by_attempt[0] < by_attempt[1] <= by_attempt[2]
