"""``env.webshop``, ``evaluation.ood.webshop`` and ``data.webshop`` of params.yaml."""

from __future__ import annotations

from typing import Any, Literal

from mage_core.envs.params import PenaltyConfig
from mage_core.schema import NonNegativeFloat, NonNegativeInt, PositiveInt, Strict


class WebShopConfig(PenaltyConfig):
    """WebShop (docs/method.md section 10: 12 turns, 1024 response tokens, no length
    penalty); the catalogue folder and its splits (docs/environments.md)."""

    data_path: str = "data/webshop"
    load_seed: int = 233
    num_eval: NonNegativeInt = 500
    num_select: NonNegativeInt = 100
    skip_unknown_goals: bool = False
    max_turns: PositiveInt = 12
    success_reward: NonNegativeFloat = 10.0
    partial_reward_scale: NonNegativeFloat = 0.0
    noun_extractor: Literal["words", "spacy"] = "words"
    length_penalty_coef: NonNegativeFloat = 0.0
    max_response_tokens: PositiveInt = 1024

    def settings(self) -> Any:
        from mage_core.envs.webshop.env import WebShopSettings

        fields = self.model_dump(exclude=set(PenaltyConfig.model_fields))
        return WebShopSettings(**fields)


class WebShopSuiteConfig(Strict):
    """An out-of-domain WebShop suite: the goals of a split never trained on."""

    split: Literal["ood"] = "ood"


class WebShopDataConfig(Strict):
    """``data.webshop``: the generated WebShop catalogue (``mage data generate webshop``)."""

    seed: NonNegativeInt = 0
    products_per_category: PositiveInt = 60
    instructions_per_product: PositiveInt = 3
