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
at them instead.
"""

from __future__ import annotations

import itertools
import json
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mage_core.envs.base import check_generator

#: The official file names (the release's ``_1000`` suffix is accepted too).
PRODUCTS_FILE = "items_shuffle.json"
ATTRIBUTES_FILE = "items_ins_v2.json"
INSTRUCTIONS_FILE = "items_human_ins.json"
_PRICE_RANGE = tuple(range(10, 1000, 10))
_REQUIRED_PRODUCT_FIELDS = ("asin", "category", "query", "name", "product_category", "pricing")


class CatalogueError(ValueError):
    """A catalogue file is missing, unreadable or lacks a field; the message names it."""


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


def _find(folder: Path, base: str) -> Path:
    stem = base[: -len(".json")]
    for name in (base, f"{stem}_1000.json"):
        if (folder / name).is_file():
            return folder / name
    raise CatalogueError(f"{folder}: no {base} (or {stem}_1000.json); generate one with "
                         f"`mage webshop generate --out {folder}` or point at the official files")


def _read_json(path: Path, expected: type, shape: str) -> Any:
    """The file's JSON, which must be a ``expected`` (``shape`` says what the file holds)."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise CatalogueError(f"{path}: cannot read ({err.strerror or err})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CatalogueError(f"{path}: not UTF-8 (byte 0x{raw[err.start]:02x} at offset {err.start}); "
                             f"re-save the file as UTF-8") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise CatalogueError(f"{path}: not valid JSON ({err}); fix the file or generate a new catalogue "
                             f"with `mage webshop generate`") from None
    if not isinstance(data, expected):
        raise CatalogueError(f"{path}: the file holds {_json_type(data)}, expected {shape}")
    return data


