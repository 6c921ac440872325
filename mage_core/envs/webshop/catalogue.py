"""WebShop's products and goals: the official file schema, a loader and a generator.

A catalogue folder holds the three files of the official release (their names
and fields; docs/environments.md):

- ``items_shuffle.json``: a list of products, each ``asin``, ``category``,
  ``query``, ``name``, ``product_category`` ("a › b › c"), ``full_description``,
  ``small_description`` (a list of bullets or one string), ``pricing`` ("$x" or
  "$a - $b"; empty = $100) and ``customization_options``
  (``{type: [{"value": v, "image": url|null}]}``);
- ``items_ins_v2.json``: ``{asin: {"attributes": [...], "instruction": str,
  "instruction_attributes": [...]}}``;
- ``items_human_ins.json``: ``{asin: [{"instruction": str,
  "instruction_attributes": [...], "instruction_options": [...]}, ...]}``.

The official files are named ``items_shuffle_1000.json`` etc.; ``load_catalogue``
accepts either name. Goals are built as the official code builds human goals:
one per instruction, its price limit the larger of two draws from the next four
multiples of ten above the product's price, appended as ", and price lower than
X.00 dollars". ``generate_catalogue`` writes a catalogue in this schema from a
seed, with in-domain categories and out-of-domain ones (``OOD_CATEGORIES``), so
the project needs no download; a user with the official files points the loader
at them instead. Reading the files and checking each record is ``schema``'s part.
"""

from __future__ import annotations

import itertools
import json
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mage_core.envs.base import check_generator
from mage_core.envs.webshop.schema import (
    ATTRIBUTES_FILE, INSTRUCTIONS_FILE, PRODUCTS_FILE, CatalogueError, CatalogueFiles, check_instruction,
    json_type, parse_pricing, product_fields, read_files,
)

#: What other modules import from here (the file names, ``CatalogueError`` and
#: ``parse_pricing`` live in ``schema``, with the checks of the official files).
__all__ = [
    "ATTRIBUTES_FILE", "INSTRUCTIONS_FILE", "OOD_CATEGORIES", "PRODUCTS_FILE", "Catalogue", "CatalogueError",
    "Goal", "Product", "generate_catalogue", "load_catalogue", "parse_pricing", "price_upper", "write_catalogue",
]
_PRICE_RANGE = tuple(range(10, 1000, 10))


@dataclass(frozen=True)
class Product:
    """One product as the environment shows and scores it."""

    asin: str  # upper case (the loader upper-cases the data's IDs, as the site does)
    category: str
    query: str  # lower case
    name: str
    product_category: str
    description: str
    bullets: tuple[str, ...]
    pricing: tuple[float, ...]  # one price or (low, high)
    options: dict[str, tuple[str, ...]]  # type (lower) -> values (normalised, lower)
    attributes: tuple[str, ...]

    @property
    def price_text(self) -> str:
        """The price as the results and item pages print it ("$19.0", "$5.0 to $9.5")."""
        if not self.pricing:
            return "$100.0"
        if len(self.pricing) == 1:
            return f"${self.pricing[0]}"
        return f"${self.pricing[0]} to ${self.pricing[1]}"

    def search_text(self) -> str:
        """What the search index holds (the official converter): title, description,
        first bullet and the options, lower case."""
        option_text = ", and ".join(f"{t}: {', '.join(v)}" for t, v in self.options.items())
        first_bullet = self.bullets[0] if self.bullets else ""
        return " ".join([self.name, self.description, first_bullet, option_text]).lower()


@dataclass(frozen=True)
class Goal:
    """One shopping instruction and what it asks for."""

    asin: str  # the product it was written for
    category: str
    query: str
    name: str
    product_category: str
    instruction: str  # shown to the agent, price clause included
    attributes: tuple[str, ...]
    #: As the instructions file writes them (case, "/" and spaces kept), as the official
    #: ``get_human_goals``; product options are normalised (``schema.normalise_option``).
    options: tuple[str, ...]
    price_upper: float


