"""WebShop: the purchase reward against hand-computed values and the published
examples, the catalogue loader's errors, the pages and actions, and the
conformance of the generated catalogue (the expert buys every goal with score 1)."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mage_core.cli import main
from mage_core.envs.base import Outcome
from mage_core.envs.webshop.catalogue import (
    OOD_CATEGORIES, Catalogue, CatalogueError, Goal, Product, generate_catalogue, load_catalogue, parse_pricing,
    price_upper, write_catalogue,
)
from mage_core.envs.webshop.env import WebShopEnv, compact_goal, expert_action
from mage_core.envs.webshop.params import WebShopSettings
from mage_core.envs.webshop.reward import (
    NOUN_EXTRACTORS, attributes_matched, normalize_color, options_matched, purchase_reward, type_reward,
)
from mage_core.envs.webshop.search import SearchEngine
from mage_core.envs.webshop.commands import play_expert, play_random

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_catalogue(generate_catalogue(np.random.default_rng(0)), tmp_path_factory.mktemp("shop"))


@pytest.fixture(scope="module")
def catalogue(folder):
    return load_catalogue(folder)


@pytest.fixture()
def env(catalogue) -> WebShopEnv:
    e = WebShopEnv(WebShopSettings(), np.random.default_rng(0), catalogue, catalogue.goals)
    e.reset()
    return e


def product(**kw) -> Product:
    base = dict(asin="B000000001", category="beauty", query="shampoo", name="Acme Shampoo",
                product_category="Beauty › Hair Care › Shampoo", description="", bullets=(),
                pricing=(10.0,), options={}, attributes=())
    base.update(kw)
    return Product(**base)


def goal(**kw) -> Goal:
    base = dict(asin="B000000001", category="beauty", query="shampoo", name="Acme Shampoo",
                product_category="Beauty › Hair Care › Shampoo", instruction="i need shampoo",
                attributes=(), options=(), price_upper=20.0)
    base.update(kw)
    return Goal(**base)


# ---------------------------------------------------------------- reward


def test_published_attribute_example_matches():
    # WebShop paper / official tests: "natural ingredients" is in "tea tree / essential oils / natural ingredients"
    assert attributes_matched(["natural ingredients"], ["tea tree / essential oils / natural ingredients"],
                              "", [], "") == 1
    assert attributes_matched(["natural ingredients"], ["fragrance free"], "", [], "") == 0


def test_attribute_substring_fallback_searches_title_bullets_description():
    assert attributes_matched(["travel size"], [], "Acme Travel Size Shampoo", [], "") == 1
    assert attributes_matched(["travel size"], [], "", ["Comes In Travel Size"], "") == 1
    assert attributes_matched(["travel size"], [], "", [], "a travel size bottle") == 1
    assert attributes_matched(["travel size"], [], "Acme", ["big"], "large") == 0


@pytest.mark.parametrize("raw, expected", [
    # the official normalize_color tests
    ("black forest", "black"), ("violet lavender", "lavender"), ("steelivy fuchsia", "fuchsia"),
    ("123alabaster", "alabaster"), ("webshop", "webshop"),
    # first entry of the list that is a substring, no word boundary
    ("navy blue", "blue"), ("light grey", "grey"), ("cashmere", "ash"),
])
def test_normalize_color(raw, expected):
    assert normalize_color(raw) == expected


def test_options_colour_normalised_then_fuzzy():
    assert options_matched(["navy blue"], ["blue"]) == 1  # both become "blue"
    assert options_matched(["large", "blue"], ["x-large", "navy blue"]) == 2  # "large" within "x large"
    assert options_matched(["small"], ["medium"]) == 0
    assert options_matched(["16 fl oz"], ["8 fl oz"]) == 0  # token sets {16, fl, oz} vs {8, fl, oz}: 80


def test_goal_options_are_compared_as_written_as_the_official_reward():
    # The official get_option_reward colour-normalises both sides without lower-casing them: the
    # chosen options are the product's lower-cased values, the goal's as items_human_ins.json writes
    # them, and normalize_color is case-sensitive (the fuzzy ratio itself ignores case).
    assert options_matched(["Navy Blue"], ["navy"]) == 1  # "Navy Blue" stays whole: {navy} within it
    assert options_matched(["navy blue"], ["navy"]) == 0  # "blue" against "navy"
    assert options_matched(["Black/White"], ["white"]) == 1
    assert options_matched(["black | white"], ["white"]) == 0  # "black" against "white"
    assert options_matched(["Rosewood"], ["rose"]) == 0  # "rosewood" against "rose": ratio 67
    assert options_matched(["rosewood"], ["rose"]) == 1  # both "rose"
    # A whole purchase: 1 attribute, 1 option, the price. Before issue 39 the loader lower-cased
    # the goal's "Navy Blue" to "navy blue" and this purchase scored (1 + 0 + 1) / 3.
    p = product(attributes=("paraben free",), options={"color": ("navy", "navy blue")})
    as_written = goal(attributes=("paraben free",), options=("Navy Blue",))
    assert purchase_reward(p, as_written, ["navy"], 15.0).reward == 1.0
    lowered = goal(attributes=("paraben free",), options=("navy blue",))
    assert purchase_reward(p, lowered, ["navy"], 15.0).reward == pytest.approx(2 / 3)


def test_loader_keeps_goal_options_as_written_and_the_expert_still_buys(folder, tmp_path):
    bad = _copy(folder, tmp_path)
    rows = json.loads((bad / "items_shuffle.json").read_text())
    ins = json.loads((bad / "items_human_ins.json").read_text())
    asin = rows[0]["asin"]
    rows[0]["customization_options"] = {"Color": [{"value": "Navy/Blue"}, {"value": "Black"}]}
    for entry in ins[asin]:
        entry["instruction_options"] = ["Navy/Blue"]
    (bad / "items_shuffle.json").write_text(json.dumps(rows))
    (bad / "items_human_ins.json").write_text(json.dumps(ins))
    loaded = load_catalogue(bad)
    assert loaded.by_asin[asin].options == {"color": ("navy | blue", "black")}  # products: the official load
    mine = [g for g in loaded.goals if g.asin == asin]
    assert mine and all(g.options == ("Navy/Blue",) for g in mine)  # goals: as written
    env = WebShopEnv(WebShopSettings(), np.random.default_rng(0), loaded, loaded.goals)
    env.reset()
    assert play_expert(env, mine[0])[0] == 1.0  # it clicks the normalised value


def test_category_match_needs_two_shared_parts():
    # the official test pairs
    assert type_reward("q1", "a › a › b", "acme shampoo", "q2", "a › b › c", "acme shampoo")[2] is True
    assert type_reward("q1", "a › a › d", "acme shampoo", "q2", "a › b › c", "acme shampoo")[2] is False


def test_type_reward_branches_by_hand():
    # title_score = shared nouns / goal nouns ("words" extractor: words of 3+ letters, no stop words)
    r, q, c, t = type_reward("x", "a › b", "acme shampoo", "y", "c › d", "acme shampoo")
    assert (r, q, c, t) == (1.0, False, False, 1.0)
    # 1 of 5 goal words shared: 0.2, not > 0.2, and no query or category match -> 0.5
    r, *_, t = type_reward("x", "a › b", "acme", "y", "c › d", "acme bottle brush comb towel")
    assert (r, t) == (0.5, 0.2)
    # 1 of 11 shared: below 0.1 -> 0.1 (even with the query matching)
    r, q, _, t = type_reward("same", "a", "acme", "same", "b", " ".join(["acme"] + [f"word{i}x" for i in "abcdefghij"]))
    assert q and r == 0.1 and t == pytest.approx(1 / 11)
    # nothing shared -> 0, whatever matches
    r, q, c, t = type_reward("same", "a › b", "zebra", "same", "a › b", "acme shampoo")
    assert (r, q, c, t) == (0.0, True, True, 0.0)
    # a goal title with no word at all scores 0.2
    assert type_reward("x", "a", "acme", "y", "b", "a b")[3] == 0.2


def test_spacy_branch_says_what_is_missing():
    try:
        import spacy  # noqa: F401
        spacy.load("en_core_web_sm")
    except (ImportError, OSError):
        with pytest.raises(RuntimeError, match="en_core_web_sm"):
            type_reward("x", "a", "acme shampoo", "y", "b", "acme shampoo", noun_extractor="spacy")
    else:  # pragma: no cover - only where the model is installed
        assert type_reward("x", "a", "acme shampoo", "y", "b", "acme shampoo", noun_extractor="spacy")[3] == 1.0
    with pytest.raises(ValueError, match="noun_extractor"):
        type_reward("x", "a", "b", "y", "c", "d", noun_extractor="nltk")


def test_purchase_reward_by_hand():
    p = product(attributes=("paraben free",), description="gentle and sulfate free",
                options={"size": ("8 fl oz", "16 fl oz"), "scent": ("lavender",)})
    g = goal(attributes=("paraben free", "sulfate free", "tea tree"), options=("16 fl oz", "mint"), price_upper=20.0)
    # attributes 2 of 3 (fuzzy, substring), options 1 of 2, price 15 <= 20: (2 + 1 + 1) / (3 + 2 + 1)
    parts = purchase_reward(p, g, ["16 fl oz", "lavender"], 15.0)
    assert parts.reward == pytest.approx(4 / 6)
    assert (parts.attributes_matched, parts.options_matched, parts.price_ok, parts.r_type) == (2, 1, True, 1.0)
    # over the limit, same product: (2 + 1 + 0) / 6
    assert purchase_reward(p, g, ["16 fl oz"], 25.0).reward == pytest.approx(3 / 6)
    # the wrong kind of product: 1 of the goal title's 5 words shared (0.2, not above), no query or
    # category match -> r_type 0.5, half of (1 + 1) / 2
    other = product(name="Acme Bottle", query="bottle", product_category="Kitchen › Bottles",
                    attributes=("paraben free",), description="gentle and sulfate free")
    g2 = goal(name="Acme Shampoo Brush Comb Towel", attributes=("paraben free",), options=())
    parts = purchase_reward(other, g2, [], 15.0)
    assert parts.r_type == 0.5 and parts.reward == pytest.approx(0.5 * (1 + 1) / 2)


# ---------------------------------------------------------------- catalogue


def test_pricing_parse_and_price_limit():
    assert parse_pricing("$12.99") == (12.99,)
    assert parse_pricing("$12.99 - $15.99") == (12.99, 15.99)
    assert parse_pricing("") == ()
    # next four multiples of ten above 12.99: 20, 30, 40, 50; the max of two distinct draws is 30..50
    draws = {price_upper(12.99, np.random.default_rng(s)) for s in range(200)}
    assert draws == {30.0, 40.0, 50.0}
    assert price_upper(985.0, np.random.default_rng(0)) == 1_000_000.0


def test_generated_catalogue_has_the_official_schema(folder):
    products = json.loads((folder / "items_shuffle.json").read_text())
    fields = {"asin", "category", "query", "name", "product_category", "full_description",
              "small_description", "pricing", "images", "customization_options"}
    assert products and all(fields <= set(p) for p in products)
    assert all(len(p["asin"]) == 10 for p in products)
    for p in products:
        for values in p["customization_options"].values():
            assert all(set(v) == {"value", "image"} for v in values)
    attrs = json.loads((folder / "items_ins_v2.json").read_text())
    ins = json.loads((folder / "items_human_ins.json").read_text())
    assert set(attrs) == set(ins) == {p["asin"] for p in products}
    entry = next(iter(ins.values()))[0]
    assert {"instruction", "instruction_attributes", "instruction_options"} <= set(entry)


def test_splits_are_disjoint_and_ood_is_unseen(catalogue):
    train, ev, ood = (catalogue.split(s) for s in ("train", "eval", "ood"))
    assert len(ev) == 500 and train and ood
    assert len(train) + len(ev) + len(ood) == len(catalogue.goals)
    assert {g.category for g in ood} == set(OOD_CATEGORIES)
    assert not {g.category for g in train + ev} & set(OOD_CATEGORIES)
    assert not {g.instruction for g in train} & {g.instruction for g in ev}
    with pytest.raises(ValueError, match="split"):
        catalogue.split("test")


def test_loader_accepts_the_official_file_names(folder, tmp_path):
    for name in ("items_shuffle", "items_ins_v2", "items_human_ins"):
        (tmp_path / f"{name}_1000.json").write_text((folder / f"{name}.json").read_text())
    assert len(load_catalogue(tmp_path).goals) == len(load_catalogue(folder).goals)


def _copy(folder: Path, to: Path) -> Path:
    for f in folder.iterdir():
        (to / f.name).write_text(f.read_text())
    return to


def test_loader_errors_name_the_file_and_the_fix(folder, tmp_path):
    with pytest.raises(CatalogueError, match="no such catalogue folder"):
        load_catalogue(tmp_path / "missing")
    with pytest.raises(CatalogueError, match="items_shuffle.json.*mage webshop generate"):
        load_catalogue(tmp_path)
    bad = _copy(folder, tmp_path)
    (bad / "items_ins_v2.json").write_text("{not json")
    with pytest.raises(CatalogueError, match="items_ins_v2.json: not valid JSON"):
        load_catalogue(bad)


def test_loader_errors_on_missing_fields_and_unknown_products(folder, tmp_path):
    bad = _copy(folder, tmp_path)
    rows = json.loads((bad / "items_shuffle.json").read_text())
    del rows[3]["pricing"]
    (bad / "items_shuffle.json").write_text(json.dumps(rows))
    with pytest.raises(CatalogueError, match="item 3.*lacks pricing"):
        load_catalogue(bad)
    (tmp_path / "b").mkdir()
    bad2 = _copy(folder, tmp_path / "b")
    ins = json.loads((bad2 / "items_human_ins.json").read_text())
    ins["B0NOTTHERE"] = [{"instruction": "x", "instruction_attributes": ["y"]},
                         {"instruction": "z", "instruction_attributes": ["y"]}]
    (bad2 / "items_human_ins.json").write_text(json.dumps(ins))
    with pytest.raises(CatalogueError, match="B0NOTTHERE.*skip_unknown_goals"):
        load_catalogue(bad2)
    # the official loader ignores them; with the flag they are counted, the rest is unchanged
    skipped = load_catalogue(bad2, skip_unknown_goals=True)
    assert skipped.skipped_goals == 2
    assert skipped.goals == load_catalogue(folder).goals


def test_loader_skips_rows_and_instructions_as_the_official_loader(folder, tmp_path):
    rows = json.loads((folder / "items_shuffle.json").read_text())
    ins = json.loads((folder / "items_human_ins.json").read_text())
    first = rows[0]
    extra = [dict(first, asin="nan"), dict(first, asin="B0TOOLONG123"), dict(first, name="a duplicate row")]
    (tmp_path / "items_shuffle.json").write_text(json.dumps(rows + extra))
    (tmp_path / "items_ins_v2.json").write_text((folder / "items_ins_v2.json").read_text())
    ins[first["asin"]] = ins[first["asin"]] + [{"instruction": "no attributes", "instruction_attributes": []}]
    (tmp_path / "items_human_ins.json").write_text(json.dumps(ins))
    loaded = load_catalogue(tmp_path)
    assert len(loaded.products) == len(rows)  # nan, an 11+ character asin and a repeated asin dropped
    assert loaded.by_asin[first["asin"]].name == first["name"]  # the first row of an asin wins
    assert "no attributes" not in {g.instruction for g in loaded.goals}
    assert len(loaded.goals) == len(load_catalogue(folder).goals)


def test_loader_reads_string_bullets_and_all_price_formats(folder, tmp_path):
    rows = json.loads((folder / "items_shuffle.json").read_text())
    rows[0]["small_description"] = "One bullet"
    rows[0]["pricing"] = "$1,299.00"  # no limit above 980
    rows[1]["pricing"] = ""
    rows[2]["pricing"] = "$5.0 - $9.5"
    rows[3]["pricing"] = "$1.2.3"
    _copy(folder, tmp_path)
    (tmp_path / "items_shuffle.json").write_text(json.dumps(rows))
    with pytest.raises(CatalogueError, match=r"item 3 \(\w+\): pricing '\$1.2.3'"):
        load_catalogue(tmp_path)
    rows[3]["pricing"] = "$7"
    (tmp_path / "items_shuffle.json").write_text(json.dumps(rows))
    loaded = load_catalogue(tmp_path)
    p0, p1, p2, p3 = (loaded.by_asin[r["asin"]] for r in rows[:4])
    assert p0.bullets == ("One bullet",)
    assert (p0.price_text, p1.price_text, p2.price_text, p3.price_text) == ("$1299.0", "$100.0", "$5.0 to $9.5", "$7.0")
    assert loaded.prices[p1.asin] == 100.0 and 5.0 <= loaded.prices[p2.asin] <= 9.5
    g0 = [g for g in loaded.goals if g.asin == p0.asin]
    assert g0 and all(g.price_upper == 1_000_000.0 and "price lower than" not in g.instruction for g in g0)
    g3 = [g for g in loaded.goals if g.asin == p3.asin]
    assert all(g.instruction.endswith(f"price lower than {g.price_upper:.2f} dollars") for g in g3)
    assert {g.price_upper for g in g3} <= {20.0, 30.0, 40.0, 50.0}


# ---------------------------------------------------------------- search


def test_search_finds_a_title_first_and_nothing_for_unknown_words(catalogue):
    engine = SearchEngine([p.search_text() for p in catalogue.products])
    for i in (0, 17, 200):
        assert engine.search(catalogue.products[i].name)[0] == i
    assert engine.search("zzzz qqqq") == []
    assert len(engine.search("shampoo conditioner tea shirt")) == 50


# ---------------------------------------------------------------- pages and actions


def test_search_page_text_and_actions(env):
    obs = env.observation()
    assert obs == f"WebShop [SEP] Instruction: [SEP] {env.goal.instruction} [SEP] Search"
    assert env.legal_actions() == [env.search_action()]
    assert env.parse_action("click[search]") is None
    assert env.parse_action("<think>x</think><action>Search[ Green  TEA ]</action>") == "search[green tea]"


def test_results_item_and_subpages(env, catalogue):
    env.step("search[green tea organic]")
    obs = env.observation()
    assert "Page 1 (Total results: " in obs and "< Prev" not in obs and "Next >" in obs
    first = env.clickables()[2]
    assert env.clickables()[:2] == ["back to search", "next >"] and len(env.clickables()) == 12
    env.step("click[next >]")
    assert "Page 2" in env.observation() and env.clickables()[1] == "< prev"
    env.step(f"click[{env.clickables()[3]}]")
    item = catalogue.by_asin[env._asin]
    assert env.observation().endswith(f"{item.name} [SEP] Price: {item.price_text} [SEP] Rating: N.A. "
                                      "[SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now")
    env.step("click[features]")
    assert env.observation().endswith(" [SEP] ".join(item.bullets))
    env.step("click[< prev]")
    assert env._page == "item"
    env.step("click[< prev]")
    assert "Page 2" in env.observation()
    env.step("click[< prev]")
    assert env.clickables()[2] == first


def test_option_selection_overwrites_and_leaving_clears(env, catalogue):
    g = env.goal
    env.step(f"search[{catalogue.by_asin[g.asin].name.lower()}]")
    env.step(f"click[{g.asin.lower()}]")
    options = catalogue.by_asin[g.asin].options
    kind, values = next(iter(options.items()))
    env.step(f"click[{values[0]}]")
    env.step(f"click[{values[1]}]")
    assert env._options == {kind: values[1]}
    env.step("click[< prev]")
    assert env._options == {}


def test_invalid_action_changes_nothing(env):
    env.step("search[shampoo]")
    before = env.observation()
    for bad in (None, "click[buy now]", "click[b0nothere]"):
        result = env.step(bad)
        assert result.invalid and result.reward == 0.0 and not result.done
        assert env.observation() == before
    assert env.turn == 4


def test_turn_limit_pays_zero_and_step_after_end_raises(catalogue):
    e = WebShopEnv(WebShopSettings(max_turns=3), np.random.default_rng(1), catalogue, catalogue.goals)
    e.reset()
    results = [e.step("search[tea]") for _ in range(3)]
    assert [r.reward for r in results] == [0.0] * 3
    assert results[-1].outcome is Outcome.TIMEOUT and e.done and e.legal_return_floor() == 0.0
    with pytest.raises(RuntimeError, match="after the episode ended"):
        e.step("search[tea]")
    e.restart()
    assert e.turn == 0 and e.observation().startswith("WebShop [SEP]")


def _env_on(page: str, catalogue) -> WebShopEnv:
    e = WebShopEnv(WebShopSettings(), np.random.default_rng(3), catalogue, catalogue.goals)
    e.reset()
    while e.page != page:
        e.step(expert_action(e))
    return e


_ACTION_TEXT = st.one_of(
    st.text(max_size=60),
    st.builds(lambda v, a, t: f"{v}[{a}]{t}", st.sampled_from(["search", "click", "Click", "buy", ""]),
              st.one_of(st.text(max_size=20), st.sampled_from(["buy now", "next >", "< prev", "b0nothere"])),
              st.text(max_size=8)),
)


@pytest.mark.parametrize("page", ["search", "results", "item"])
@settings(max_examples=150, deadline=None)
@given(text=_ACTION_TEXT)
def test_parse_action_never_raises_and_yields_a_legal_action(page, text, catalogue):
    e = _env_on(page, catalogue)
    parsed = e.parse_action(text)
    assert parsed is None or parsed.startswith("search[") or parsed in e.legal_actions()


def test_parse_action_reads_as_the_official_pattern(catalogue):
    e = _env_on("item", catalogue)
    assert e.parse_action("click[buy now] because it matches") == "click[buy now]"  # trailing text ignored
    assert e.parse_action("CLICK[ Buy  Now ]") == "click[buy now]"
    assert e.parse_action("search[]") is None and e.parse_action("click[search]") is None
    assert e.parse_action("<action>click[< prev]</action>") == "click[< prev]"
    fresh = WebShopEnv(WebShopSettings(), np.random.default_rng(0), catalogue, catalogue.goals)
    assert fresh.parse_action("search[tea]") is None  # before reset(): no page yet, never raises


def test_item_page_lists_option_types_then_values(catalogue):
    e = _env_on("item", catalogue)
    product = catalogue.by_asin[e.open_asin]
    lines = [part for t, values in product.options.items() for part in (t, *values)]
    expected = " [SEP] ".join(["Instruction:", e.goal.instruction, "Back to Search", "< Prev", *lines, product.name,
                               f"Price: {product.price_text}", "Rating: N.A.", "Description", "Features",
                               "Reviews", "Buy Now"])
    assert e.observation() == expected
    assert e.clickables()[:6] == ["back to search", "< prev", "description", "features", "reviews", "buy now"]


def test_buying_shows_the_done_page(catalogue):
    e = _env_on("item", catalogue)
    while not e.done:
        e.step(expert_action(e))
    assert e.page == "done" and e.observation() == "Thank you for shopping with us! [SEP] Your code: [SEP] None"
    assert e.legal_actions() == [] and e.parse_action("click[buy now]") is None


def test_a_value_under_two_option_types_is_one_clickable_for_the_last_type(catalogue):
    base = catalogue.products[0]
    twin = Product(**{**base.__dict__, "description": "", "options": {"color": ("blue", "red"), "trim": ("blue", "gold")}})
    shop = Catalogue(products=(twin,), prices={twin.asin: 10.0}, goals=(goal(asin=twin.asin),))
    e = WebShopEnv(WebShopSettings(), np.random.default_rng(0), shop, shop.goals)
    e.reset()
    e.step("search[anything at all " + twin.name.lower() + "]")
    e.step(f"click[{twin.asin.lower()}]")
    assert e.clickables().count("blue") == 1
    e.step("click[blue]")
    assert e.selected_options == {"trim": "blue"}
    e.step("click[description]")
    assert e.observation().endswith("Back to Search [SEP] < Prev")  # the empty description is dropped


def test_settings_reject_bad_values():
    with pytest.raises(ValueError, match=r"(?s)max_turns\s+Input should be greater than 0.*success_reward\s+Input "
                                         r"should be a finite number.*noun_extractor\s+Input should be 'words' or "
                                         r"'spacy'"):
        WebShopSettings(max_turns=0, success_reward=float("nan"), noun_extractor="x")
    # The settings' noun extractors are the reward's.
    assert set(typing.get_args(WebShopSettings.model_fields["noun_extractor"].annotation)) == set(NOUN_EXTRACTORS)


# ---------------------------------------------------------------- conformance


def test_expert_buys_every_generated_goal_with_score_one(catalogue):
    e = WebShopEnv(WebShopSettings(), np.random.default_rng(0), catalogue, catalogue.goals)
    results = [play_expert(e, g) for g in catalogue.goals]
    assert all(score == 1.0 for score, _ in results)
    assert max(turns for _, turns in results) <= WebShopSettings().max_turns
    # the episode's task reward: verl-agent's 10 on success
    e.set_goal(catalogue.goals[0])
    rewards = []
    while not e.done:
        rewards.append(e.step(expert_action(e)).reward)
    assert rewards[-1] == 10.0 and sum(rewards[:-1]) == 0.0


def test_random_shopper_scores_well_below(catalogue):
    e = WebShopEnv(WebShopSettings(), np.random.default_rng(0), catalogue, catalogue.goals)
    rng = np.random.default_rng(3)
    scores = [play_random(e, g, rng) for g in catalogue.split("eval")[:200]]
    assert np.mean(scores) < 0.4
    assert sum(s == 1.0 for s in scores) <= 4


def test_partial_credit_option(catalogue):
    e = WebShopEnv(WebShopSettings(partial_reward_scale=10.0), np.random.default_rng(0), catalogue, catalogue.goals)
    g = catalogue.goals[0]
    e.set_goal(g)
    e.step(f"search[{catalogue.by_asin[g.asin].name.lower()}]")
    e.step(f"click[{g.asin.lower()}]")
    result = e.step("click[buy now]")  # no option chosen: partial score
    assert result.outcome is Outcome.LOSS
    assert result.reward == pytest.approx(10.0 * e.last_purchase.reward) and 0 < e.last_purchase.reward < 1


# ---------------------------------------------------------------- CLI


def test_cli_generate_and_check(tmp_path, capsys):
    assert main(["webshop", "generate", "--out", str(tmp_path / "c"), "--products-per-category", "5",
                 "--instructions-per-product", "2"]) == 0
    (tmp_path / "plain").mkdir()
    assert (tmp_path / "c").stat().st_mode == (tmp_path / "plain").stat().st_mode  # not TemporaryDirectory's 0700
    assert main(["webshop", "check", str(tmp_path / "c"), "--num-eval", "20"]) == 0
    out = capsys.readouterr().out
    assert "20/20" in out and "products" in out
    assert main(["webshop", "check", str(tmp_path / "nothing")]) == 2
    assert main(["webshop", "generate", "--out", str(tmp_path / "d"), "--products-per-category", "0"]) == 2
    assert not (tmp_path / "d").exists()


# ---------------------------------------------------------------- malformed catalogue files: one line each

REPO = Path(__file__).resolve().parents[2]


def _first(rows):
    """The first product's asin (every generated product has instructions)."""
    return rows[0]["asin"]


