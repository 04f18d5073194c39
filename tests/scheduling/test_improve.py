"""The cost-improvement stage after first fit (karpy.scheduling.improve).

The plans are checked by a validator written here from the pods' own rules, not by
the code that made them: every instance type a NodeClaim lists holds its pods, each
pod's requirements and tolerations are met, hostname anti-affinity and hostname
spreads hold on every NodeClaim, zone spreads stay within maxSkew and zone affinity
finds its peers. The improved plan is compared with the first-fit plan of the same
input (``improvement_budget=0``) and with the LP floor.
"""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scheduling_support import (
    HOSTNAME,
    INSTANCE_TYPE,
    ZONE,
    ZONES,
    itype,
    nodepool,
    pod,
    spread,
    term,
)

from karpy.apis.labels import WELL_KNOWN_LABELS
from karpy.scheduling import (
    NodeClaimPlan,
    NodePoolTemplate,
    Pod,
    Results,
    SchedulerOptions,
    cost_floor,
    solver,
)
from karpy.scheduling import resources as res
from karpy.scheduling.simulator import Simulator
from karpy.scheduling.taints import untolerated

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import scheduling_bench as bench

FIRST_FIT = SchedulerOptions(improvement_budget=0)


def plan(pools: list[NodePoolTemplate], pods: list[Pod], improve: bool = True) -> Results:
    options = None if improve else FIRST_FIT
    return Simulator(pools, options=options).solve(pods)


def violations(pools: list[NodePoolTemplate], pods: list[Pod], results: Results) -> list[str]:
    """Every rule a plan breaks, in words (an empty list: none)."""
    found: list[str] = []
    by_pool = {p.name: p for p in pools}
    placed = Counter(p.key for c in results.new_nodeclaims for p in c.pods)
    placed.update(e.pod.key for e in results.errors)
    if placed != Counter(p.key for p in pods):
        found.append("pods lost or doubled")
    zone_of: dict[str, str | None] = {}
    for number, claim in enumerate(results.new_nodeclaims):
        pool = by_pool[claim.nodepool]
        total = res.add(*(p.requests for p in claim.pods))
        if not claim.instance_types:
            found.append(f"claim {number} lists no instance type")
        for it in claim.instance_types:
            if not res.fits(total, it.allocatable):
                found.append(f"claim {number}: pods do not fit {it.name}")
            if it.requirements.intersects(claim.requirements) is not None:
                found.append(f"claim {number}: {it.name} does not meet the requirements")
        zone = claim.requirements.get(ZONE)
        single = None if zone is None else zone.single()
        for p in claim.pods:
            zone_of[p.key] = single
            if untolerated(pool.taints, p.tolerations, prefer=False) is not None:
                found.append(f"{p.key} does not tolerate {claim.nodepool}")
            terms = p.required_node_terms or (p.node_selector,)
            if not any(
                claim.requirements.compatible(p.node_selector.intersect(t), WELL_KNOWN_LABELS)
                is None
                for t in terms
            ):
                found.append(f"{p.key}: node selection not met on claim {number}")
            for anti in p.pod_anti_affinity:
                if anti.topology_key == HOSTNAME:
                    others = [
                        q for q in claim.pods if q is not p and anti.selector.matches(q.labels)
                    ]
                    if others:
                        found.append(f"{p.key}: hostname anti-affinity with {others[0].key}")
            for constraint in p.spread_constraints:
                if constraint.topology_key == HOSTNAME and constraint.required:
                    count = sum(1 for q in claim.pods if constraint.selector.matches(q.labels))
                    if count > constraint.max_skew:
                        found.append(f"{p.key}: hostname spread, {count} on claim {number}")
    for p in pods:
        for constraint in p.spread_constraints:
            if constraint.topology_key != ZONE or zone_of.get(p.key) is None:
                continue
            counts = Counter(
                zone_of[q.key]
                for q in pods
                if q.key in zone_of and constraint.selector.matches(q.labels)
            )
            values = [counts.get(z, 0) for z in ZONES]
            if max(values) - min(values) > constraint.max_skew:
                found.append(f"{p.key}: zone spread {values}")
        for affinity in p.pod_affinity:
            if affinity.topology_key == ZONE and zone_of.get(p.key) is not None:
                peers = [
                    q
                    for q in pods
                    if zone_of.get(q.key) == zone_of[p.key] and affinity.selector.matches(q.labels)
                ]
                if not peers:
                    found.append(f"{p.key}: zone affinity has no peer")
    return found