@dataclass(frozen=True)
class Catalogue:
    """Products (with the price each is sold at), their goals, and the splits."""

    products: tuple[Product, ...]
    prices: dict[str, float]  # asin -> price the product is sold at
    goals: tuple[Goal, ...]
    skipped_goals: int = 0  # instructions for products the catalogue lacks (``skip_unknown_goals``)
    by_asin: dict[str, Product] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_asin", {p.asin: p for p in self.products})

    def split(self, name: str, num_eval: int = 500, ood_categories: Sequence[str] | None = None) -> tuple[Goal, ...]:
        """The goals of one split, in the catalogue's shuffled goal order:
        ``eval`` = the first ``num_eval`` in-domain goals (verl-agent's 0-499),
        ``train`` = the other in-domain goals, ``ood`` = goals of
        ``ood_categories`` (default ``OOD_CATEGORIES``), never trained on."""
        ood = set(OOD_CATEGORIES if ood_categories is None else ood_categories)
        in_domain = [g for g in self.goals if g.category not in ood]
        if name == "eval":
            return tuple(in_domain[:num_eval])
        if name == "train":
            return tuple(in_domain[num_eval:])
        if name == "ood":
            return tuple(g for g in self.goals if g.category in ood)
        raise ValueError(f"unknown WebShop split {name!r}; choose train, eval or ood")


# --------------------------------------------------------------------------- loading


def price_upper(price: float, rng: np.random.Generator) -> float:
    """The official limit: the larger of two distinct draws from the next four
    multiples of ten above ``price``; 1,000,000 (no limit) above 980."""
    candidates = [p for p in _PRICE_RANGE if p > price][:4]
    if len(candidates) < 2:
        return 1_000_000.0
    picks = rng.choice(len(candidates), size=2, replace=False)
    return float(max(candidates[i] for i in picks))


def load_catalogue(folder: str | Path, seed: int = 233, skip_unknown_goals: bool = False) -> Catalogue:
    """Read a catalogue folder (official or generated). ``seed`` draws the prices
    of products sold in a price range and the goals' price limits, and shuffles
    the goals (the official code shuffles with 233).

    An instruction for a product the products file lacks is an error, unless
    ``skip_unknown_goals``: then it is ignored, as the official loader ignores
    the human instructions of products outside ``items_shuffle_1000.json``, and
    ``Catalogue.skipped_goals`` counts them.

    ASINs are upper-cased (the site upper-cases the IDs it is clicked with), in
    all three files; two that differ only in case are refused. A file that is
    not UTF-8 or not JSON, holds the wrong top-level type, or a record whose
    field has the wrong type (attributes not a list of strings, an option
    without ``value``, a null instruction, a price that is not one) raises
    ``CatalogueError`` naming the file, the record and the key."""
    files = read_files(Path(folder))
    rng = np.random.default_rng(seed)
    products = _products(files)
    prices = _prices(products, rng)
    goals, skipped = _goals(files, {p.asin: p for p in products}, prices, rng, skip_unknown_goals)
    if not goals:
        raise CatalogueError(f"{files.instructions_file}: no usable goal (every instruction "
                             f"needs instruction_attributes)")
    order = rng.permutation(len(goals))
    return Catalogue(products=tuple(products), prices=prices, goals=tuple(goals[i] for i in order),
                     skipped_goals=skipped)


def _products(files: CatalogueFiles) -> list[Product]:
    """The products file's rows as products, in file order: rows the official loader
    drops ("nan" or over-long ASINs, repeats) left out, case-only twins refused."""
    products: list[Product] = []
    seen: dict[str, tuple[int, str]] = {}  # upper-case asin -> (row, asin as written)
    for i, row in enumerate(files.rows):
        where = f"{files.products_file} item {i}"
        if not isinstance(row, dict):
            raise CatalogueError(f"{where}: {json_type(row)}, not a product object")
        if "asin" in row and not isinstance(row["asin"], str):
            raise CatalogueError(f"{where}: 'asin' is {json_type(row['asin'])}; it must be a string")
        written = row.get("asin", "")
        asin = written.upper()  # the site upper-cases the IDs it is given
        if written == "nan" or len(asin) > 10:
            continue  # as the official loader
        if "asin" in row and not asin.strip():
            raise CatalogueError(f"{where}: 'asin' is empty; every product needs its ID")
        if asin in seen:
            first, first_written = seen[asin]
            if first_written == written:
                continue  # a repeated product: the official loader keeps the first
            raise CatalogueError(f"{where}: asin {written!r} and item {first}'s {first_written!r} differ only in "
                                 f"case, and ASINs are matched upper-cased; rename one")
        seen[asin] = (i, written)
        products.append(Product(**product_fields(row, asin, files.attributes, where, files.attributes_file)))
    return products


