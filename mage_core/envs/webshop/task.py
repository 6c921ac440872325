"""WebShop as a task (``mage_core.envs.task``): a catalogue folder, splits of goals."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from mage_core.envs.task import DataStage, Task, TaskData, TaskPrompt

#: The splits each stage plays.
SPLITS = {"train": ("train", "select"), "evaluate": ("eval", "ood")}


def _reward_bounds(w: Any) -> tuple[float, float]:
    return 0.0, max(w.success_reward, w.partial_reward_scale)


def _problems(cfg: Any, stage: DataStage) -> list[str]:
    from mage_core.envs.webshop.catalogue import CatalogueError
    from mage_core.envs.webshop.env import load_shop, split_goals

    settings = cfg.env.webshop
    try:
        catalogue, _ = load_shop(settings.data_path, settings.load_seed, settings.skip_unknown_goals)
        for split in SPLITS[stage]:
            split_goals(catalogue, settings.replace(split=split))
    except CatalogueError as err:
        return [f"env.webshop.data_path: {err}"]
    return []


def _texts(cfg: Any) -> Iterator[str]:
    """Every product and goal of the catalogue as its compact prompt shows them."""
    from mage_core.envs.webshop.env import compact_goal, load_shop

    w = cfg.env.webshop
    catalogue, _ = load_shop(w.data_path, w.load_seed, w.skip_unknown_goals)
    for p in catalogue.products:
        yield " ".join([p.name.lower(), p.price_text, p.description.lower(), " ".join(p.bullets).lower(),
                        *(v for values in p.options.values() for v in values)])
    for g in catalogue.goals:
        yield compact_goal(g.instruction)
    yield "refuted confirmed chosen"  # the kinds of what an attempt reveals (``WebShopEnv.revealed``)


def _action_words(env: Any) -> Iterable[str]:
    """Its first page offers only "search": every page's words."""
    from mage_core.envs.webshop.env import compact_action_words

    return compact_action_words(env.catalogue)


TASK = Task(
    name="webshop",
    title="WebShop",
    report_order=4,
    params="mage_core.envs.webshop.params:WebShopSettings",
    prompt=TaskPrompt(
        tag="webshop",
        rules=(
            "You are an expert autonomous agent shopping on the WebShop website.\n"
            "# Rules\n"
            "- Each page is shown as text, its parts separated by [SEP]. The instruction says what to buy: "
            "a product, its attributes, its options (such as size or colour) and a price limit.\n"
            "- search[query] searches the catalogue from any page. click[name] clicks a button, a product's "
            "ID, or an option value shown on the page (in lower case), e.g. click[next >], click[buy now].\n"
            "- On a product's page, click each wanted option value before Buy Now. Buying ends the attempt.\n"
            "# Goal\n"
            "You get several attempts at the same instruction. Learn from the earlier attempts and buy the "
            "product that matches every requirement."
        ),
        action_format=(
            "Choose ONE action, search[query] or click[name], inside <action> </action> tags, e.g. "
            "<action>click[buy now]</action>."
        ),
    ),
    env_class="mage_core.envs.webshop.env:WebShopEnv",
    reward_bounds=_reward_bounds,
    in_domain_params={"split": "eval"},
    ood_param="split",
    ood_suite="mage_core.envs.webshop.params:WebShopSuiteConfig",
    ood_defaults={"unseen_categories": {}},
    action_words=_action_words,
    data=TaskData(problems=_problems, params="mage_core.envs.webshop.params:WebShopDataConfig",
                  generate="mage_core.envs.webshop.commands:generate_from_params",
                  texts=_texts),
    expert="mage_core.envs.webshop.expert:act",
    # Its later attempts beat its first on replays: 83 / 92 / 96 % by attempt on the 100 select goals.
    expert_memory=True,
)
