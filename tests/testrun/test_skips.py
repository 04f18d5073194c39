"""A skip without a reason fails the run; a skip with one is printed and passes."""

from __future__ import annotations

import pytest

#: The inner runs: skips printed; pytest-asyncio left out (nothing here is async, and its
#: unset-loop-scope warning would land in the outer run's summary).
INNER = ("-rs", "-p", "no:asyncio", "-p", "no:cacheprovider")

SKIPS = """
import pytest

def test_skipped_with_no_reason():
    pytest.skip()

@pytest.mark.skip
def test_marked_with_no_reason():
    pass

def test_skipped_saying_why():
    pytest.skip("tmux is not installed")

@pytest.mark.skipif(True, reason="needs root")
def test_skipif_saying_why():
    pass

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_to_fail():
    assert False
"""


def test_a_skip_with_no_reason_fails_and_one_with_a_reason_is_printed(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_inner_skips=SKIPS)
    result = pytester.runpytest_inprocess(*INNER, "-p", "testrun.skips")
    # a skip marker acts at setup, so that one is reported as an error at setup
    result.assert_outcomes(failed=1, errors=1, skipped=2, xfailed=1)
    result.stdout.fnmatch_lines([
        "*test_marked_with_no_reason was skipped without a reason*",  # errors come first
        "*test_skipped_with_no_reason was skipped without a reason*",
        "SKIPPED*tmux is not installed",
        "SKIPPED*needs root",
    ])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_module_skipped_at_import_without_a_reason_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_inner_quiet="import pytest\npytest.skip(allow_module_level=True)\n",
        test_inner_said="import pytest\npytest.skip('no GPU', allow_module_level=True)\n",
    )
    result = pytester.runpytest_inprocess(*INNER, "-p", "testrun.skips")
    result.assert_outcomes(errors=1, skipped=1)
    result.stdout.fnmatch_lines(["*test_inner_quiet.py was skipped without a reason*", "*no GPU"])
    assert result.ret != pytest.ExitCode.OK


def test_without_the_plugin_the_same_skips_pass(pytester: pytest.Pytester) -> None:
    """The check that the plugin is what fails them (pytest alone lets them pass)."""
    pytester.makepyfile(test_inner_skips=SKIPS)
    result = pytester.runpytest_inprocess(*INNER)
    result.assert_outcomes(skipped=4, xfailed=1)
