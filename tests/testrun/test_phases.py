"""The run's time per phase: pure tests up to the first cluster test, cluster tests after."""

from __future__ import annotations

from pathlib import Path

import pytest

INNER = ("-p", "no:asyncio", "-p", "no:cacheprovider", "-p", "testrun.phases")

# The pure test is the longer one, so a split in the wrong place shows in the numbers.
TESTS = """
import time
import pytest

def test_pure():
    time.sleep(1.5)

@pytest.mark.cluster
def test_needs_the_cluster():
    time.sleep(0.2)
"""


def _rows(path: Path) -> dict[str, float]:
    return {
        name: float(seconds)
        for name, seconds in (line.split("\t") for line in path.read_text().splitlines())
    }


def test_the_split_is_at_the_first_cluster_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "times"
    monkeypatch.setenv("KARPY_PHASE_TIMES", str(out))
    pytester.makepyfile(test_inner_phases=TESTS)
    result = pytester.runpytest_inprocess(*INNER)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*time per phase (pytest)*", "pure tests * s", "cluster tests * s",
    ])
    rows = _rows(out)
    assert list(rows) == ["pure tests", "cluster tests"]
    assert rows["pure tests"] >= 1.5
    assert 0.2 <= rows["cluster tests"] < 1.5


def test_a_run_without_cluster_tests_has_one_phase(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "times"
    monkeypatch.setenv("KARPY_PHASE_TIMES", str(out))
    pytester.makepyfile(test_inner_phases=TESTS)
    result = pytester.runpytest_inprocess(*INNER, "-m", "not cluster")
    result.assert_outcomes(passed=1, deselected=1)
    assert list(_rows(out)) == ["pure tests"]


def test_a_run_of_the_cluster_tests_alone_reports_its_lead_in_as_collecting(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "times"
    monkeypatch.setenv("KARPY_PHASE_TIMES", str(out))
    pytester.makepyfile(test_inner_phases=TESTS)
    result = pytester.runpytest_inprocess(*INNER, "-m", "cluster")
    result.assert_outcomes(passed=1, deselected=1)
    assert list(_rows(out)) == ["collecting", "cluster tests"]


def test_a_parallel_run_reports_its_phases_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "times"
    monkeypatch.setenv("KARPY_PHASE_TIMES", str(out))
    # the workers are processes of their own: they find tests/testrun on PYTHONPATH
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    pytester.makepyfile(test_inner_phases=TESTS)
    result = pytester.runpytest_subprocess(*INNER, "-n", "2", "-m", "not cluster")
    result.assert_outcomes(passed=1)
    assert [line.split("\t")[0] for line in out.read_text().splitlines()] == ["pure tests"]


# Two cluster tests on two workers, each "starting its cluster" for a different time.
PARALLEL_CLUSTER_TESTS = """
import time
import pytest
from controlplane.fixtures import STARTUP

@pytest.fixture
def started(pytestconfig, request):
    seconds = request.param
    time.sleep(seconds)
    pytestconfig.stash.setdefault(STARTUP, {})["starting the control plane"] = seconds

@pytest.mark.cluster
@pytest.mark.parametrize("started", [0.3, 0.9], indirect=True)
def test_needs_the_cluster(started):
    time.sleep(0.2)
"""


def test_a_parallel_run_of_cluster_tests_merges_what_each_worker_saw(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "times"
    monkeypatch.setenv("KARPY_PHASE_TIMES", str(out))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    pytester.makepyfile(test_inner_phases=PARALLEL_CLUSTER_TESTS)
    result = pytester.runpytest_subprocess(*INNER, "-n", "2", "--dist", "load")
    result.assert_outcomes(passed=2)
    rows = _rows(out)
    assert list(rows) == ["collecting", "cluster tests", "  starting the control plane"]
    # the slower worker's start, and the cluster phase lasted at least as long as it
    assert rows["  starting the control plane"] == 0.9
    assert rows["cluster tests"] >= 1.1
