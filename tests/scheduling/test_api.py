"""The public surface of karpy.scheduling: what is exported, and that it stays pure."""

from __future__ import annotations

import ast
from pathlib import Path

import karpy.scheduling as scheduling

PACKAGE = Path(scheduling.__file__).parent


def test_exports_are_sorted_and_importable() -> None:
    # isort-style, as ruff's RUF022 keeps it: constants, then classes, then the rest.
    assert scheduling.__all__ == sorted(
        scheduling.__all__, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n)
    )
    for name in scheduling.__all__:
        assert getattr(scheduling, name) is not None, name
    assert {"Simulator", "Pod", "ExistingNode", "NodePoolTemplate", "Results"} <= set(
        scheduling.__all__
    )


def test_every_module_says_what_it_is_for_and_imports_nothing_impure() -> None:
    forbidden = {"asyncio", "aiohttp", "kubernetes_asyncio", "karpy.runtime"}
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), f"{path.name} has no module docstring"
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert not any(name == f or name.startswith(f + ".") for f in forbidden), (
                    f"{path.name} imports {name}"
                )


REPO = PACKAGE.parents[1]
# Where code outside karpy builds on the simulator: the shipped providers and examples.
BUILDERS = [*REPO.glob("providers/*/karpy_*"), REPO / "examples"]


def test_providers_and_examples_use_only_the_exported_surface() -> None:
    """A provider reaches the simulator through ``karpy.scheduling``'s ``__all__``
    (``resources`` included), never a submodule: the submodules may be reorganised
    without breaking a plugin, and what a plugin may rely on is listed in one place."""
    exported = set(scheduling.__all__)
    found: list[str] = []
    for path in sorted(p for root in BUILDERS for p in root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith("karpy.scheduling."):
                    found.append(f"{where} imports {node.module}")
                elif node.module == "karpy.scheduling":
                    found += [f"{where} imports {a.name}, not exported"
                              for a in node.names if a.name not in exported]
            elif isinstance(node, ast.Import):
                found += [f"{where} imports {a.name}" for a in node.names
                          if a.name.startswith("karpy.scheduling.")]
    assert not found, "\n".join(found)
    assert any(True for root in BUILDERS for _ in root.rglob("*.py")), "no provider found"
