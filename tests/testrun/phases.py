"""pytest plugin: how long the pure tests and the cluster tests took, and what the
cluster's start spent waiting for.

Registered from tests/conftest.py. pytest runs the tests needing the local control plane
after the pure ones (``controlplane.fixtures.pytest_collection_modifyitems``), so the run
splits in two at the first cluster test; scripts/test.sh runs the two in runs of their
own, each on pytest-xdist workers, and a run of the cluster tests alone reports what
came before its first test as ``collecting``. At the end of the run the split is printed
in the terminal summary and, when ``KARPY_PHASE_TIMES`` names a file, appended to it as
``name<TAB>seconds`` lines, which scripts/test.sh prints with its own phases in one
table. The cluster's start is split as ``controlplane.fixtures`` records it: the wait
for the Go builds (running in the background since the test command began), the control
plane's start, the CRDs.

Under pytest-xdist the tests run in the workers, which the controller never sees run:
each worker hands what it saw (the monotonic time of its first cluster test — one clock
for every process on the machine —, whether it ran a pure test, its cluster's start) to
the controller when it finishes, and the controller reports the run once. Each worker
starts a cluster of its own, side by side, so a step of the start is reported as the
longest any worker took.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from controlplane.fixtures import STARTUP

_STARTED = pytest.StashKey[float]()
_FIRST_CLUSTER_TEST = pytest.StashKey[float]()
_PURE_TESTS_RAN = pytest.StashKey[bool]()

#: The key of a worker's findings in pytest-xdist's ``workeroutput``.
_OUTPUT = "karpy_phases"


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_STARTED] = time.monotonic()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> None:
    stash = item.config.stash
    if item.get_closest_marker("cluster") is None:
        stash[_PURE_TESTS_RAN] = True
    elif _FIRST_CLUSTER_TEST not in stash:
        stash[_FIRST_CLUSTER_TEST] = time.monotonic()


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    output: dict[str, Any] | None = getattr(config, "workeroutput", None)
    if output is None:
        return  # not a pytest-xdist worker
    output[_OUTPUT] = {
        "first_cluster_test": config.stash.get(_FIRST_CLUSTER_TEST, None),
        "pure_tests_ran": config.stash.get(_PURE_TESTS_RAN, False),
        "startup": config.stash.get(STARTUP, {}),
    }


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller: merge what a worker that finished saw."""
    seen = getattr(node, "workeroutput", {}).get(_OUTPUT)
    if seen is None:
        return  # the worker crashed before it finished its session
    stash = node.config.stash
    if seen["pure_tests_ran"]:
        stash[_PURE_TESTS_RAN] = True
    if (first := seen["first_cluster_test"]) is not None:
        stash[_FIRST_CLUSTER_TEST] = min(first, stash.get(_FIRST_CLUSTER_TEST, first))
    steps = stash.setdefault(STARTUP, {})
    for name, seconds in seen["startup"].items():
        steps[name] = max(seconds, steps.get(name, 0.0))


def phases(config: pytest.Config, now: float) -> list[tuple[str, float]]:
    """The run's phases so far, as (name, seconds): collection is counted with the pure
    tests, the cluster's start with the cluster tests (and shown on its own below)."""
    started = config.stash.get(_STARTED, now)
    boundary = config.stash.get(_FIRST_CLUSTER_TEST, now)
    # A run of the cluster tests alone (scripts/test.sh runs the pure tests in a run of
    # their own) spends that time collecting, not on pure tests.
    lead = ("pure tests" if config.stash.get(_PURE_TESTS_RAN, False)
            or _FIRST_CLUSTER_TEST not in config.stash else "collecting")
    rows = [(lead, boundary - started)]
    if _FIRST_CLUSTER_TEST in config.stash:
        rows.append(("cluster tests", now - boundary))
        rows += [(f"  {name}", seconds) for name, seconds in config.stash.get(STARTUP, {}).items()]
    return rows


@pytest.hookimpl(wrapper=True)
def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> Generator[None, None, None]:
    yield
    if hasattr(config, "workerinput"):
        return  # a pytest-xdist worker: the controller reports the run's phases once
    rows = phases(config, time.monotonic())
    terminalreporter.write_sep("-", "time per phase (pytest)")
    for name, seconds in rows:
        terminalreporter.write_line(f"{name:<36} {seconds:8.1f} s")
    if out := os.environ.get("KARPY_PHASE_TIMES"):
        with Path(out).open("a") as file:
            file.writelines(f"{name}\t{seconds:.1f}\n" for name, seconds in rows)
