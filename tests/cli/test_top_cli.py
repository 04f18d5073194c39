"""``karpy top``'s command line: its flags, and bad input refused with a message naming
the flag before anything connects; the key handling of the live view."""

from __future__ import annotations

import subprocess
import sys

import pytest

from karpy.cli import build_parser
from karpy.cli.top import _Keys
from karpy.tools.top import SORT_KEYS


def run_karpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpy.cli", *args], capture_output=True, text=True, check=False,
        timeout=60,
    )


def test_top_is_a_subcommand_with_its_flags() -> None:
    args = build_parser().parse_args(
        ["top", "--kubeconfig", "k", "--sort", "price", "--filter", "zone=a", "--once"])
    assert (args.command, args.kubeconfig, args.sort, args.filter, args.once) == (
        "top", "k", "price", "zone=a", True)
    assert build_parser().parse_args(["top"]).sort == "name"


def test_a_bad_filter_is_refused_naming_the_flag_and_the_keys() -> None:
    done = run_karpy("top", "--filter", "colour=red", "--kubeconfig", "/nonexistent")
    assert done.returncode == 2
    assert "--filter: filter key 'colour' is not one of: capacity-type" in done.stderr


def test_an_unknown_sort_key_is_refused() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["top", "--sort", "colour"])


def test_a_missing_kubeconfig_is_an_error_not_a_traceback() -> None:
    done = run_karpy("top", "--once", "--kubeconfig", "/nonexistent/kubeconfig")
    assert done.returncode == 1
    assert done.stderr.startswith("karpy top: ") and "Traceback" not in done.stderr


async def test_keys_cycle_the_sort_and_edit_the_filter() -> None:
    keys = _Keys(sort="name", filter_text="")
    keys.press("s")
    assert keys.sort == SORT_KEYS[1] and keys.changed.is_set()
    for key in "/zone=b":
        keys.press(key)
    assert keys.prompt == "zone=b" and keys.filter_text == ""
    keys.press("\x7f")
    keys.press("a")
    keys.press("\r")
    assert keys.filter_text == "zone=a" and keys.prompt is None
    keys.press("/")
    for key in "colour=x\r":  # a fresh filter, refused: the old one stays
        keys.press(key)
    assert keys.filter_text == "zone=a" and keys.error is not None and "colour" in keys.error
    keys.press("/")
    keys.press("\x1b")  # Esc: the filter stays as it was
    assert keys.prompt is None and keys.filter_text == "zone=a"
    keys.press("c")
    assert keys.filter_text == "" and keys.error is None
    keys.press("q")
    assert keys.quit
