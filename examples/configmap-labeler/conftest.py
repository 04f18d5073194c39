"""Lets this example's test run on its own (``pytest examples/configmap-labeler``).

The local control plane's fixtures are a plugin registered by tests/conftest.py; when
pytest starts here instead, tests/ is not loaded, so register the same plugin.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the example is a script directory, not a package


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("controlplane.fixtures"):
        sys.path.insert(0, str(HERE.parent.parent / "tests"))
        config.pluginmanager.import_plugin("controlplane.fixtures")
