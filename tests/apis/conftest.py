"""Fixtures of the API tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from apis_support import Created


@pytest.fixture
def created(cluster: Any) -> Iterator[Created]:
    """Create objects through ``created.create(doc)``; they are deleted after the test."""
    tracker = Created(cluster)
    yield tracker
    for resource, name in reversed(tracker.objects):
        cluster.kubectl("delete", resource, name, "--ignore-not-found", "--wait=true")