def _prices(products: list[Product], rng: np.random.Generator) -> dict[str, float]:
    """The price each product is sold at: its price, $100 without one, or a draw
    from its range (one draw per ranged product, in product order)."""
    prices = {}
    for p in products:
        if not p.pricing:
            prices[p.asin] = 100.0
        elif len(p.pricing) == 1:
            prices[p.asin] = p.pricing[0]
        else:
            prices[p.asin] = round(float(rng.uniform(p.pricing[0], p.pricing[1])), 2)
    return prices


def _goals(files: CatalogueFiles, by_asin: dict[str, Product], prices: dict[str, float],
           rng: np.random.Generator, skip_unknown_goals: bool) -> tuple[list[Goal], int]:
    """The goals of the instructions file in file order (each draws its price
    limit), and how many instructions were skipped for unknown products."""
    instructions_file = files.instructions_file
    goals, skipped = [], 0
    for asin, entries in files.instructions.items():
        if asin not in by_asin:
            if skip_unknown_goals:
                skipped += len(entries) if isinstance(entries, list) else 1
                continue
            raise CatalogueError(f"{instructions_file}: goal for product {asin!r}, which "
                                 f"{files.products_file.name} does not have (with the official 1000-product file, "
                                 f"set env.webshop.skip_unknown_goals: true to ignore such goals)")
        if not isinstance(entries, list):
            raise CatalogueError(f"{instructions_file}: the instructions of {asin} are {json_type(entries)}; "
                                 f"they must be a list of {{\"instruction\": ..., \"instruction_attributes\": [...]}}")
        product = by_asin[asin]
        for j, entry in enumerate(entries):
            checked = check_instruction(entry, f"{instructions_file}: instruction {j} of {asin}")
            if checked is None:
                continue  # no instruction_attributes, as the official loader
            instruction, wanted, wanted_options = checked
            upper = price_upper(prices[asin], rng)
            text = instruction.strip(".")
            if upper < 1_000_000:
                text += f", and price lower than {upper:.2f} dollars"
            goals.append(Goal(
                asin=asin, category=product.category, query=product.query, name=product.name,
                product_category=product.product_category, instruction=text,
                attributes=tuple(wanted),
                options=tuple(wanted_options),  # as written: the official goal keeps their case
                price_upper=upper,
            ))
    return goals, skipped


# --------------------------------------------------------------------------- generation