def broken(found: list[str]) -> set[str]:
    """The rules broken, per pod ("ns/name: hostname spread"), without the counts and
    NodeClaim numbers that differ between plans."""
    return {text.split(",")[0] for text in found}


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[NodePoolTemplate], list[Pod]]:
    sizes = draw(st.lists(st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16]), min_size=2, max_size=6))
    ratio = draw(st.sampled_from([2, 4, 8]))
    types = [
        itype(f"t{cpu}-{r}", cpu, cpu * r, pods=draw(st.sampled_from([8, 110])))
        for cpu in sorted(set(sizes))
        for r in sorted({ratio, draw(st.sampled_from([2, 4, 8]))})
    ]
    pools = [nodepool("main", types)]
    cpu = st.sampled_from(["100m", "250m", "500m", "1", "1500m"])
    memory = st.sampled_from(["128Mi", "512Mi", "1Gi", "2Gi", "4Gi"])
    kinds = st.sampled_from(["plain", "anti", "hspread", "zspread", "affinity", "zone"])
    pods = []
    for i in range(draw(st.integers(2, 40))):
        kind = draw(kinds)
        label = draw(st.sampled_from("ab"))
        common: dict[str, Any] = {"cpu": draw(cpu), "memory": draw(memory), "labels": {"l": label}}
        if kind == "anti":
            common["labels"] = {"app": "solo"}
            common["anti_affinity"] = [term(HOSTNAME, {"app": "solo"})]
        elif kind == "hspread":
            common["spread"] = [spread(HOSTNAME, {"l": draw(st.sampled_from("ab"))})]
        elif kind == "zspread":
            common["spread"] = [spread(ZONE, {"l": draw(st.sampled_from("ab"))})]
        elif kind == "affinity":
            common["labels"] = {"team": label}
            common["affinity"] = [term(ZONE, {"team": label})]
        elif kind == "zone":
            common["node_selector"] = {ZONE: draw(st.sampled_from(ZONES))}
        pods.append(pod(f"{kind}-{i}", **common))
    return pools, pods


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_improved_plan_is_valid_cheaper_and_above_the_floor(
    batch: tuple[list[NodePoolTemplate], list[Pod]],
) -> None:
    pools, pods = batch
    first = plan(pools, pods, improve=False)
    improved = plan(pools, pods)
    assert improved.price <= first.price + 1e-9
    assert {e.pod.key for e in improved.errors} == {e.pod.key for e in first.errors}
    if improved.new_nodeclaims:
        placed = [p for c in improved.new_nodeclaims for p in c.pods]
        assert improved.price >= cost_floor(placed, pools).price - 1e-6
    before = violations(pools, pods, first)
    after = violations(pools, pods, improved)
    assert broken(after) <= broken(before), (after, before)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_improved_plans_are_deterministic(batch: tuple[list[NodePoolTemplate], list[Pod]]) -> None:
    pools, pods = batch
    first, second = plan(pools, pods), plan(pools, pods)
    assert first.placements() == second.placements()
    assert [c.instance_type_names for c in first.new_nodeclaims] == [
        c.instance_type_names for c in second.new_nodeclaims
    ]


def test_complementary_pods_are_paired() -> None:
    """Two nodes must exist (anti-affinity). First fit puts the CPU-heavy pods on one
    and the memory-heavy ones on the other, so both come out big; the improved plan
    pairs a CPU-heavy with a memory-heavy pod on each, on smaller types."""
    types = [itype(f"c{cpu}", cpu, 4 * cpu) for cpu in (1, 2, 3, 4, 6, 8)]
    pools = [nodepool("main", types)]
    solos = [
        pod(
            f"solo-{i}",
            cpu="100m",
            memory="100Mi",
            labels={"app": "solo"},
            anti_affinity=[term(HOSTNAME, {"app": "solo"})],
        )
        for i in range(2)
    ]
    cpu_heavy = [pod(f"cpu-{i}", cpu="1800m", memory="256Mi") for i in range(2)]
    memory_heavy = [pod(f"mem-{i}", cpu="200m", memory="7Gi") for i in range(2)]
    pods = solos + cpu_heavy + memory_heavy
    first = plan(pools, pods, improve=False)
    improved = plan(pools, pods)
    assert not improved.errors
    assert len(improved.new_nodeclaims) == 2
    assert improved.price < first.price
    # first fit checks a hostname spread when its pod is placed, so pods placed later
    # can take a NodeClaim over maxSkew; the improved plan never adds such a case
    assert broken(violations(pools, pods, improved)) <= broken(violations(pools, pods, first))
    for claim in improved.new_nodeclaims:
        total = res.add(*(p.requests for p in claim.pods))
        # every type that fits the pods stays on the NodeClaim, not just the cheapest
        fitting = [it.name for it in types if res.fits(total, it.allocatable)]
        assert sorted(claim.instance_type_names) == sorted(fitting)


