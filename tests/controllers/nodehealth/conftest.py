"""Fixtures of the node repair tests: the NodeClaim tests' in-memory API (whose list also
honours equality label selectors here, as the cache does), a fake clock, the fake
provider with a Ready=False policy, Karpenter's metrics in memory and a recorder."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "nodeclaim"))

from nodeclaim_fakes import FakeKube

from karpy.runtime import Kind
from karpy.runtime.testing import FakeClock


class SelectingKube(FakeKube):
    """FakeKube whose ``list`` honours an equality ``label_selector`` mapping."""

    async def list(self, kind: Kind, *, label_selector: Any = None, **kw: Any) -> Any:
        items = await super().list(kind, **kw)
        if not label_selector:
            return items
        return [o for o in items if all(
            (o["metadata"].get("labels") or {}).get(k) == v for k, v in label_selector.items())]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def kube(clock: FakeClock) -> SelectingKube:
    return SelectingKube(clock)
