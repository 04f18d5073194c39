"""The user docs name only things that exist: every ``karpy <command>`` is a real
subcommand, ``karpy run``'s flag table is exactly its flags and environment variables,
every environment variable a settings table names is read by karpy or a provider (or
the row says it is ignored), and every metric name is one karpy registers.

Fast and cluster-free: it reads the Markdown and karpy's own parser and sources."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

from karpy.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([
    ROOT / "README.md",
    ROOT / "charts" / "karpy" / "README.md",
    *(ROOT / "examples").glob("*/README.md"),
    *(ROOT / "docs").rglob("*.md"),
])
SOURCES = [ROOT / "karpy", ROOT / "providers" / "aws" / "karpy_aws",
           ROOT / "providers" / "azure" / "karpy_azure"]


def _code(text: str) -> list[str]:
    """The code in a Markdown page: fenced blocks and inline code spans."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))
    return fenced + inline


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _literals() -> set[str]:
    return {
        literal
        for root in SOURCES
        for path in root.rglob("*.py")
        for literal in re.findall(r"\"([A-Za-z0-9_]+)\"", path.read_text())
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_karpy_command_in_the_docs_exists(page: Path) -> None:
    commands = set(_subcommands(build_parser()))
    # karpy in command position: at the start of a line or span, or after ; | && $( ...,
    # with shell comments dropped (``helm install karpy charts/karpy`` is not a command).
    named = {
        match
        for code in _code(page.read_text())
        for line in code.splitlines()
        for match in re.findall(
            r"(?:^|[;|&(]\s*|\$ )karpy ([a-z][a-z-]*)", line.split(" #")[0].strip()
        )
    }
    assert named - commands == set(), f"{page.name} names karpy subcommands that do not exist"


def test_the_run_flag_table_is_exactly_karpy_runs_flags_and_env_names() -> None:
    run = _subcommands(build_parser())["run"]
    flags = {s for a in run._actions for s in a.option_strings if s.startswith("--")}
    flags.discard("--help")
    table = [
        line for line in (ROOT / "docs" / "operating.md").read_text().splitlines()
        if line.startswith("| `--")
    ]
    documented = {re.match(r"\| `(--[a-z-]+)", line)[1] for line in table}  # type: ignore[index]
    assert documented == flags
    options = (ROOT / "karpy" / "options.py").read_text()
    for line in table:
        env = line.split("|")[2].strip().strip("`")
        if env:
            assert env in options or env == "KUBECONFIG", line


ENV_PAGES = [
    ROOT / "docs" / "operating.md",
    ROOT / "docs" / "install.md",
    ROOT / "charts" / "karpy" / "README.md",
    *sorted((ROOT / "docs" / "providers").glob("*.md")),
]


def _statements(text: str) -> list[str]:
    """Table rows, and the sentences of every other paragraph (joined across lines)."""
    units: list[str] = []
    for paragraph in text.split("\n\n"):
        if paragraph.lstrip().startswith("|"):
            units += paragraph.splitlines()
        else:
            units += re.split(r"(?<=[.;:])\s+", paragraph.replace("\n", " "))
    return units


SDK_ENV = {"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE",
           "KUBERNETES_SERVICE_PORT"}
"""Read by a library, not by karpy's code: azure-identity's DefaultAzureCredential
(workload identity) and kubernetes-asyncio's in-cluster configuration."""
IGNORED = ("ignored", "not read", "does not read")
"""Words with which a line says that karpy leaves a variable alone."""


@pytest.mark.parametrize("page", ENV_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_settings_env_name_is_read_or_said_to_be_ignored(page: Path) -> None:
    literals = _literals() | SDK_ENV
    unread = []
    for unit in _statements(page.read_text()):
        for name in re.findall(r"`([A-Z][A-Z0-9]*_[A-Z0-9_]+)`", unit):
            if name not in literals and not any(word in unit for word in IGNORED):
                unread.append(name)
    assert unread == [], f"{page.name}: environment variables nothing reads: {unread}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_metric_name_in_the_docs_is_registered(page: Path) -> None:
    literals = _literals()
    named = set(re.findall(
        r"(?<![\w*.])((?:karpenter|controller_runtime|workqueue)_[a-z0-9_]*[a-z0-9])\b(?![*{])",
        page.read_text(),
    ))
    assert named - literals == set(), f"{page.name} names metrics karpy does not register"


NOT_MODULES = {"karpy.cloudproviders", "karpy.crds", "karpy.dev"}
"""Dotted names in the docs that are entry-point groups or DNS names, not modules."""


FILE_SUFFIXES = (".log", ".py", ".yaml", ".json", ".md", ".txt", ".toml")
"""A dotted name ending so is a file name (``karpy.log``), not a module."""


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_and_module_in_the_docs_exists(page: Path) -> None:
    text = page.read_text()
    top = "karpy|providers|tests|benchmarks|scripts|examples|charts|deploy|crds|docs"
    missing = [
        path
        for path in set(re.findall(rf"(?<![\w/.-])((?:{top})/[\w./-]*[\w/])", text))
        if not (ROOT / path).exists() and not (page.parent / path).exists()
        and not path.startswith("charts/karpenter")  # Karpenter's chart, in its own repo
    ]
    missing += [
        dotted
        for dotted in set(re.findall(r"\b(karpy(?:_aws|_azure)?(?:\.[A-Za-z_]\w*)+)", text))
        if dotted not in NOT_MODULES and not _resolves(dotted)
        and not dotted.endswith(FILE_SUFFIXES)
    ]
    assert sorted(missing) == [], f"{page.name} names paths or modules that do not exist"


@pytest.mark.parametrize("provider", ["aws", "azure"])
def test_every_provider_setting_in_the_docs_is_a_setting(provider: str) -> None:
    page = (ROOT / "docs" / "providers" / f"{provider}.md").read_text()
    settings = (ROOT / "providers" / provider / f"karpy_{provider}" / "_settings.py").read_text()
    keys = re.findall(r"^\| `([a-zA-Z]+)` \| `[A-Z][A-Z0-9_]+`", page, flags=re.M)
    assert len(keys) >= 5, "the settings table was not found"
    assert [key for key in keys if f'"{key}"' not in settings] == []


def _method_classes() -> list[str]:
    """The disruption methods the controller builds, in the order it tries them."""
    import ast

    tree = ast.parse((ROOT / "karpy/controllers/disruption/_controller.py").read_text())
    for node in ast.walk(tree):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "methods" and isinstance(node.value, ast.List)):
            return [call.func.id for call in node.value.elts
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)]
    raise AssertionError("the disruption controller's method list was not found")