def _json_type(value: Any) -> str:
    """A parsed value's JSON type with its article ("null", "a list", "an object", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def parse_pricing(raw: Any) -> tuple[float, ...]:
    """The official parse: split on '$', keep digits and dots, the first two
    values. A piece that is not a number ("$1.2.3") raises ``CatalogueError``."""
    if not raw:
        return ()
    values = []
    for piece in str(raw).split("$")[1:]:
        digits = re.sub(r"[^\d.]", "", piece)
        if digits:
            try:
                values.append(float(digits))
            except ValueError:
                raise CatalogueError(f"pricing {raw!r}: {piece.strip()!r} is not a price") from None
    return tuple(values[:2])


def _normalise_option(value: str) -> str:
    return value.strip().replace("/", " | ").lower()


def _product(row: dict, asin: str, attributes: dict, where: str, attributes_file: Path) -> Product:
    """One products-file row (``asin`` already checked and upper-cased), its fields type-checked."""
    missing = [k for k in _REQUIRED_PRODUCT_FIELDS if k not in row]
    if missing:
        raise CatalogueError(f"{where}: product {row.get('asin', '?')!r} lacks {', '.join(missing)}")
    for key in ("category", "query", "name", "product_category"):
        if not isinstance(row[key], str):
            raise CatalogueError(f"{where} ({asin}): {key!r} is {_json_type(row[key])}; it must be a string")
    description = row.get("full_description")
    if description is not None and not isinstance(description, str):
        raise CatalogueError(f"{where} ({asin}): 'full_description' is {_json_type(description)}; "
                             f"it must be a string (or null)")
    bullets = row.get("small_description") or []
    if isinstance(bullets, str):
        bullets = [bullets]
    if not isinstance(bullets, list) or not all(isinstance(b, str) for b in bullets):
        raise CatalogueError(f"{where} ({asin}): 'small_description' must be a list of strings or one string")
    options: dict[str, tuple[str, ...]] = {}
    raw_options = row.get("customization_options") or {}
    if not isinstance(raw_options, dict):
        raise CatalogueError(f"{where} ({asin}): 'customization_options' is {_json_type(raw_options)}; it must "
                             f"be an object {{type: [{{\"value\": ...}}, ...]}}")
    for option_type, values in raw_options.items():
        if values is None:
            continue
        if not isinstance(values, list):
            raise CatalogueError(f"{where} ({asin}): customization_options[{option_type!r}] is "
                                 f"{_json_type(values)}; it must be a list of {{\"value\": ...}} objects")
        normalised = []
        for k, value in enumerate(values):
            if not isinstance(value, dict) or not isinstance(value.get("value"), str):
                got = "lacks 'value'" if isinstance(value, dict) and "value" not in value else (
                    f"has {_json_type(value.get('value'))} 'value'" if isinstance(value, dict)
                    else f"is {_json_type(value)}")
                raise CatalogueError(f"{where} ({asin}): customization_options[{option_type!r}][{k}] {got}; "
                                     f"each option must be an object with a string \"value\"")
            normalised.append(_normalise_option(value["value"]))
        options[option_type.lower()] = tuple(normalised)
    entry = attributes.get(asin, {})
    if not isinstance(entry, dict):
        raise CatalogueError(f"{attributes_file}: the entry of {asin} is {_json_type(entry)}; it must be an "
                             f"object {{\"attributes\": [...], ...}}")
    attrs = entry.get("attributes") or ["DUMMY_ATTR"]
    if not isinstance(attrs, list) or not all(isinstance(a, str) for a in attrs):
        raise CatalogueError(f"{attributes_file}: the 'attributes' of {asin} are {_json_type(attrs)}; they must "
                             f"be a list of strings")
    return Product(
        asin=asin, category=row["category"], query=row["query"].lower().strip(),
        name=row["name"], product_category=row["product_category"],
        description=description or "", bullets=tuple(bullets),
        pricing=_pricing(row["pricing"], f"{where} ({asin})"), options=options, attributes=tuple(attrs),
    )


def _pricing(raw: Any, where: str) -> tuple[float, ...]:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        if not np.isfinite(raw) or raw < 0:
            raise CatalogueError(f"{where}: pricing {raw!r} is not a price; write \"$12.99\" or \"$5 - $9\"")
        return (float(raw),)
    if raw is not None and not isinstance(raw, str):
        raise CatalogueError(f"{where}: pricing is {_json_type(raw)}; write a string such as \"$12.99\" or "
                             f"\"$5 - $9\" (empty: $100)")
    try:
        return parse_pricing(raw)
    except CatalogueError as err:
        raise CatalogueError(f"{where}: {err}") from None


def price_upper(price: float, rng: np.random.Generator) -> float:
    """The official limit: the larger of two distinct draws from the next four
    multiples of ten above ``price``; 1,000,000 (no limit) above 980."""
    candidates = [p for p in _PRICE_RANGE if p > price][:4]
    if len(candidates) < 2:
        return 1_000_000.0
    picks = rng.choice(len(candidates), size=2, replace=False)
    return float(max(candidates[i] for i in picks))


def _upper_keys(data: dict, path: Path) -> dict:
    """``data`` keyed by upper-case ASIN; two keys that differ only in case are refused."""
    out: dict[str, Any] = {}
    written: dict[str, str] = {}
    for key, value in data.items():
        upper = key.upper()
        if upper in out:
            raise CatalogueError(f"{path}: keys {written[upper]!r} and {key!r} differ only in case, and ASINs are "
                                 f"matched upper-cased; merge or rename them")
        out[upper], written[upper] = value, key
    return out


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
    folder = Path(folder)
    if not folder.is_dir():
        raise CatalogueError(f"{folder}: no such catalogue folder; generate one with "
                             f"`mage webshop generate --out {folder}`")
    products_file, attributes_file, instructions_file = (
        _find(folder, name) for name in (PRODUCTS_FILE, ATTRIBUTES_FILE, INSTRUCTIONS_FILE))
    rows = _read_json(products_file, list, "a list of products")
    attributes = _upper_keys(_read_json(attributes_file, dict, "an object {asin: {\"attributes\": [...]}}"),
                             attributes_file)
    instructions = _upper_keys(_read_json(instructions_file, dict, "an object {asin: [instructions]}"),
                               instructions_file)
    if not rows:
        raise CatalogueError(f"{products_file}: expected a non-empty list of products")
    rng = np.random.default_rng(seed)
    products: list[Product] = []
    seen: dict[str, tuple[int, str]] = {}  # upper-case asin -> (row, asin as written)
    for i, row in enumerate(rows):
        where = f"{products_file} item {i}"
        if not isinstance(row, dict):
            raise CatalogueError(f"{where}: {_json_type(row)}, not a product object")
        if "asin" in row and not isinstance(row["asin"], str):
            raise CatalogueError(f"{where}: 'asin' is {_json_type(row['asin'])}; it must be a string")
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
        products.append(_product(row, asin, attributes, where, attributes_file))
    prices = {}
    for p in products:
        if not p.pricing:
            prices[p.asin] = 100.0
        elif len(p.pricing) == 1:
            prices[p.asin] = p.pricing[0]
        else:
            prices[p.asin] = round(float(rng.uniform(p.pricing[0], p.pricing[1])), 2)
    by_asin = {p.asin: p for p in products}
    goals, skipped = [], 0
    for asin, entries in instructions.items():
        if asin not in by_asin:
            if skip_unknown_goals:
                skipped += len(entries) if isinstance(entries, list) else 1
                continue
            raise CatalogueError(f"{instructions_file}: goal for product {asin!r}, which "
                                 f"{products_file.name} does not have (with the official 1000-product file, "
                                 f"set env.webshop.skip_unknown_goals: true to ignore such goals)")
        if not isinstance(entries, list):
            raise CatalogueError(f"{instructions_file}: the instructions of {asin} are {_json_type(entries)}; "
                                 f"they must be a list of {{\"instruction\": ..., \"instruction_attributes\": [...]}}")
        product = by_asin[asin]
        for j, entry in enumerate(entries):
            where = f"{instructions_file}: instruction {j} of {asin}"
            if not isinstance(entry, dict):
                raise CatalogueError(f"{where} is {_json_type(entry)}, not an object")
            for key in ("instruction", "instruction_attributes"):
                if key not in entry:
                    raise CatalogueError(f"{where} lacks {key!r}")
            wanted = entry["instruction_attributes"]
            if wanted is not None and (not isinstance(wanted, list) or not all(isinstance(a, str) for a in wanted)):
                raise CatalogueError(f"{where}: 'instruction_attributes' is {_json_type(wanted)}; it must be a "
                                     f"list of strings")
            if not wanted:
                continue  # as the official loader
            if not isinstance(entry["instruction"], str) or not entry["instruction"].strip():
                got = "empty" if isinstance(entry["instruction"], str) else f"{_json_type(entry['instruction'])}"
                raise CatalogueError(f"{where}: 'instruction' is {got}; it must be the instruction text")
            wanted_options = entry.get("instruction_options") or []
            if not isinstance(wanted_options, list) or not all(isinstance(o, str) for o in wanted_options):
                raise CatalogueError(f"{where}: 'instruction_options' must be a list of strings (option values)")
            upper = price_upper(prices[asin], rng)
            text = entry["instruction"].strip(".")
            if upper < 1_000_000:
                text += f", and price lower than {upper:.2f} dollars"
            goals.append(Goal(
                asin=asin, category=product.category, query=product.query, name=product.name,
                product_category=product.product_category, instruction=text,
                attributes=tuple(wanted),
                options=tuple(_normalise_option(o) for o in wanted_options),
                price_upper=upper,
            ))
    if not goals:
        raise CatalogueError(f"{instructions_file}: no usable goal (every instruction "
                             f"needs instruction_attributes)")
    order = rng.permutation(len(goals))
    return Catalogue(products=tuple(products), prices=prices, goals=tuple(goals[i] for i in order),
                     skipped_goals=skipped)


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
