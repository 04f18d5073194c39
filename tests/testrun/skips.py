"""pytest plugin: a skip must say why, or the test fails.

Registered from tests/conftest.py. The test command prints every skip with its reason
(``-rs`` in scripts/test.sh), so a test that stops running in CI shows up in the summary
with the thing to fix (a tool to install, a file to lay out, a root-only step). A skip
with nothing to read there would be a test silently dead, so it is reported as a
failure instead: ``pytest.skip()`` with an empty reason, or ``@pytest.mark.skip``
without one (pytest's "unconditional skip").
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

#: What pytest says for ``@pytest.mark.skip`` with no ``reason=``.
_PYTESTS_DEFAULT = "unconditional skip"


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason of a skipped report, as ``-rs`` would print it ("" for none)."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        message = str(longrepr[2])
    else:
        message = str(longrepr or "")
    # pytest words an empty reason "Skipped" and prefixes a given one with "Skipped: ".
    message = message.strip()
    if message in ("Skipped", "Skipped:"):
        return ""
    return message.removeprefix("Skipped: ").strip()


def has_no_reason(report: pytest.TestReport | pytest.CollectReport) -> bool:
    """Whether a report is a skip (not an xfail) that names no reason."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return False
    return skip_reason(report) in ("", _PYTESTS_DEFAULT)


def _why_failed(nodeid: str) -> str:
    return (
        f"{nodeid} was skipped without a reason: give pytest.skip() / @pytest.mark.skip / "
        "skipif a reason= that says what would make it run (tests/testrun/skips.py)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if has_no_reason(report):
        report.outcome = "failed"
        report.longrepr = _why_failed(item.nodeid)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """The same for a whole module skipped at import (``allow_module_level=True``)."""
    report = yield
    if has_no_reason(report):
        report.outcome = "failed"
        report.longrepr = _why_failed(collector.nodeid)
    return report
