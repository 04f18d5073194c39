"""End-to-end tests: karpy with the kwok provider against the local control plane.

Each test starts karpy itself (tests/e2e/harness.py) so it can choose settings and
provider faults; all share the session's cluster and clean up what they create.
"""

from __future__ import annotations

from typing import Any

import pytest
from kube import install_kwok_crd


@pytest.fixture(scope="module")
def kwok_crd(cluster: Any) -> None:
    """The KWOKNodeClass CRD, generated from the model (applying it again is harmless)."""
    install_kwok_crd(cluster)
