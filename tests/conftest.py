"""Test configuration shared by every test package.

Tests that need the local control plane take the ``cluster`` fixture (see
tests/controlplane/); they carry the ``cluster`` marker so ``pytest -m "not cluster"``
runs only the fast, pure tests.
"""

import sys
from pathlib import Path

# The local control plane's fixtures (cluster, api_client, namespace) live beside the Go
# program that builds it, in tests/controlplane/fixtures.py, importable as
# `controlplane.fixtures` once tests/ is on sys.path. pytest's default import mode puts
# it there already; adding it here keeps the plugin loading under --import-mode=importlib.
_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

# The ARM-shaped test server lives beside the Azure tests (tests/providers/azure/azurearm),
# whose directory pytest puts on sys.path for them; the Azure e2e and chaos tests import
# it too. Appended, not prepended: each test directory's own modules (its conftest) win.
_AZURE_TESTS = str(Path(__file__).resolve().parent / "providers" / "azure")
if _AZURE_TESTS not in sys.path:
    sys.path.append(_AZURE_TESTS)

pytest_plugins = [
    "controlplane.fixtures",
    "testrun.skips",  # a skip without a reason fails
    "testrun.phases",  # time per phase, for scripts/test.sh
    "pytester",  # tests/testrun tests those two in a pytest of their own
]

# Hypothesis's per-example deadline (200 ms) is a timing check, not a property: on a
# loaded 2-core CI an example that is correct can still take longer, and the test would
# flake. Speed is measured by the benchmarks; the properties are checked without a clock.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("karpy", deadline=None)
_hypothesis_settings.load_profile("karpy")


import socket  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every outgoing connection and name lookup fails, as on a machine with no network;
    the test fails if any was tried, even when the code under test swallowed the error."""
    tried: list[str] = []

    def refuse(*args: object, **kwargs: object) -> None:
        tried.append(repr(args))
        raise OSError(f"network used while offline: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield tried
    assert tried == [], f"connections tried while offline: {tried}"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Undo what a command run in-process (``karpy.cli.main``) did to logging: it replaces
    the root handler and sets the levels of karpy's loggers and the SDKs'. Left behind,
    a later test's caplog would miss the lines of a logger set to WARNING."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    loggers = [name for name in logging.root.manager.loggerDict if "." not in name]
    levels = {name: logging.getLogger(name).level for name in loggers}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name in logging.root.manager.loggerDict:
        if "." not in name:
            logging.getLogger(name).setLevel(levels.get(name, logging.NOTSET))
