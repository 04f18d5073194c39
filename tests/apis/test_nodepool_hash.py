"""karpy's NodePool hash is Karpenter's: the same decimal string for the same NodePool.

The golden values in data/nodepool_hash_golden.json were printed by Karpenter's own
``NodePool.Hash()`` (scripts/nodepool-hash, a Go program importing
sigs.k8s.io/karpenter/pkg/apis/v1) for named edge cases and 100 seeded random NodePools;
these tests need neither Go nor the network.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis import NodePool
from karpy.apis.annotations import NODEPOOL_HASH_VERSION
from karpy.apis.duration import go_duration_nanoseconds, parse_duration
from karpy.apis.hashstructure import fnv1_64

GOLDEN = json.loads((Path(__file__).parent / "data" / "nodepool_hash_golden.json").read_text())
CASES: list[dict[str, Any]] = GOLDEN["cases"]
BY_NAME = {c["name"]: c for c in CASES}


def test_the_golden_file_is_karpenters_current_hash_version() -> None:
    assert GOLDEN["hashVersion"] == NODEPOOL_HASH_VERSION == "v3"
    assert "sigs.k8s.io/karpenter" in GOLDEN["generator"]
    assert len(CASES) >= 100


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_hash_equals_karpenters(case: dict[str, Any]) -> None:
    assert NodePool.from_dict(case["nodepool"]).hash() == case["hash"]


def test_what_karpenter_ignores_and_what_it_does_not() -> None:
    minimal = BY_NAME["minimal"]["hash"]
    # Requirements, disruption, limits and weight are outside what is hashed ...
    for same in ("other-requirements", "other-disruption-limits-weight", "empty-metadata"):
        assert BY_NAME[same]["hash"] == minimal
    assert BY_NAME["taints"]["hash"] == BY_NAME["taints-reordered"]["hash"]
    assert BY_NAME["expire-1h30m"]["hash"] == BY_NAME["expire-90m"]["hash"]
    # ... while an empty map or list that is present is not the same as an absent one.
    for different in ("empty-labels-map", "empty-taints-list", "expire-never",
                      "termination-grace-period-0s", "labels-only"):
        assert BY_NAME[different]["hash"] != minimal
    assert BY_NAME["taints"]["hash"] != BY_NAME["taints-as-startup-taints"]["hash"]


def test_fnv1_is_go_hash_fnv_new64() -> None:
    # Go: fnv.New64() of "" is the offset basis; of "a" is 0xaf63bd4c8601b7be (FNV-1).
    assert fnv1_64(b"") == 0xCBF29CE484222325
    assert fnv1_64(b"a") == 0xAF63BD4C8601B7BE
    assert fnv1_64(b"foobar") == 0x340D8765A4DDA9C2


_template = BY_NAME["everything"]["nodepool"]


@given(st.permutations(range(3)), st.lists(st.sampled_from(["a", "b", "c"]), max_size=3))
def test_taint_order_and_requirements_never_change_the_hash(
    order: list[int], zones: list[str]
) -> None:
    taints = [{"key": f"example.com/{i}", "effect": "NoSchedule"} for i in range(3)]
    base = json.loads(json.dumps(_template))
    base["spec"]["template"]["spec"]["taints"] = taints
    moved = json.loads(json.dumps(base))
    moved["spec"]["template"]["spec"]["taints"] = [taints[i] for i in order]
    moved["spec"]["template"]["spec"]["requirements"] = [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [z]} for z in zones
    ]
    assert NodePool.from_dict(moved).hash() == NodePool.from_dict(base).hash()


@given(st.text(alphabet="abcdefghij0123456789", min_size=1, max_size=20))
def test_a_label_value_changes_the_hash(value: str) -> None:
    base = json.loads(json.dumps(_template))
    changed = json.loads(json.dumps(base))
    changed["spec"]["template"]["metadata"]["labels"]["a"] = value + "x"
    assert NodePool.from_dict(changed).hash() != NodePool.from_dict(base).hash()


@given(st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from("hms")), min_size=1,
                max_size=3))
def test_durations_parse_to_go_nanoseconds(parts: list[tuple[int, str]]) -> None:
    text = "".join(f"{n}{unit}" for n, unit in parts)
    expected = sum(n * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts) * 10**9
    assert go_duration_nanoseconds(text) == expected
    assert parse_duration(text) == timedelta(microseconds=expected // 1000)


def test_fractions_and_small_units_parse_as_go_does() -> None:
    assert go_duration_nanoseconds("1.5h") == 5_400 * 10**9
    assert go_duration_nanoseconds("1m0.000000001s") == 60 * 10**9 + 1
    assert go_duration_nanoseconds("300ms") == 300_000_000
    with pytest.raises(ValueError, match="'5 minutes' is not a duration"):
        go_duration_nanoseconds("5 minutes")