# (case id, mutation of (rows, attrs, ins), the message's pattern: file, record, key)
MALFORMED = [
    ("attributes-a-mapping", lambda r, a, i: a[_first(r)].__setitem__("attributes", {"size": "large"}),
     r"items_ins_v2.json: the 'attributes' of {A} are an object; they must be a list of strings"),
    ("attributes-entry-a-list", lambda r, a, i: a.__setitem__(_first(r), ["organic"]),
     r"items_ins_v2.json: the entry of {A} is a list; it must be an object"),
    ("option-without-value", lambda r, a, i: r[0].__setitem__("customization_options", {"size": [{"image": None}]}),
     r"items_shuffle.json item 0 \({A}\): customization_options\['size'\]\[0\] lacks 'value'"),
    ("option-value-null", lambda r, a, i: r[0].__setitem__("customization_options", {"size": [{"value": None}]}),
     r"items_shuffle.json item 0 \({A}\): customization_options\['size'\]\[0\] has null 'value'"),
    ("options-of-a-type-a-mapping", lambda r, a, i: r[0].__setitem__("customization_options", {"size": {"value": "s"}}),
     r"item 0 \({A}\): customization_options\['size'\] is an object; it must be a list"),
    ("options-a-list", lambda r, a, i: r[0].__setitem__("customization_options", [{"value": "s"}]),
     r"item 0 \({A}\): 'customization_options' is a list"),
    ("null-instruction", lambda r, a, i: i[_first(r)][0].__setitem__("instruction", None),
     r"items_human_ins.json: instruction 0 of {A}: 'instruction' is null; it must be the instruction text"),
    ("empty-instruction", lambda r, a, i: i[_first(r)][0].__setitem__("instruction", "  "),
     r"items_human_ins.json: instruction 0 of {A}: 'instruction' is empty"),
    ("instruction-attributes-a-string", lambda r, a, i: i[_first(r)][0].__setitem__("instruction_attributes", "x"),
     r"instruction 0 of {A}: 'instruction_attributes' is a string; it must be a list of strings"),
    ("instruction-options-a-mapping", lambda r, a, i: i[_first(r)][0].__setitem__("instruction_options", {"a": 1}),
     r"instruction 0 of {A}: 'instruction_options' must be a list of strings"),
    ("instructions-not-a-list", lambda r, a, i: i.__setitem__(_first(r), {"instruction": "x"}),
     r"items_human_ins.json: the instructions of {A} are an object"),
    ("pricing-a-list", lambda r, a, i: r[0].__setitem__("pricing", ["$5"]),
     r"items_shuffle.json item 0 \({A}\): pricing is a list; write a string such as"),
    ("pricing-negative", lambda r, a, i: r[0].__setitem__("pricing", -3),
     r"item 0 \({A}\): pricing -3 is not a price"),
    ("name-null", lambda r, a, i: r[0].__setitem__("name", None),
     r"items_shuffle.json item 0 \({A}\): 'name' is null; it must be a string"),
    ("bullets-a-mapping", lambda r, a, i: r[0].__setitem__("small_description", {"a": "b"}),
     r"item 0 \({A}\): 'small_description' must be a list of strings or one string"),
    ("asin-a-number", lambda r, a, i: r[0].__setitem__("asin", 12345),
     r"items_shuffle.json item 0: 'asin' is a number; it must be a string"),
    ("asin-empty", lambda r, a, i: r[0].__setitem__("asin", ""),
     r"items_shuffle.json item 0: 'asin' is empty"),
    ("product-not-an-object", lambda r, a, i: r.__setitem__(0, "B0XXXX"),
     r"items_shuffle.json item 0: a string, not a product object"),
    ("asins-differ-in-case", lambda r, a, i: r[1].__setitem__("asin", r[0]["asin"].lower()),
     r"items_shuffle.json item 1: asin '{a}' and item 0's '{A}' differ only in case"),
    ("instruction-keys-differ-in-case", lambda r, a, i: i.__setitem__(_first(r).lower(), i[_first(r)]),
     r"items_human_ins.json: keys '{A}' and '{a}' differ only in case"),
    ("products-an-object", lambda r, a, i: "items_shuffle.json",
     r"items_shuffle.json: the file holds an object, expected a list"),
    ("instructions-a-list", lambda r, a, i: "items_human_ins.json",
     r"items_human_ins.json: the file holds a list, expected an object"),
]


