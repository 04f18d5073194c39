"""The optional abilities of a provider are typed protocols the core checks with
``isinstance``: every provider karpy ships is seen to have the ones it implements."""

from __future__ import annotations

import ast
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from karpy.cloudprovider import (
    BuildsFromContext,
    ChecksSettings,
    ClosesOnShutdown,
    DeclaresSettings,
)
from karpy.cloudprovider.registry import ENTRY_POINT_GROUP

ROOT = Path(__file__).resolve().parents[2]
TARGETS = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


@pytest.mark.parametrize("name", ["aws", "azure", "kwok"])
def test_the_shipped_providers_have_their_abilities(name: str) -> None:
    target = TARGETS[name].load()
    assert isinstance(target, BuildsFromContext)
    assert issubclass(target, ClosesOnShutdown)
    if name != "kwok":  # kwok's settings are checked by its factory
        assert isinstance(target, DeclaresSettings)
        assert isinstance(target, ChecksSettings)


def test_the_core_finds_no_provider_ability_by_attribute_name() -> None:
    abilities = {"from_context", "aclose", "SETTINGS", "check_settings"}
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in (ROOT / "karpy").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"getattr", "hasattr"}
        and len(node.args) > 1
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value in abilities
    ]
    assert found == []