def test_benchmark_mix_comes_much_closer_to_the_floor() -> None:
    """600 pods of the benchmark recipe on its 60 smallest types: first fit is ~40 %
    above the LP floor; the improved plan at most 25 %, and still valid."""
    pods = [Pod.from_dict(p) for p in bench.PodFactory().diverse(600)]
    pools = [NodePoolTemplate(name="default", instance_types=bench.instance_types(60))]
    first = plan(pools, pods, improve=False)
    improved = plan(pools, pods)
    floor = cost_floor(pods, pools).price
    assert not improved.errors
    assert improved.price < first.price
    assert improved.price <= 1.25 * floor, (improved.price / floor, first.price / floor)
    # first fit checks a hostname spread when its pod is placed, so pods placed later
    # can take a NodeClaim over maxSkew; the improved plan never adds such a case
    assert broken(violations(pools, pods, improved)) <= broken(violations(pools, pods, first))


def every_fitting_type(pool: NodePoolTemplate, claim: NodeClaimPlan) -> set[str]:
    """Karpenter's rule, computed here from the catalogue: every instance type of the
    pool that meets the NodeClaim's requirements (the instance-type list aside), has an
    available offering they allow, and holds its pods."""
    reqs = claim.requirements.without(INSTANCE_TYPE)
    total = res.add(*(p.requests for p in claim.pods))
    return {
        it.name
        for it in pool.instance_types
        if it.requirements.intersects(reqs) is None
        and it.cheapest_price(reqs) is not None
        and res.fits(total, it.allocatable)
    }


def check_breadth(pools: list[NodePoolTemplate], first: Results, improved: Results) -> None:
    """Every NodeClaim lists every type that fits its pods; the stage's narrowing is
    flagged and counted, and is only ever a zone given up."""
    by_pool = {p.name: p for p in pools}
    assert first.narrowed_nodeclaims == 0
    assert improved.narrowed_nodeclaims == sum(c.narrowed for c in improved.new_nodeclaims)
    first_zones = {
        frozenset(c.pods): c.requirements.get(ZONE) for c in first.new_nodeclaims
    }
    for claim in improved.new_nodeclaims:
        pool = by_pool[claim.nodepool]
        fitting = every_fitting_type(pool, claim)
        if pool.limits:
            # a limited NodePool keeps only the types within what is left of its
            # limits (the largest is reserved), in first fit as in Karpenter
            assert claim.instance_type_names and set(claim.instance_type_names) <= fitting
        else:
            assert set(claim.instance_type_names) == fitting, claim
        zone = claim.requirements.get(ZONE)
        if claim.narrowed:
            assert zone is not None and zone.single() is not None, claim
        elif frozenset(claim.pods) in first_zones:
            # a NodeClaim the stage left alone is the one first fit made
            assert zone == first_zones[frozenset(claim.pods)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_claims_stay_as_broad_as_their_pods_allow(
    batch: tuple[list[NodePoolTemplate], list[Pod]],
) -> None:
    pools, pods = batch
    check_breadth(pools, plan(pools, pods, improve=False), plan(pools, pods))


def test_narrowed_claims_are_reported() -> None:
    """On the benchmark mix the stage moves zone-spread pods onto NodeClaims that had
    no zone rule, which pins those to one zone: every such NodeClaim is flagged, the
    others keep the zones and types first fit gave them."""
    pods = [Pod.from_dict(p) for p in bench.PodFactory().diverse(600)]
    pools = [NodePoolTemplate(name="default", instance_types=bench.instance_types(60))]
    first = plan(pools, pods, improve=False)
    improved = plan(pools, pods)
    assert improved.narrowed_nodeclaims > 0
    check_breadth(pools, first, improved)
    zones = {z for c in first.new_nodeclaims if (z := c.requirements.get(ZONE)) is None
             or z.single() is None}
    assert zones, "first fit left some NodeClaims free to launch in any zone"


TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}