@pytest.mark.parametrize("module", ["karpy.controllers.disruption",
                                    "karpy.controllers.disruption._controller"])
def test_the_disruption_docstrings_name_every_method_in_its_order(module: str) -> None:
    methods = _method_classes()
    assert "StaticDrift" in methods  # the parse found the list
    doc = " ".join((importlib.import_module(module).__doc__ or "").split())
    words = {"MultiNodeConsolidation": "multi-node", "SingleNodeConsolidation": "single-node"}
    named = [words.get(m, m) for m in methods]
    where = [doc.find(n) for n in named]
    assert -1 not in where, f"{module}'s docstring does not name {named[where.index(-1)]}"
    assert where == sorted(where), f"{module}'s docstring names the methods out of order"


def test_no_docstring_calls_an_existing_command_future() -> None:
    """A docstring that says ``karpy X`` is "not written yet" or "a future" command, once X
    exists, tells the next reader something false."""
    commands = set(_subcommands(build_parser()))
    stale = []
    for root in SOURCES:
        for path in root.rglob("*.py"):
            text = " ".join(path.read_text().split())
            for match in re.finditer(r"(a future|not written yet|is meant to)", text):
                near = text[max(0, match.start() - 120):match.end() + 120]
                for command in re.findall(r"``karpy ([a-z-]+)", near):
                    if command in commands:
                        stale.append(f"{path.relative_to(ROOT)}: karpy {command}")
    assert not stale, stale