#: category -> (breadcrumb, product nouns, attribute pool, option types, price range).
_CATEGORIES: dict[str, dict[str, Any]] = {
    "beauty": {
        "path": "Beauty & Personal Care › Hair Care",
        "nouns": ["shampoo", "conditioner", "hair oil", "hair mask", "scalp serum"],
        "attributes": ["paraben free", "sulfate free", "natural ingredients", "tea tree", "cruelty free",
                       "dry hair", "long lasting", "travel size"],
        "options": {"size": ["8 fl oz", "16 fl oz", "32 fl oz"], "scent": ["lavender", "coconut", "mint", "unscented"]},
        "price": (6, 45),
    },
    "grocery": {
        "path": "Grocery & Gourmet Food › Beverages",
        "nouns": ["green tea", "coffee beans", "herbal tea", "cocoa mix", "matcha powder"],
        "attributes": ["gluten free", "organic", "non gmo", "low calorie", "caffeine free", "sugar free",
                       "fair trade", "individually wrapped"],
        "options": {"flavor": ["original", "vanilla", "caramel", "honey", "lemon"], "pack": ["1 count", "3 count", "6 count"]},
        "price": (4, 38),
    },
    "fashion": {
        "path": "Clothing, Shoes & Jewelry › Men › Clothing",
        "nouns": ["t-shirt", "hoodie", "jogger pants", "polo shirt", "rain jacket"],
        "attributes": ["machine wash", "relaxed fit", "cotton blend", "quick dry", "long sleeve",
                       "moisture wicking", "button closure", "elastic waist"],
        "options": {"color": ["black", "navy blue", "heather grey", "olive green", "white"],
                    "size": ["small", "medium", "large", "x-large"]},
        "price": (12, 80),
    },
    "electronics": {
        "path": "Electronics › Accessories & Supplies",
        "nouns": ["usb cable", "phone case", "power bank", "wireless charger", "earbuds"],
        "attributes": ["fast charging", "high speed", "water resistant", "easy install", "shockproof",
                       "compact design", "noise cancelling", "long battery life"],
        "options": {"color": ["black", "white", "rose gold", "blue"], "length": ["3 ft", "6 ft", "10 ft"]},
        "price": (8, 95),
    },
    "home": {
        "path": "Home & Kitchen › Bedding",
        "nouns": ["throw blanket", "pillow cover", "duvet cover", "bed sheet set", "mattress topper"],
        "attributes": ["machine washable", "hypoallergenic", "soft fabric", "wrinkle free", "queen size",
                       "fade resistant", "easy care", "breathable"],
        "options": {"color": ["beige", "charcoal", "sage green", "ivory", "burgundy"], "size": ["twin", "full", "queen", "king"]},
        "price": (15, 120),
    },
    "sports": {
        "path": "Sports & Outdoors › Exercise & Fitness",
        "nouns": ["yoga mat", "resistance bands", "jump rope", "water bottle", "gym bag"],
        "attributes": ["non slip", "eco friendly", "lightweight", "bpa free", "extra thick", "portable",
                       "high density", "easy carry"],
        "options": {"color": ["purple", "teal", "black", "pink"], "size": ["standard", "large", "extra large"]},
        "price": (7, 60),
    },
    # out of domain: never in the train or eval splits
    "pet": {
        "path": "Pet Supplies › Dogs",
        "nouns": ["dog bed", "chew toy", "dog leash", "pet shampoo", "food bowl"],
        "attributes": ["washable cover", "durable", "non toxic", "orthopedic", "reflective", "anti slip",
                       "easy clean", "stainless steel"],
        "options": {"color": ["brown", "grey", "red", "blue"], "size": ["small", "medium", "large"]},
        "price": (6, 70),
    },
    "garden": {
        "path": "Patio, Lawn & Garden › Gardening",
        "nouns": ["garden hose", "planter pot", "pruning shears", "seed starter kit", "watering can"],
        "attributes": ["uv resistant", "rust proof", "heavy duty", "drainage hole", "ergonomic handle",
                       "leak proof", "weather resistant", "kink free"],
        "options": {"color": ["green", "terracotta", "black", "white"], "size": ["small", "medium", "large"]},
        "price": (9, 85),
    },
}
#: Categories of the out-of-domain split.
OOD_CATEGORIES: tuple[str, ...] = ("pet", "garden")
_BRANDS = ("Lumora", "Verdant", "Kestrel", "Halcyon", "Norvik", "Aurelle", "Bramble", "Cobalt", "Daybreak",
           "Everly", "Fjord", "Galena", "Harbor", "Indigo Lane", "Juniper", "Kinfolk", "Larkspur", "Meridian")


def _asin(rng: np.random.Generator, taken: set[str]) -> str:
    alphabet = string.ascii_uppercase + string.digits
    while True:
        asin = "B0" + "".join(alphabet[i] for i in rng.integers(0, len(alphabet), 8))
        if asin not in taken:
            taken.add(asin)
            return asin


