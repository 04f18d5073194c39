"""``karpy run --cost-improvement-budget`` / ``COST_IMPROVEMENT_BUDGET``: the bound on the
scheduler's cost-improvement stage, from the command line to the provisioner's
SchedulerOptions."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from karpy.options import add_run_arguments, options_from_args
from karpy.scheduling.simulator import IMPROVEMENT_BUDGET


def parse(*flags: str, env: dict[str, str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return options_from_args(parser.parse_args(list(flags)), env or {}).settings.improvement_budget


def test_default_flag_and_environment() -> None:
    assert parse() == IMPROVEMENT_BUDGET > 0
    assert parse("--cost-improvement-budget", "0") == 0
    assert parse(env={"COST_IMPROVEMENT_BUDGET": "5"}) == 5
    # the flag wins over the environment
    assert parse("--cost-improvement-budget", "1", env={"COST_IMPROVEMENT_BUDGET": "5"}) == 1


@pytest.mark.parametrize("text", ["-1", "two", "1.5"])
def test_a_bad_value_names_the_setting(text: str) -> None:
    with pytest.raises(ValueError, match="COST_IMPROVEMENT_BUDGET"):
        parse(env={"COST_IMPROVEMENT_BUDGET": text})


def test_run_help_documents_it() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "karpy.cli", "run", "--help"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "--cost-improvement-budget" in out
    assert "COST_IMPROVEMENT_BUDGET" in out