def _malformed(folder: Path, to: Path, mutate) -> tuple[Path, str]:
    """A copy of ``folder`` in ``to`` with ``mutate`` applied; also the first product's asin."""
    _copy(folder, to)
    files = ("items_shuffle.json", "items_ins_v2.json", "items_human_ins.json")
    rows, attrs, ins = (json.loads((to / f).read_text()) for f in files)
    asin = rows[0]["asin"]
    wrong_type = mutate(rows, attrs, ins)
    data = dict(zip(files, (rows, attrs, ins)))
    if isinstance(wrong_type, str):  # the file's content in the other top-level type
        data[wrong_type] = {"x": data[wrong_type]} if isinstance(data[wrong_type], list) else list(data[wrong_type])
    for f, content in data.items():
        (to / f).write_text(json.dumps(content))
    return to, asin


@pytest.mark.parametrize("mutate, pattern", [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_loader_refuses_malformed_records_naming_file_record_and_key(folder, tmp_path, mutate, pattern):
    bad, asin = _malformed(folder, tmp_path, mutate)
    with pytest.raises(CatalogueError, match=pattern.format(A=asin, a=asin.lower())) as err:
        load_catalogue(bad)
    assert "\n" not in str(err.value) and str(bad) in str(err.value)


@pytest.mark.parametrize("name", ["items_shuffle.json", "items_ins_v2.json", "items_human_ins.json"])
def test_loader_refuses_non_utf8_and_non_json_naming_the_file_and_offset(folder, tmp_path, name):
    bad = _copy(folder, tmp_path)
    raw = (bad / name).read_bytes()
    (bad / name).write_bytes(raw[:40] + b"\xff\xfe" + raw[40:])
    with pytest.raises(CatalogueError, match=rf"{name}: not UTF-8 \(byte 0xff at offset 40\); re-save the file"):
        load_catalogue(bad)
    (bad / name).write_bytes(raw[:-10])
    with pytest.raises(CatalogueError, match=rf"{name}: not valid JSON \(.*\); fix the file"):
        load_catalogue(bad)


def test_lower_case_asins_are_upper_cased_and_play(folder, tmp_path):
    """A lower-case ASIN (in any of the three files) is matched upper-cased, as the site
    clicks it: the expert buys it with score 1 (before, play crashed with KeyError)."""
    bad = _copy(folder, tmp_path)
    rows = json.loads((bad / "items_shuffle.json").read_text())
    attrs = json.loads((bad / "items_ins_v2.json").read_text())
    ins = json.loads((bad / "items_human_ins.json").read_text())
    asin = rows[0]["asin"]
    rows[0]["asin"] = asin.lower()  # products file lower case, instructions upper
    attrs = {(k.lower() if k == asin else k): v for k, v in attrs.items()}
    other = rows[1]["asin"]
    ins = {(k.lower() if k == other else k): v for k, v in ins.items()}  # instructions lower, products upper
    for f, content in (("items_shuffle.json", rows), ("items_ins_v2.json", attrs), ("items_human_ins.json", ins)):
        (bad / f).write_text(json.dumps(content))
    loaded = load_catalogue(bad)
    original = load_catalogue(folder)
    assert loaded.goals == original.goals and loaded.prices == original.prices
    assert loaded.by_asin[asin] == original.by_asin[asin]  # the attributes were found too
    env = WebShopEnv(WebShopSettings(), np.random.default_rng(0), loaded, loaded.goals)
    env.reset()
    for target in (asin, other):
        goal = next(g for g in loaded.goals if g.asin == target)
        assert play_expert(env, goal)[0] == 1.0


def test_cli_check_of_a_malformed_catalogue_is_one_line_exit_2(folder, tmp_path, capsys):
    bad, asin = _malformed(folder, tmp_path, MALFORMED[2][1])  # an option without value
    before = sorted((p.name, p.stat().st_mtime_ns) for p in bad.iterdir())
    assert main(["webshop", "check", str(bad)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err + captured.out
    assert str(bad / "items_shuffle.json") in lines[0] and "lacks 'value'" in lines[0]
    assert sorted((p.name, p.stat().st_mtime_ns) for p in bad.iterdir()) == before


def test_pipeline_reports_a_malformed_catalogue_under_its_key(folder, tmp_path):
    from mage_core.config import ConfigError, load_config
    from mage_core.stages.task_data import check_task_data

    bad, asin = _malformed(folder, tmp_path, MALFORMED[6][1])  # a null instruction
    cfg = load_config(REPO / "params.yaml", ["env.name=webshop", f"env.webshop.data_path={bad}"])
    with pytest.raises(ConfigError) as err:
        check_task_data(cfg, "evaluate")
    (problem,) = err.value.problems
    assert problem.startswith(f"env.webshop.data_path: {bad / 'items_human_ins.json'}: instruction 0 of {asin}")


@pytest.mark.parametrize("argv", [["webshop", "generate"], ["data", "generate", "webshop", "--params",
                                                              str(REPO / "params.yaml")]],
                         ids=["webshop-generate", "data-generate-webshop"])
@pytest.mark.parametrize("where", ["under-a-file", "a-file"])
def test_generate_into_an_impossible_folder_is_one_line_exit_2(tmp_path, capsys, argv, where):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file\n")
    out = blocker / "shop" if where == "under-a-file" else blocker
    assert main([*argv, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err + captured.out
    assert lines[0].startswith(f"error: --out {out}: {blocker} is a file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"] and blocker.read_text() == "a file\n"


# ---------------------------------------------------------------- the pipeline's view: splits, compact prompts


def test_settings_splits_are_disjoint_and_sized(folder):
    from mage_core.envs.webshop.env import split_goals
    from mage_core.envs.webshop.params import SPLITS

    catalogue = load_catalogue(folder)
    goals = {s: split_goals(catalogue, WebShopSettings(data_path=str(folder), split=s)) for s in SPLITS}
    # 6 in-domain categories x 40 products x 3 instructions = 720 = 500 eval + 100 select + 120 train
    assert {s: len(g) for s, g in goals.items()} == {"train": 120, "select": 100, "eval": 500, "ood": 240}
    texts = [{g.instruction for g in goals[s]} for s in SPLITS]
    assert sum(map(len, texts)) == len(set().union(*texts)) == len(catalogue.goals)
    assert goals["eval"] == catalogue.split("eval")  # the first 500 in-domain goals
    with pytest.raises(CatalogueError, match="split 'train' has no goals"):
        split_goals(catalogue, WebShopSettings(data_path=str(folder), num_eval=650, num_select=100))
    with pytest.raises(ValueError, match=r"split\s+Input should be 'train', 'select', 'eval' or 'ood'"):
        WebShopSettings(split="test")


def test_env_from_settings_loads_the_folder_once(folder):
    from mage_core.envs.webshop.env import load_shop

    a = WebShopEnv(WebShopSettings(data_path=str(folder), split="ood"), np.random.default_rng(0))
    b = WebShopEnv(WebShopSettings(data_path=str(folder), split="eval"), np.random.default_rng(0))
    assert a.catalogue is b.catalogue and load_shop.cache_info().hits >= 1
    assert {g.category for g in a.goals} == set(OOD_CATEGORIES)


def test_compact_actions_are_distinct_words_of_the_compact_vocabulary(catalogue):
    from mage_core.envs.webshop.env import compact_action_words

    vocabulary = set(compact_action_words(catalogue))
    e = WebShopEnv(WebShopSettings(), np.random.default_rng(5), catalogue, catalogue.goals)
    seen_pages = set()
    for _ in range(30):
        e.reset()
        while not e.done:
            legal = e.legal_actions()
            words = [e.compact_action(a) for a in legal]
            assert len(set(words)) == len(words) and set(words) <= vocabulary
            assert all(" " not in w for w in words)
            # the compact page names every choice it offers
            observation = e.compact_observation()
            assert all(w in observation.split() for w in words if w[0] in "ro" and w[1:].isdigit())
            seen_pages.add(e.page)
            e.step(expert_action(e) if e.turn % 2 == 0 else legal[len(legal) // 2])
    assert {"search", "results", "item"} <= seen_pages


def test_compact_observation_by_hand(catalogue):
    e = _env_on("item", catalogue)
    product = catalogue.by_asin[e.open_asin]
    first_value = next(iter(product.options.values()))[0]
    assert e.compact_action(f"click[{first_value}]") == "o1"
    assert e.compact_action("click[buy now]") == "buy" and e.compact_action("click[< prev]") == "prev"
    e.step(f"click[{first_value}]")
    text = e.compact_observation()
    assert text.startswith(compact_goal(e.goal.instruction) + f" item {product.name.lower()} {product.price_text} o1 ")
    assert text.endswith(f"chosen {first_value}")
    assert compact_goal("i am looking for a green tea that is organic, and price lower than 20.00 dollars") == \
        "green tea organic, price lower than 20.00 dollars"
    while not e.done:
        e.step(expert_action(e))
    assert e.compact_observation().endswith(" won") and " bought " in e.compact_observation()


def test_an_evaluation_set_plays_each_goal_of_its_split_once(catalogue):
    from mage_core.config import Config
    from mage_core.evaluation.meta_eval import evaluation_specs
    from mage_core.rollout.meta_episode import MetaEpisode
    from mage_core.trainers.meta_rl import meta_settings

    goals = catalogue.goals[:5]
    specs = evaluation_specs("webshop", [], 5, seed=3)
    assert [s.task_index for s in specs] == [0, 1, 2, 3, 4]
    played = []
    for spec in specs:  # every spec gets its own env and draw, as an evaluation builds them
        env = WebShopEnv(WebShopSettings(), np.random.default_rng(spec.task_seed), catalogue, goals)
        MetaEpisode(spec, env, meta_settings(Config(), "webshop", 3, True), encode=len, encode_action=len)
        played.append(env.goal)
    assert played == list(goals)  # each once, in the split's order; a draw would repeat some
    env = WebShopEnv(WebShopSettings(), np.random.default_rng(0), catalogue, goals)
    with pytest.raises(ValueError, match=r"asks for goal 6 of a split of 5: .* to at most 5"):
        env.reset_to(5)
