"""The public faces of karpy.runtime, karpy.cloudprovider, karpy.scheduling, karpy.state
and karpy.apis are exactly the tables in docs/runtime.md, docs/providers.md,
docs/scheduling.md and docs/design.md ("Where each name lives"): every module's
``__all__`` equals its documented row, sorted, each name with one home, and every
public name documented in the code (a docstring, or an attribute docstring for
constants and type aliases). Growing the surface means editing the docs on purpose."""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"karpy.runtime": ROOT / "docs" / "runtime.md",
         "karpy.cloudprovider": ROOT / "docs" / "providers.md",
         "karpy.scheduling": ROOT / "docs" / "scheduling.md",
         "karpy.state": ROOT / "docs" / "design.md",
         "karpy.apis": ROOT / "docs" / "design.md"}


def _documented(package: str) -> dict[str, list[str]]:
    """The rows of the page's "Where each name lives" table for ``package`` and its
    submodules: module -> names."""
    text = PAGES[package].read_text()
    section = text.split("## Where each name lives", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        match = re.fullmatch(r"\| `([\w.]+)` \| (.+) \|", line.strip())
        if match and (match[1] == package or match[1].startswith(package + ".")):
            rows[match[1]] = re.findall(r"`(\w+)`", match[2])
    return rows


def _isort_key(name: str) -> tuple[int, str]:
    # ruff's RUF022 order: CONSTANTS, then Classes, then functions/modules.
    kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return kind, name


SURFACES = [(module, names) for package in PAGES for module, names in _documented(package).items()]


def test_each_page_documents_its_package_and_submodules() -> None:
    assert set(_documented("karpy.runtime")) == {
        "karpy.runtime", "karpy.runtime.ratelimit", "karpy.runtime.indexes",
        "karpy.runtime.telemetry", "karpy.runtime.leaderelection", "karpy.runtime.objects",
    }
    assert set(_documented("karpy.cloudprovider")) == {
        "karpy.cloudprovider", "karpy.cloudprovider.launch", "karpy.cloudprovider.nodeclass",
        "karpy.cloudprovider.registry",
    }
    assert set(_documented("karpy.scheduling")) == {"karpy.scheduling"}
    assert set(_documented("karpy.state")) == {"karpy.state"}
    assert set(_documented("karpy.apis")) == {"karpy.apis"}


@pytest.mark.parametrize(("module", "names"), SURFACES, ids=[m for m, _ in SURFACES])
def test_all_is_the_documented_row_sorted(module: str, names: list[str]) -> None:
    mod = importlib.import_module(module)
    assert mod.__doc__, f"{module} has no module docstring"
    assert mod.__all__ == sorted(names, key=_isort_key), f"{module}.__all__ vs its docs row"
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.{name}"


def test_every_name_has_one_home() -> None:
    homes: dict[str, list[str]] = {}
    for module, names in SURFACES:
        for name in names:
            homes.setdefault(name, []).append(module)
    shared = {n: m for n, m in homes.items() if len(m) > 1}
    # The two exceptions, by design, each the very same object under both names:
    # karpy.cloudprovider re-exports the scheduling types a provider builds its catalogue
    # from (docs/providers.md), and karpy.state re-exports the Karpenter kinds declared
    # once in karpy.cloudprovider (where providers import them) for the core's use.
    catalogue = ("InstanceType", "Offering", "Overhead")
    karpenter_kinds = ("NODE_CLAIM", "NODE_POOL")
    assert shared == {
        **{n: ["karpy.cloudprovider", "karpy.scheduling"] for n in catalogue},
        **{n: ["karpy.cloudprovider", "karpy.state"] for n in karpenter_kinds},
    }
    cloudprovider = importlib.import_module("karpy.cloudprovider")
    for name in catalogue:
        from_scheduling = getattr(importlib.import_module("karpy.scheduling"), name)
        assert getattr(cloudprovider, name) is from_scheduling
        assert from_scheduling.__module__.startswith("karpy.scheduling.")
    for name in karpenter_kinds:
        assert getattr(importlib.import_module("karpy.state"), name) is getattr(cloudprovider, name)


def _attribute_docstrings(package: str) -> set[str]:
    """Names assigned at module level somewhere in ``package`` and followed by a string
    literal (an attribute docstring, as Sphinx reads them)."""
    found: set[str] = set()
    base = Path(importlib.import_module(package).__file__ or "").parent
    for path in base.glob("*.py"):
        body = ast.parse(path.read_text()).body
        for stmt, following in itertools.pairwise(body):
            target = (
                stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                else stmt.target if isinstance(stmt, ast.AnnAssign) else None
            )
            if (isinstance(target, ast.Name) and isinstance(following, ast.Expr)
                    and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)):
                found.add(target.id)
    return found


@pytest.mark.parametrize(("module", "names"), SURFACES, ids=[m for m, _ in SURFACES])
def test_every_public_name_is_documented_in_the_code(module: str, names: list[str]) -> None:
    mod = importlib.import_module(module)
    package = module if module in PAGES else module.rsplit(".", 1)[0]
    attribute_docs = _attribute_docstrings(package)
    undocumented = []
    for name in names:
        value = getattr(mod, name)
        if inspect.isclass(value) or inspect.isfunction(value) or inspect.ismodule(value):
            # inspect.getdoc would inherit a base class's docstring: ask for the object's own.
            if not (value.__doc__ or "").strip():
                undocumented.append(name)
        elif name not in attribute_docs and not _documented_at_its_home(module, name, value):
            undocumented.append(name)
    assert undocumented == [], f"{module}: no docstring for {undocumented}"


def _documented_at_its_home(module: str, name: str, value: object) -> bool:
    """A re-exported constant (the same object under another surface's name) is
    documented where it is declared."""
    for other, names in SURFACES:
        if other != module and name in names:
            home = importlib.import_module(other)
            package = other if other in PAGES else other.rsplit(".", 1)[0]
            if getattr(home, name) is value and name in _attribute_docstrings(package):
                return True
    return False
