"""The ``karpy`` console script answers --version and --help like any CLI."""

from __future__ import annotations

import subprocess
import sys

import karpy


def run_karpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpy.cli", *args], capture_output=True, text=True, check=False
    )


def test_version_prints_the_installed_version() -> None:
    done = run_karpy("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"karpy {karpy.__version__}"
    assert karpy.__version__ != "0.0.0+unknown"


def test_help_names_the_program_and_exits_zero() -> None:
    done = run_karpy("--help")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: karpy")


def test_providers_lists_the_kwok_provider_and_installed_plugins() -> None:
    done = run_karpy("providers")
    assert done.returncode == 0
    names = {line.split("\t")[0] for line in done.stdout.splitlines()}
    assert "kwok" in names
