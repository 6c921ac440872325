"""The official WebShop files: their names, reading them, and checking each record.

A file that is not UTF-8 or not JSON, holds the wrong top-level type, or a
record whose field has the wrong type raises ``CatalogueError`` with a message
naming the file, the record and the key, so a user with a hand-edited or
truncated download learns what to fix (``catalogue.load_catalogue`` builds the
products and goals from what these checks pass).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: The official file names (the release's ``_1000`` suffix is accepted too).
PRODUCTS_FILE = "items_shuffle.json"
ATTRIBUTES_FILE = "items_ins_v2.json"
INSTRUCTIONS_FILE = "items_human_ins.json"
_REQUIRED_PRODUCT_FIELDS = ("asin", "category", "query", "name", "product_category", "pricing")


class CatalogueError(ValueError):
    """A catalogue file is missing, unreadable or lacks a field; the message names it."""


@dataclass(frozen=True)
class CatalogueFiles:
    """A catalogue folder's three files, found and read, their top level checked."""

    products_file: Path
    attributes_file: Path
    instructions_file: Path
    rows: list  # the products
    attributes: dict  # upper-case asin -> {"attributes": [...], ...}
    instructions: dict  # upper-case asin -> [instruction, ...]


def read_files(folder: Path) -> CatalogueFiles:
    """Find and read the three files of ``folder`` (either name of each)."""
    if not folder.is_dir():
        raise CatalogueError(f"{folder}: no such catalogue folder; generate one with "
                             f"`mage webshop generate --out {folder}`")
    products_file, attributes_file, instructions_file = (
        find_file(folder, name) for name in (PRODUCTS_FILE, ATTRIBUTES_FILE, INSTRUCTIONS_FILE))
    rows = read_json(products_file, list, "a list of products")
    attributes = upper_keys(read_json(attributes_file, dict, "an object {asin: {\"attributes\": [...]}}"),
                            attributes_file)
    instructions = upper_keys(read_json(instructions_file, dict, "an object {asin: [instructions]}"),
                              instructions_file)
    if not rows:
        raise CatalogueError(f"{products_file}: expected a non-empty list of products")
    return CatalogueFiles(products_file, attributes_file, instructions_file, rows, attributes, instructions)


def find_file(folder: Path, base: str) -> Path:
    """The file ``base`` in ``folder``, or its official ``_1000`` name."""
    stem = base[: -len(".json")]
    for name in (base, f"{stem}_1000.json"):
        if (folder / name).is_file():
            return folder / name
    raise CatalogueError(f"{folder}: no {base} (or {stem}_1000.json); generate one with "
                         f"`mage webshop generate --out {folder}` or point at the official files")


def read_json(path: Path, expected: type, shape: str) -> Any:
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
        raise CatalogueError(f"{path}: the file holds {json_type(data)}, expected {shape}")
    return data


def json_type(value: Any) -> str:
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


def normalise_option(value: str) -> str:
    """An option value as products and goals compare it ("Navy/Blue" -> "navy | blue")."""
    return value.strip().replace("/", " | ").lower()


