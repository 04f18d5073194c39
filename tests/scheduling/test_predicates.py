"""The simulator's building blocks checked against brute force: instance-type masks,
topology counts, node filters, host ports, DaemonSet placement and volume topology."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from scheduling_support import ARCH, ZONE, ZONES, expr, itype, pod

from karpy.apis.labels import WELL_KNOWN_LABELS
from karpy.scheduling import (
    HostPort,
    LabelMatcher,
    NodeTaint,
    Requirement,
    Requirements,
    Toleration,
)
from karpy.scheduling.catalog import Catalog, iter_bits
from karpy.scheduling.daemons import daemon_runs_on
from karpy.scheduling.freeindex import FreeIndex
from karpy.scheduling.topology import SPREAD, GroupSpec, NodeFilter, TopologyGroup
from karpy.scheduling.volumes import combine, from_persistent_volume, from_storage_class

NAMES = ("cpu", "memory", "pods")


@st.composite
def catalogs(draw: st.DrawFn) -> Catalog:
    types = [
        itype(
            f"t{i}",
            draw(st.integers(1, 8)),
            draw(st.integers(1, 16)),
            pods=draw(st.integers(1, 30)),
            zones=draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=3, unique=True)),
            capacity_types=draw(
                st.sampled_from([("spot",), ("on-demand",), ("spot", "on-demand")])
            ),
            arch=draw(st.sampled_from(["amd64", "arm64"])),
            unavailable=draw(st.lists(st.tuples(st.sampled_from(ZONES), st.just("spot")))),
        )
        for i in range(draw(st.integers(1, 12)))
    ]
    return Catalog(types, NAMES, WELL_KNOWN_LABELS)


node_requirements = st.lists(
    st.sampled_from(
        [
            Requirement.new(ZONE, "In", ["zone-a"]),
            Requirement.new(ZONE, "NotIn", ["zone-b"]),
            Requirement.new(ARCH, "In", ["arm64"]),
            Requirement.new("karpenter.sh/capacity-type", "In", ["spot"]),
            Requirement.new("custom", "In", ["x"]),
            Requirement.new(ARCH, "DoesNotExist"),
        ]
    ),
    max_size=3,
).map(Requirements)


@settings(max_examples=150, deadline=None)
@given(catalogs(), node_requirements)
def test_requirement_and_offering_masks_match_brute_force(
    catalog: Catalog, reqs: Requirements
) -> None:
    by_reqs = {i for i, it in enumerate(catalog.types) if it.requirements.overlaps(reqs)}
    assert set(iter_bits(catalog.requirements_mask(reqs))) == by_reqs
    by_offering = {
        i
        for i, it in enumerate(catalog.types)
        if any(o.available and reqs.overlaps(o.requirements) for o in it.offerings)
    }
    assert set(iter_bits(catalog.offering_mask(reqs))) == by_offering
    cheapest = catalog.cheapest_first(catalog.full, reqs)
    prices = [catalog.types[i].cheapest_price(reqs) for i in cheapest]
    assert prices == sorted(prices)  # type: ignore[type-var]
    assert set(cheapest) == by_offering


@settings(max_examples=150, deadline=None)
@given(catalogs(), st.lists(st.integers(0, 10_000), min_size=3, max_size=3))
def test_fit_mask_matches_brute_force(catalog: Catalog, vector: list[int]) -> None:
    expected = {
        i
        for i, it in enumerate(catalog.types)
        if all(
            amount <= it.allocatable.get(name, 0)
            for name, amount in zip(NAMES, vector, strict=True)
            if amount
        )
    }
    assert set(iter_bits(catalog.fit_mask(vector))) == expected


@settings(max_examples=100, deadline=None)
@given(catalogs(), st.integers(0, 10_000))
def test_limit_mask_and_max_capacity(catalog: Catalog, cpu: int) -> None:
    within = set(iter_bits(catalog.within_mask({"cpu": cpu})))
    assert within == {i for i, it in enumerate(catalog.types) if it.capacity["cpu"] <= cpu}
    biggest = catalog.max_capacity(catalog.full, ["cpu"])["cpu"]
    assert biggest == max(it.capacity["cpu"] for it in catalog.types)


def spread_group(key: str = ZONE, min_domains: int | None = None) -> TopologyGroup:
    spec = GroupSpec(
        kind=SPREAD,
        key=key,
        namespaces=frozenset({"default"}),
        selector=LabelMatcher.from_dict({"matchLabels": {"app": "a"}}),
        max_skew=1,
        min_domains=min_domains,
    )
    group = TopologyGroup(spec)
    for zone in ZONES:
        group.register(zone)
    return group


def test_spread_minimum_respects_pod_domains_and_min_domains() -> None:
    group = spread_group()
    group.record("zone-a", 2)
    group.record("zone-b", 1)
    anywhere = Requirement.new(ZONE, "Exists")
    assert group.min_count(anywhere) == 0
    assert group.min_count(Requirement.new(ZONE, "In", ["zone-a", "zone-b"])) == 1
    strict = spread_group(min_domains=4)
    strict.record("zone-a")
    strict.record("zone-b")
    strict.record("zone-c")
    assert strict.min_count(anywhere) == 0  # 3 eligible domains < minDomains 4
    assert spread_group("kubernetes.io/hostname").min_count(anywhere) == 0


def test_group_selects_by_namespace_and_labels() -> None:
    group = spread_group()
    assert group.selects("default", {"app": "a"})
    assert not group.selects("other", {"app": "a"})
    assert not group.selects("default", {"app": "b"})
    assert group.nonzero == 0
    group.record("zone-a")
    assert group.nonzero == 1 and group.any_compatible_nonempty(Requirement.new(ZONE, "Exists"))
    assert not group.any_compatible_nonempty(Requirement.new(ZONE, "In", ["zone-b"]))


def test_node_filter_policies() -> None:
    terms = (Requirements.from_labels({ZONE: "zone-a"}),)
    honor_both = NodeFilter(terms, frozenset(), affinity_honored=True, taints_honored=True)
    tainted = [NodeTaint("dedicated", "NoSchedule")]
    in_a = Requirements.from_labels({ZONE: "zone-a"})
    in_b = Requirements.from_labels({ZONE: "zone-b"})
    assert honor_both.matches([], in_a)
    assert not honor_both.matches([], in_b)
    assert not honor_both.matches(tainted, in_a)
    ignore = NodeFilter(terms, frozenset(), affinity_honored=False, taints_honored=False)
    assert ignore.matches(tainted, in_b)
    tolerant = NodeFilter(terms, frozenset({Toleration("dedicated", "Exists")}), True, True)
    assert tolerant.matches(tainted, in_a)


@given(
    st.tuples(
        st.sampled_from([80, 443]),
        st.sampled_from(["TCP", "UDP"]),
        st.sampled_from(["0.0.0.0", "10.0.0.1", "10.0.0.2"]),
    ),
    st.tuples(
        st.sampled_from([80, 443]),
        st.sampled_from(["TCP", "UDP"]),
        st.sampled_from(["0.0.0.0", "10.0.0.1", "10.0.0.2"]),
    ),
)
def test_host_port_conflicts(a: tuple[int, str, str], b: tuple[int, str, str]) -> None:
    left, right = HostPort(*a), HostPort(*b)
    expected = a[0] == b[0] and a[1] == b[1] and (a[2] == b[2] or "0.0.0.0" in (a[2], b[2]))
    assert left.conflicts(right) is expected
    assert right.conflicts(left) is expected


def test_daemonsets_follow_taints_and_node_affinity() -> None:
    linux_only = pod("ds", node_selector={"kubernetes.io/os": "linux"})
    labels = Requirements.from_labels({"kubernetes.io/os": "linux"})
    assert daemon_runs_on(linux_only, [], labels)
    assert not daemon_runs_on(
        linux_only, [], Requirements.from_labels({"kubernetes.io/os": "windows"})
    )
    assert not daemon_runs_on(linux_only, [NodeTaint("gpu", "NoSchedule")], labels)
    assert daemon_runs_on(linux_only, [NodeTaint("gpu", "PreferNoSchedule")], labels)


def test_volume_topology_alternatives() -> None:
    pv = {
        "spec": {
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [expr(ZONE, "In", "zone-a")]},
                        {"matchExpressions": [expr(ZONE, "In", "zone-b")]},
                    ]
                }
            }
        }
    }
    sc = {
        "allowedTopologies": [
            {"matchLabelExpressions": [{"key": ZONE, "values": ["zone-b", "zone-c"]}]}
        ]
    }
    pv_terms = from_persistent_volume(pv)
    sc_terms = from_storage_class(sc)
    assert [str(t) for t in pv_terms] == [f"{ZONE} In [zone-a]", f"{ZONE} In [zone-b]"]
    both = combine([pv_terms, sc_terms])
    assert [str(t) for t in both] == [f"{ZONE} In [zone-b]"]
    assert combine([[], []]) == []
    assert from_storage_class({}) == [] and from_persistent_volume({}) == []


vectors = st.lists(st.lists(st.integers(-2, 6), min_size=3, max_size=3), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(vectors, st.lists(st.integers(0, 6), min_size=3, max_size=3), st.data())
def test_free_index_finds_the_first_node_with_room(
    free: list[list[int]], need: list[int], data: st.DataObject
) -> None:
    need[2] = max(need[2], 1)  # every pod takes a pod slot
    index = FreeIndex(free, 3)
    for _ in range(3):
        start = data.draw(st.integers(0, len(free)))
        expected = next(
            (
                i
                for i in range(start, len(free))
                if all(max(h, 0) >= w for h, w in zip(free[i], need, strict=True))
            ),
            None,
        )
        assert index.find(need, start) == expected
        position = data.draw(st.integers(0, len(free) - 1))
        free[position] = data.draw(st.lists(st.integers(-2, 6), min_size=3, max_size=3))
        index.update(position, free[position])