def generate_catalogue(rng: np.random.Generator, products_per_category: int = 40,
                       instructions_per_product: int = 3) -> dict[str, Any]:
    """A catalogue in the official schema: ``{file name: JSON content}`` for the
    three files (write them with ``write_catalogue``).

    Every product of a category shares its noun pool, attribute pool and option
    types with the others, so an instruction ("... that is paraben free and tea
    tree, with size: 16 fl oz ...") picks one product out of look-alikes: the
    attributes are two of the product's four, the options one value per type.
    Titles are unique (brand + noun + two attributes), and so are instruction
    texts (a product gets fewer than ``instructions_per_product`` if its
    look-alikes took every combination)."""
    rng = check_generator(rng, "generate_catalogue")
    if products_per_category < 1 or instructions_per_product < 1:
        raise ValueError("products_per_category and instructions_per_product must be >= 1")
    items, attributes, instructions = [], {}, {}
    taken: set[str] = set()
    titles: set[str] = set()
    used: set[str] = set()  # instruction texts: no two goals share one (no train/eval leak)
    for category, spec in _CATEGORIES.items():
        for _ in range(products_per_category):
            for _attempt in range(100):
                noun = spec["nouns"][rng.integers(len(spec["nouns"]))]
                attrs = [spec["attributes"][i] for i in sorted(rng.choice(len(spec["attributes"]), 4, replace=False))]
                brand = _BRANDS[rng.integers(len(_BRANDS))]
                title = f"{brand} {noun.title()} - {attrs[0].title()}, {attrs[1].title()}"
                if title not in titles:
                    titles.add(title)
                    break
            else:  # pragma: no cover - 18 brands x 5 nouns x 56 ordered attribute pairs
                raise ValueError(f"could not draw {products_per_category} unique {category} titles")
            asin = _asin(rng, taken)
            low, high = spec["price"]
            base = round(float(rng.uniform(low, high)), 2)
            pricing = f"${base}" if rng.random() < 0.7 else f"${base} - ${round(base * 1.3, 2)}"
            options = {}
            for option_type, values in spec["options"].items():
                k = int(rng.integers(2, len(values) + 1))
                chosen = [values[i] for i in sorted(rng.choice(len(values), k, replace=False))]
                options[option_type] = [{"value": v.title() if option_type == "color" else v, "image": None}
                                        for v in chosen]
            items.append({
                "asin": asin, "category": category, "query": noun, "name": title,
                "product_category": f"{spec['path']} › {noun.title()}",
                "full_description": f"{title}. A {noun} that is {', '.join(attrs[:-1])} and {attrs[-1]}.",
                "small_description": [a.capitalize() for a in attrs],
                "pricing": pricing, "images": [None], "customization_options": options,
            })
            attributes[asin] = {"attributes": attrs, "instruction": "", "instruction_attributes": []}
            goals = []
            for wanted_attrs, wanted_options in _instruction_combos(rng, attrs, options):
                option_text = ", and ".join(f"{t}: {v.lower()}" for t, v in wanted_options)
                text = f"i am looking for a {noun} that is {wanted_attrs[0]} and {wanted_attrs[1]}, with {option_text}"
                if text in used:
                    continue
                used.add(text)
                goals.append({"instruction": text, "instruction_attributes": list(wanted_attrs),
                              "instruction_options": [v.lower() for _, v in wanted_options]})
                if len(goals) == instructions_per_product:
                    break
            if not goals:  # pragma: no cover - every combination taken by look-alikes
                raise ValueError(f"{category}: no unused instruction left for {title}; lower --products-per-category")
            instructions[asin] = goals
            attributes[asin]["instruction"] = goals[0]["instruction"]
            attributes[asin]["instruction_attributes"] = goals[0]["instruction_attributes"]
    order = rng.permutation(len(items))
    return {PRODUCTS_FILE: [items[i] for i in order], ATTRIBUTES_FILE: attributes, INSTRUCTIONS_FILE: instructions}


def _instruction_combos(rng, attrs, options):
    """Distinct (two attributes, one value per option type) combinations, random order."""
    pairs = list(itertools.combinations(attrs, 2))
    option_lists = [[(t, o["value"]) for o in vals] for t, vals in options.items()]
    combos = [(p, tuple(o)) for p in pairs for o in itertools.product(*option_lists)]
    for i in rng.permutation(len(combos)):
        yield combos[i]


def write_catalogue(content: dict[str, Any], folder: str | Path) -> Path:
    """Write ``generate_catalogue``'s files into ``folder`` (each atomically)."""
    from mage_core.io.atomic import write_text_atomic

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in content.items():
        write_text_atomic(folder / name, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return folder
