"""The import arrows of DESIGN.md, checked by walking every module's imports.

- game rules and opponents know nothing of language models (no torch/transformers);
- only mage_core/backends imports vllm, deepspeed or ray;
- only mage_core/tracking imports mlflow;
- nothing in mage_core imports prefect.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "mage_core"

# (folder the rule applies to, or "" for the whole package; forbidden top-level
#  modules; sub-folder that is exempt)
RULES: list[tuple[str, set[str], str | None]] = [
    ("envs", {"torch", "transformers", "mlflow", "prefect", "vllm", "deepspeed", "ray"}, None),
    ("opponents", {"torch", "transformers", "mlflow", "prefect", "vllm", "deepspeed", "ray"}, None),
    ("", {"vllm", "deepspeed", "ray"}, "backends"),
    ("", {"mlflow"}, "tracking"),
    ("", {"prefect"}, None),
]


def imported_top_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_walker_sees_nested_and_lazy_imports(tmp_path: Path) -> None:
    probe = tmp_path / "m.py"
    probe.write_text("def f():\n    import torch.nn\n    from mlflow import log_metric\n")
    assert imported_top_modules(probe) == {"torch", "mlflow"}


@pytest.mark.parametrize(("folder", "forbidden", "exempt"), RULES)
def test_import_arrows(folder: str, forbidden: set[str], exempt: str | None) -> None:
    root = PACKAGE / folder if folder else PACKAGE
    files = sorted(root.rglob("*.py"))
    assert files, f"no modules under {root}"
    offenders = []
    for path in files:
        rel = path.relative_to(PACKAGE)
        if exempt and rel.parts[0] == exempt:
            continue
        bad = imported_top_modules(path) & forbidden
        if bad:
            offenders.append(f"{rel}: {sorted(bad)}")
    assert not offenders, "forbidden imports:\n" + "\n".join(offenders)