@st.composite
def pooled_batches(draw: st.DrawFn) -> tuple[list[NodePoolTemplate], list[Pod]]:
    """Two NodePools: a preferred one with a CPU limit and a tainted fallback; pods
    that tolerate the taint, bind host ports, or carry the rules of :func:`batches`."""
    pools, pods = draw(batches())
    types = list(pools[0].instance_types)
    limit = draw(st.sampled_from([8, 16, 32, 64]))
    pools = [
        nodepool("main", types, weight=10, limits={"cpu": str(limit)}),
        nodepool("tainted", types, taints=[TAINT]),
    ]
    extra = []
    for i in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["tolerant", "ports", "tolerant-anti"]))
        common: dict[str, Any] = {
            "cpu": draw(st.sampled_from(["250m", "1", "1500m"])),
            "memory": draw(st.sampled_from(["256Mi", "2Gi", "4Gi"])),
            "tolerations": [TOLERATION],
        }
        if kind == "ports":
            common["host_ports"] = [8080]
        elif kind == "tolerant-anti":
            common["labels"] = {"app": "solo"}
            common["anti_affinity"] = [term(HOSTNAME, {"app": "solo"})]
        extra.append(pod(f"{kind}-x{i}", **common))
    return pools, pods + extra


def pool_violations(pools: list[NodePoolTemplate], results: Results) -> list[str]:
    """Host ports and NodePool limits, checked from the plan: no two pods on a
    NodeClaim bind the same host port, and the largest type each NodeClaim may launch,
    summed per NodePool, stays within the NodePool's CPU limit."""
    found = []
    reserved: Counter[str] = Counter()
    for number, claim in enumerate(results.new_nodeclaims):
        ports = [port for p in claim.pods for port in p.host_ports]
        if len(ports) != len(set(ports)):
            found.append(f"claim {number}: a host port twice")
        reserved[claim.nodepool] += max(it.capacity.get(res.CPU, 0) for it in claim.instance_types)
    for pool in pools:
        limit = (pool.limits or {}).get(res.CPU)
        if limit is not None and reserved[pool.name] > limit:
            found.append(f"{pool.name}: {reserved[pool.name]}m reserved over {limit}m")
    return found


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pooled_batches())
def test_improved_plan_keeps_taints_ports_and_limits(
    batch: tuple[list[NodePoolTemplate], list[Pod]],
) -> None:
    pools, pods = batch
    first = plan(pools, pods, improve=False)
    improved = plan(pools, pods)
    assert improved.price <= first.price + 1e-9
    assert {e.pod.key for e in improved.errors} == {e.pod.key for e in first.errors}
    if improved.new_nodeclaims:
        placed = [p for c in improved.new_nodeclaims for p in c.pods]
        assert improved.price >= cost_floor(placed, pools).price - 1e-6
    assert pool_violations(pools, first) == []
    assert pool_violations(pools, improved) == []
    assert broken(violations(pools, pods, improved)) <= broken(violations(pools, pods, first))
    check_breadth(pools, first, improved)


@contextlib.contextmanager
def without_exchanges() -> Iterator[None]:
    """The improvement stage with its exchange stage (``Improver._swap``) switched off."""
    saved = solver.SWAP_PER_POD
    solver.SWAP_PER_POD = 0
    try:
        yield
    finally:
        solver.SWAP_PER_POD = saved


def kwok_pool() -> NodePoolTemplate:
    return NodePoolTemplate(name="default", instance_types=bench.kwok_types())


def test_exchanges_lower_the_kwok_plan() -> None:
    """1,000 pods of the benchmark mix on the kwok catalogue (sizes double, so many
    NodeClaims end a pod's difference above the next size down): single moves stop at
    a local optimum that exchanging a pod for a smaller one leaves, by several %."""
    pods = [Pod.from_dict(p) for p in bench.PodFactory().diverse(1000)]
    pools = [kwok_pool()]
    with without_exchanges():
        single = plan(pools, pods)
    exchanged = plan(pools, pods)
    assert not exchanged.errors
    assert exchanged.price <= 0.97 * single.price, (exchanged.price, single.price)
    assert broken(violations(pools, pods, exchanged)) <= broken(violations(pools, pods, single))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**16), st.integers(300, 600))
def test_exchanges_never_raise_the_price_or_break_a_rule(seed: int, count: int) -> None:
    """The exchange stage starts where single moves stopped and keeps an exchange only
    when the pair costs less: the plan is never dearer than without it, places the same
    pods, and breaks no rule the first-fit plan keeps."""
    pods = [Pod.from_dict(p) for p in bench.PodFactory(seed).diverse(count)]
    pools = [kwok_pool()]
    first = plan(pools, pods, improve=False)
    with without_exchanges():
        single = plan(pools, pods)
    exchanged = plan(pools, pods)
    assert exchanged.price <= single.price + 1e-9
    assert {e.pod.key for e in exchanged.errors} == {e.pod.key for e in single.errors}
    assert Counter(p.key for c in exchanged.new_nodeclaims for p in c.pods) == Counter(
        p.key for c in single.new_nodeclaims for p in c.pods
    )
    assert broken(violations(pools, pods, exchanged)) <= broken(violations(pools, pods, first))
