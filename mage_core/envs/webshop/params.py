"""``env.webshop``, ``evaluation.ood.webshop`` and ``data.webshop`` of params.yaml: WebShop's
settings, its out-of-domain suite and its generated catalogue."""

from __future__ import annotations

from typing import Literal

from mage_core.envs.params import EnvSettings, set_in_code
from mage_core.schema import FiniteNonNegativeFloat, NonNegativeFloat, NonNegativeInt, PositiveInt, Strict

#: The splits of a catalogue's goals an environment can play (``WebShopSettings.split``).
SPLITS = ("train", "select", "eval", "ood")


class WebShopSettings(EnvSettings):
    """Paper settings (docs/method.md section 10: 12 turns, 1024 response tokens, no length
    penalty); rewards as verl-agent.

    ``data_path`` is a catalogue folder (``mage webshop generate`` or the official files),
    read with ``load_seed`` (the official 233) and split into ``eval`` (the first
    ``num_eval`` in-domain goals), ``select`` (the next ``num_select``: the set
    training-time evaluation picks ``best/`` on), ``train`` (the rest) and ``ood`` (unseen
    categories, docs/environments.md); an environment plays ``split``, which the code that
    builds it chooses (a suite's ``Task.in_domain_params`` / ``ood_param``), not params.yaml."""

    data_path: str = "data/webshop"
    load_seed: int = 233
    num_eval: NonNegativeInt = 500
    num_select: NonNegativeInt = 100
    skip_unknown_goals: bool = False
    max_turns: PositiveInt = 12
    success_reward: FiniteNonNegativeFloat = 10.0
    partial_reward_scale: FiniteNonNegativeFloat = 0.0
    noun_extractor: Literal["words", "spacy"] = "words"  # reward.NOUN_EXTRACTORS (a test holds them equal)
    length_penalty_coef: NonNegativeFloat = 0.0
    max_response_tokens: PositiveInt = 1024
    split: Literal[SPLITS] = set_in_code("train")  # type: ignore[valid-type]


class WebShopSuiteConfig(Strict):
    """An out-of-domain WebShop suite: the goals of a split never trained on."""

    split: Literal["ood"] = "ood"


class WebShopDataConfig(Strict):
    """``data.webshop``: the generated WebShop catalogue (``mage data generate webshop``)."""

    seed: NonNegativeInt = 0
    products_per_category: PositiveInt = 60
    instructions_per_product: PositiveInt = 3
