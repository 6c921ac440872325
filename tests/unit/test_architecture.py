"""The import rules of docs/architecture.md, checked by walking every module's imports.

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


# ---- game knowledge stays in mage_core/envs/ (docs/architecture.md, "Tasks") ----

def game_name_comparisons(path: Path, games: set[str]) -> list[str]:
    """``line: source`` of every comparison (``==``, ``!=``, ``in``, ``not in``) with a
    task's name as a literal operand, alone or inside a tuple, list or set literal."""

    def names_a_game(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in games
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(names_a_game(element) for element in node.elts)
        return False

    source = path.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            if any(names_a_game(operand) for operand in [node.left, *node.comparators]):
                found.append(f"{node.lineno}: {ast.get_source_segment(source, node)}")
    return found


def test_the_comparison_finder_sees_every_form(tmp_path: Path) -> None:
    probe = tmp_path / "m.py"
    probe.write_text('a = env == "kuhn_poker"\nb = g in ("webshop", "x")\nc = "sokoban" != g\n'
                     'd = [g for g in xs if g not in {"alfworld"}]\ne = g == "kuhn"\nf = name == "random"\n')
    assert [line.split(":")[0] for line in game_name_comparisons(
        probe, {"kuhn_poker", "webshop", "sokoban", "alfworld"})] == ["1", "2", "3", "4"]


def test_no_code_outside_envs_branches_on_a_game_name() -> None:
    # Code outside mage_core/envs/ asks the task (mage_core.envs.registry.task) what it is;
    # a comparison against a name is the `if game == ...` a new environment would have to find.
    from mage_core.envs.registry import GAMES

    offenders = [f"{path.relative_to(PACKAGE)}:{hit}" for path in sorted(PACKAGE.rglob("*.py"))
                 if path.relative_to(PACKAGE).parts[0] != "envs"
                 for hit in game_name_comparisons(path, set(GAMES))]
    assert offenders == [], "compare against the task's declared fields instead:\n" + "\n".join(offenders)


# ---- the layers of docs/architecture.md ("Layers") ----

#: Lowest first. A package imports only its own layer's packages and those below (lazy imports
#: inside functions included); the top-level modules cli (with its commands' parts,
#: cli_commands) and __main__ sit above everything.
LAYERS: list[set[str]] = [
    {"schema", "io", "algos"},
    {"envs", "opponents"},  # the games: a Task names its opponent catalogue
    {"policy", "config", "generation"},
    {"rollout"},
    {"backends"},
    {"evaluation"},
    {"tracking"},
    {"trainers"},
    {"stages"},
    {"cli", "cli_commands", "__main__"},
]


def internal_imports(path: Path) -> set[str]:
    """The ``mage_core.*`` modules ``path`` imports, at any depth of its syntax tree."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("mage_core."))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("mage_core."):
            found.add(node.module)  # type: ignore[arg-type]
    return found


def layer_of(package: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if package in layer)


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    packages |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert packages == set().union(*LAYERS)


def test_imports_point_down_the_layers() -> None:
    upward: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.name == "__init__.py" and len(rel.parts) == 1:
            continue
        importer = rel.parts[0].removesuffix(".py")
        upward += [f"{rel} imports {module} (layer {layer_of(module.split('.')[1])} > {layer_of(importer)})"
                   for module in internal_imports(path) if layer_of(module.split(".")[1]) > layer_of(importer)]
    assert upward == [], "an import against the layers of docs/architecture.md:\n" + "\n".join(upward)
