"""The one unavailable-offerings cache the core and every provider share."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

from karpy.cloudprovider import OfferingKey, UnavailableOfferings
from karpy.runtime.testing import FakeClock

ROOT = Path(__file__).resolve().parents[2]
KEY = OfferingKey("m5.large", "zone-a", "spot")


def test_only_karpy_cloudprovider_defines_the_cache() -> None:
    homes = [
        str(path.relative_to(ROOT))
        for base in (ROOT / "karpy", ROOT / "providers")
        for path in base.rglob("*.py")
        if any(
            isinstance(node, ast.ClassDef) and node.name == "UnavailableOfferings"
            for node in ast.walk(ast.parse(path.read_text()))
        )
    ]
    assert homes == ["karpy/cloudprovider/_unavailable.py"]


def test_a_mark_lasts_its_ttl_and_the_longer_deadline_wins() -> None:
    clock = FakeClock()
    cache = UnavailableOfferings(clock=clock, ttl=60)
    cache.mark(KEY, reason="SKUNotAvailable", ttl=timedelta(hours=1))
    cache.mark([KEY], reason="InsufficientInstanceCapacity")  # 60 s: shorter, ignored
    clock.advance(61)
    assert cache.is_unavailable(KEY)
    assert cache.reason(KEY) == "SKUNotAvailable"
    clock.advance(3600)
    assert not cache.is_unavailable("m5.large", "zone-a", "spot")
    assert cache.reason(KEY) is None


def test_a_capacity_type_mark_covers_its_offerings_and_every_change_bumps_generation() -> None:
    clock = FakeClock()
    cache = UnavailableOfferings(clock=clock)
    start = cache.generation
    cache.mark_capacity_type("spot")
    assert cache.is_unavailable(KEY)
    assert not cache.is_unavailable(OfferingKey("m5.large", "zone-a", "on-demand"))
    assert cache.snapshot() == frozenset()  # a capacity type is not expanded
    marked = cache.generation
    assert marked > start
    clock.advance(181)
    assert not cache.is_unavailable(KEY)
    assert cache.generation > marked  # found expired: caches built from it rebuild