def product_fields(row: dict, asin: str, attributes: dict, where: str, attributes_file: Path) -> dict[str, Any]:
    """The ``Product`` fields of one products-file row (``asin`` already checked and
    upper-cased), each type-checked; the attributes come from the attributes file."""
    missing = [k for k in _REQUIRED_PRODUCT_FIELDS if k not in row]
    if missing:
        raise CatalogueError(f"{where}: product {row.get('asin', '?')!r} lacks {', '.join(missing)}")
    for key in ("category", "query", "name", "product_category"):
        if not isinstance(row[key], str):
            raise CatalogueError(f"{where} ({asin}): {key!r} is {json_type(row[key])}; it must be a string")
    description = row.get("full_description")
    if description is not None and not isinstance(description, str):
        raise CatalogueError(f"{where} ({asin}): 'full_description' is {json_type(description)}; "
                             f"it must be a string (or null)")
    bullets = row.get("small_description") or []
    if isinstance(bullets, str):
        bullets = [bullets]
    if not isinstance(bullets, list) or not all(isinstance(b, str) for b in bullets):
        raise CatalogueError(f"{where} ({asin}): 'small_description' must be a list of strings or one string")
    options: dict[str, tuple[str, ...]] = {}
    raw_options = row.get("customization_options") or {}
    if not isinstance(raw_options, dict):
        raise CatalogueError(f"{where} ({asin}): 'customization_options' is {json_type(raw_options)}; it must "
                             f"be an object {{type: [{{\"value\": ...}}, ...]}}")
    for option_type, values in raw_options.items():
        if values is None:
            continue
        if not isinstance(values, list):
            raise CatalogueError(f"{where} ({asin}): customization_options[{option_type!r}] is "
                                 f"{json_type(values)}; it must be a list of {{\"value\": ...}} objects")
        normalised = []
        for k, value in enumerate(values):
            if not isinstance(value, dict) or not isinstance(value.get("value"), str):
                got = "lacks 'value'" if isinstance(value, dict) and "value" not in value else (
                    f"has {json_type(value.get('value'))} 'value'" if isinstance(value, dict)
                    else f"is {json_type(value)}")
                raise CatalogueError(f"{where} ({asin}): customization_options[{option_type!r}][{k}] {got}; "
                                     f"each option must be an object with a string \"value\"")
            normalised.append(normalise_option(value["value"]))
        options[option_type.lower()] = tuple(normalised)
    entry = attributes.get(asin, {})
    if not isinstance(entry, dict):
        raise CatalogueError(f"{attributes_file}: the entry of {asin} is {json_type(entry)}; it must be an "
                             f"object {{\"attributes\": [...], ...}}")
    attrs = entry.get("attributes") or ["DUMMY_ATTR"]
    if not isinstance(attrs, list) or not all(isinstance(a, str) for a in attrs):
        raise CatalogueError(f"{attributes_file}: the 'attributes' of {asin} are {json_type(attrs)}; they must "
                             f"be a list of strings")
    return dict(
        asin=asin, category=row["category"], query=row["query"].lower().strip(),
        name=row["name"], product_category=row["product_category"],
        description=description or "", bullets=tuple(bullets),
        pricing=_pricing(row["pricing"], f"{where} ({asin})"), options=options, attributes=tuple(attrs),
    )


def _pricing(raw: Any, where: str) -> tuple[float, ...]:
    """A row's ``pricing``, checked: a number is one price, a string is read by ``parse_pricing``."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        if not np.isfinite(raw) or raw < 0:
            raise CatalogueError(f"{where}: pricing {raw!r} is not a price; write \"$12.99\" or \"$5 - $9\"")
        return (float(raw),)
    if raw is not None and not isinstance(raw, str):
        raise CatalogueError(f"{where}: pricing is {json_type(raw)}; write a string such as \"$12.99\" or "
                             f"\"$5 - $9\" (empty: $100)")
    try:
        return parse_pricing(raw)
    except CatalogueError as err:
        raise CatalogueError(f"{where}: {err}") from None


def upper_keys(data: dict, path: Path) -> dict:
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


def check_instruction(entry: Any, where: str) -> tuple[str, list[str], list[str]] | None:
    """One human instruction's (text, attributes, option values), each type-checked;
    None for one without ``instruction_attributes`` (the official loader skips it)."""
    if not isinstance(entry, dict):
        raise CatalogueError(f"{where} is {json_type(entry)}, not an object")
    for key in ("instruction", "instruction_attributes"):
        if key not in entry:
            raise CatalogueError(f"{where} lacks {key!r}")
    wanted = entry["instruction_attributes"]
    if wanted is not None and (not isinstance(wanted, list) or not all(isinstance(a, str) for a in wanted)):
        raise CatalogueError(f"{where}: 'instruction_attributes' is {json_type(wanted)}; it must be a "
                             f"list of strings")
    if not wanted:
        return None  # as the official loader
    if not isinstance(entry["instruction"], str) or not entry["instruction"].strip():
        got = "empty" if isinstance(entry["instruction"], str) else f"{json_type(entry['instruction'])}"
        raise CatalogueError(f"{where}: 'instruction' is {got}; it must be the instruction text")
    wanted_options = entry.get("instruction_options") or []
    if not isinstance(wanted_options, list) or not all(isinstance(o, str) for o in wanted_options):
        raise CatalogueError(f"{where}: 'instruction_options' must be a list of strings (option values)")
    return entry["instruction"], wanted, wanted_options
