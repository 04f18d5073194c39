"""The chaos suite: karpy under faults against the local cluster, ending with an audit.

Each scenario runs ``karpy run`` subprocesses (leader election on) with the kwok
provider, injects one kind of fault many times, and ends with tests/chaos/audit.py.
By default each runs a short version (a few faults, tens of pods) so the suite fits in
the test command; ``KARPY_CHAOS=full`` (scripts/chaos.sh) runs the issue's sizes.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# The e2e harness (karpy_process, the kube helpers) is shared, not copied.
_E2E = str(Path(__file__).resolve().parent.parent / "e2e")
if _E2E not in sys.path:
    sys.path.insert(0, _E2E)

from kube import install_kwok_crd  # noqa: E402


@dataclass(frozen=True)
class Scale:
    """How big a scenario runs: the short version, or the issue's (``full``)."""

    full: bool

    def pick(self, short: int, full: int) -> int:
        """``full`` under KARPY_CHAOS=full, else ``short``."""
        return full if self.full else short


@pytest.fixture(scope="session")
def scale() -> Scale:
    """The suite's size, from KARPY_CHAOS (``full`` or unset)."""
    return Scale(full=os.environ.get("KARPY_CHAOS", "") == "full")


@pytest.fixture(scope="module")
def kwok_crd(cluster: Any) -> None:
    """The KWOKNodeClass CRD, generated from the model."""
    install_kwok_crd(cluster)
