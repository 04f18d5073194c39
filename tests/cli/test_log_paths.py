"""Karpenter's LOG_OUTPUT_PATHS / LOG_ERROR_OUTPUT_PATHS in ``karpy run``: the log lines
go to each named stream or file; unset, they stay on stderr as before."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from karpy.cli._logpaths import LogPathError
from karpy.cli._logs import configure_command_logging


def karpy_run(env: dict[str, str], home: Path) -> subprocess.CompletedProcess[str]:
    # no kubeconfig: karpy logs the missing config, then stops with status 1
    base = {"PATH": "/usr/bin:/bin", "HOME": str(home), "KUBECONFIG": str(home / "none")}
    return subprocess.run(
        [sys.executable, "-m", "karpy.cli", "run"],
        capture_output=True, text=True, env={**base, **env}, timeout=120, check=False,
    )  # fmt: skip


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_unset_the_logs_stay_on_stderr(tmp_path: Path) -> None:
    done = karpy_run({}, tmp_path)
    assert done.returncode == 1, done.stderr
    assert json_lines(done.stderr) and not done.stdout


def test_log_output_paths_send_every_line_to_each_path(tmp_path: Path) -> None:
    log = tmp_path / "karpy.log"
    done = karpy_run({"LOG_OUTPUT_PATHS": f"stdout,{log}"}, tmp_path)
    assert done.returncode == 1, done.stderr
    out = json_lines(done.stdout)
    assert out and out == json_lines(log.read_text())
    # stderr keeps only karpy run's own one-line verdict, not the log lines
    assert json_lines(done.stderr) == []
    assert "karpy run: cannot load kubeconfig" in done.stderr


def test_an_unwritable_log_path_stops_karpy_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "no-such-dir" / "karpy.log"
    done = karpy_run({"LOG_OUTPUT_PATHS": str(bad)}, tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().startswith(
        f"karpy run: LOG_OUTPUT_PATHS: cannot open log path '{bad}'"
    )


def test_the_loggers_own_errors_go_to_the_error_paths(tmp_path: Path) -> None:
    errors = tmp_path / "errors.log"
    stream = io.StringIO()
    try:
        configure_command_logging("info", output_paths=["stdout"], error_output_paths=[str(errors)])
        logging.getLogger("karpy.test").info("%d items", "not a number")
    finally:
        configure_command_logging("info", stream=stream)
    text = errors.read_text()
    assert "--- Logging error ---" in text and "%d items" in text


def test_a_bad_error_path_names_its_variable(tmp_path: Path) -> None:
    with pytest.raises(LogPathError, match="LOG_ERROR_OUTPUT_PATHS"):
        configure_command_logging(
            "info", output_paths=["stderr"], error_output_paths=[str(tmp_path / "x" / "y")]
        )
