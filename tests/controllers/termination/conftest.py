"""Fixtures for termination's unit tests (the world itself is built in rigging.py)."""

from __future__ import annotations

import pytest
from controllers.termination.rigging import Rig, make_rig


@pytest.fixture
def rig() -> Rig:
    return make_rig()
