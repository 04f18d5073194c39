"""The public surface of karpy.scheduling: what is exported, and that it stays pure."""

from __future__ import annotations

import ast
from pathlib import Path

import karpy.scheduling as scheduling

PACKAGE = Path(scheduling.__file__).parent


def test_exports_are_sorted_and_importable() -> None:
    assert scheduling.__all__ == sorted(scheduling.__all__)
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
