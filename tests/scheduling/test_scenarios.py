"""A table of scenarios: a small cluster, pods, and the NodeClaims we expect.

Each row names the NodePools, existing nodes, DaemonSets and pods, then states which
pods share a new NodeClaim (as sets of pod names), which land on existing nodes, which
fail (with words the reason must contain), plus row-specific checks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest
from scheduling_support import (
    ARCH,
    CAPACITY_TYPE,
    HOSTNAME,
    INSTANCE_TYPE,
    ZONE,
    claim_of,
    domain_of,
    expr,
    itype,
    node,
    nodepool,
    pod,
    pods,
    spread,
    standard_types,
    taint,
    term,
    toleration,
)

from karpy.scheduling import ExistingNode, NodePoolTemplate, Pod, Requirements, Results
from karpy.scheduling.simulator import SchedulerOptions, Simulator


@dataclass
class Scenario:
    name: str
    pods: Sequence[Pod]
    pools: Sequence[NodePoolTemplate] = field(default_factory=lambda: [nodepool()])
    nodes: Sequence[ExistingNode] = ()
    daemonsets: Sequence[Pod] = ()
    claims: Sequence[set[str]] | None = None  # pods per new NodeClaim
    claim_count: int | None = None
    existing: dict[str, set[str]] = field(default_factory=dict)  # node -> pods
    errors: dict[str, str] = field(default_factory=dict)  # pod -> words in the reason
    check: Callable[[Results], None] | None = None
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    options: SchedulerOptions | None = None


def zones_of(results: Results, names: Sequence[str]) -> Counter[str | None]:
    return Counter(domain_of(results, n, ZONE) for n in names)


def names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


def db_node() -> ExistingNode:
    return node("db-node", zone="zone-b", bound=[pod("db", labels={"app": "db"}, cpu="1")])


def guard_node() -> ExistingNode:
    guard = pod("guard", labels={"app": "guard"}, anti_affinity=[term(ZONE, {"app": "web"})])
    return node("guard-node", zone="zone-a", cpu=1, bound=[guard])


def check_single_pod(r: Results) -> None:
    claim = r.new_nodeclaims[0]
    assert claim.instance_type_names == ["small", "medium", "large", "xlarge"]
    assert claim.requests == {"cpu": 100, "memory": 128 << 20, "pods": 1}
    assert claim.labels["karpenter.sh/nodepool"] == "default"
    reqs = {r["key"]: r for r in claim.node_selector_requirements()}
    assert reqs[INSTANCE_TYPE]["values"] == ["small", "medium", "large", "xlarge"]
    assert reqs[CAPACITY_TYPE] == {"key": CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}
    assert HOSTNAME not in reqs


def check_daemon_overhead(r: Results) -> None:
    claim = r.new_nodeclaims[0]
    assert claim.instance_type_names[0] == "medium"  # 1.5 + 1 CPU does not fit "small"
    assert claim.requests["cpu"] == 2500
    assert claim.requests["pods"] == 2


def check_spread(r: Results) -> None:
    assert sorted(zones_of(r, names("s", 6)).values()) == [2, 2, 2]


def check_gpu(r: Results) -> None:
    assert claim_of(r, "trainer").instance_type_names == ["gpu"]


def check_truncation(r: Results) -> None:
    claim = r.new_nodeclaims[0]
    assert len(claim.instance_types) == 600
    assert claim.instance_type_names[0] == "t-000"
    prices = [it.cheapest_price() for it in claim.instance_types]
    assert prices == sorted(prices)


def check_min_values(r: Results) -> None:
    claim = r.new_nodeclaims[0]
    families = {it.requirements["family"].single() for it in claim.instance_types}
    assert len(families) >= 3
    assert {"key": INSTANCE_TYPE, "operator": "Exists", "minValues": 3} not in (
        claim.node_selector_requirements()
    )


def many_types() -> list:
    return [itype(f"t-{i:03d}", 1 + i / 100, 4, price=1 + i / 1000) for i in range(700)]


def family_types() -> list:
    return [
        itype(f"{family}.large", 2, 8, labels={"family": family}, price=p)
        for family, p in [("c5", 1.0), ("c6", 1.1), ("m5", 1.2), ("r5", 1.3)]
    ]


SCENARIOS = [
    Scenario(
        "one small pod gets the cheapest node, every type listed cheapest first",
        pods=[pod("web")],
        claims=[{"web"}],
        check=check_single_pod,
    ),
    Scenario(
        "pods that fit together share one NodeClaim sized for all of them",
        pods=pods(6, "p", cpu="1"),
        claims=[set(names("p", 6))],
        check=lambda r: r.new_nodeclaims[0].instance_type_names == ["large", "xlarge"],
    ),
    Scenario(
        "a pod larger than every instance type gets a reason naming the resources",
        pods=[pod("huge", cpu="64")],
        claims=[],
        errors={"huge": "no instance type had enough resources (requirements"},
    ),
    Scenario(
        "nodeSelector narrows the zone",
        pods=[pod("z", node_selector={ZONE: "zone-c"})],
        claims=[{"z"}],
        check=lambda r: domain_of(r, "z", ZONE) == "zone-c",
    ),
    Scenario(
        "required node affinity: an impossible first term falls through to the next",
        pods=[
            pod(
                "either",
                required_terms=[[expr(ARCH, "In", "arm64")], [expr(ZONE, "In", "zone-b")]],
            )
        ],
        claims=[{"either"}],
        check=lambda r: domain_of(r, "either", ZONE) == "zone-b",
    ),
    Scenario(
        "a custom label must be defined by the NodePool",
        pods=[pod("team", node_selector={"team": "ml"})],
        claims=[],
        errors={"team": "label 'team' does not have known values"},
    ),
    Scenario(
        "a NodePool label satisfies a custom nodeSelector and lands on the NodeClaim",
        pods=[pod("team", node_selector={"team": "ml"})],
        pools=[nodepool(labels={"team": "ml"})],
        claims=[{"team"}],
        check=lambda r: r.new_nodeclaims[0].labels["team"] == "ml",
    ),
    Scenario(
        "a tainted NodePool only takes pods that tolerate the taint",
        pods=[
            pod("plain"),
            pod("gpu-ok", tolerations=[toleration("gpu")]),
        ],
        pools=[nodepool(taints=[taint("gpu")])],
        claims=[{"gpu-ok"}],
        errors={"plain": "did not tolerate taint gpu:NoSchedule"},
    ),
    Scenario(
        "startup taints do not keep pods off",
        pods=[pod("p")],
        pools=[nodepool(startup_taints=[taint("cni-not-ready")])],
        claims=[{"p"}],
        check=lambda r: (
            [str(t) for t in r.new_nodeclaims[0].startup_taints] == ["cni-not-ready:NoSchedule"]
        ),
    ),
    Scenario(
        "the heavier NodePool wins; a pod it cannot take falls back to the lighter one",
        pods=[pod("any"), pod("arm", node_selector={ARCH: "arm64"})],
        pools=[
            nodepool("light", [itype("a1", 2, 4, arch="arm64"), *standard_types()]),
            nodepool("heavy", weight=50, requirements=[expr(ARCH, "In", "amd64")]),
        ],
        claims=[{"any"}, {"arm"}],
        check=lambda r: (
            (claim_of(r, "any").nodepool, claim_of(r, "arm").nodepool) == ("heavy", "light")
        ),
    ),
    Scenario(
        "limits: a NodePool never plans past its limits",
        pods=pods(3, "big", cpu="3"),
        pools=[nodepool(limits={"cpu": "10"})],
        claims=[{"big-0", "big-1"}],  # an 8-CPU node; 16 CPU would pass the limit
        errors={"big-2": "excluded by the NodePool's limits (remaining cpu=2)"},
    ),
    Scenario(
        "limits on nodes count NodeClaims",
        pods=pods(
            2, "solo", anti_affinity=[term(HOSTNAME, {"app": "solo"})], labels={"app": "solo"}
        ),
        pools=[nodepool(limits={"nodes": "1"})],
        claim_count=1,
        check=lambda r: "node limit" in r.errors[0].reason,
    ),
    Scenario(
        "existing capacity is used first; the rest gets a new NodeClaim",
        pods=pods(5, "p", cpu="1"),
        nodes=[node("n1", cpu=3)],
        existing={"n1": set(names("p", 3))},
        claims=[{"p-3", "p-4"}],
    ),
    Scenario(
        "a tainted existing node is skipped",
        pods=[pod("p")],
        nodes=[node("tainted", taints=[taint("dedicated", value="db")])],
        claims=[{"p"}],
    ),
    Scenario(
        "pods already bound count against an existing node's room",
        pods=[pod("new", cpu="2")],
        nodes=[node("n1", cpu=3, bound=[pod("old", cpu="2", node_name="n1")])],
        claims=[{"new"}],
    ),
    Scenario(
        "DaemonSet overhead is reserved on every new NodeClaim",
        pods=[pod("app", cpu="1500m")],
        daemonsets=[pod("agent", cpu="1", memory="0")],
        claims=[{"app"}],
        check=check_daemon_overhead,
    ),
    Scenario(
        "a DaemonSet that does not tolerate the NodePool's taint adds no overhead",
        pods=[pod("app", cpu="1500m", tolerations=[toleration("gpu")])],
        pools=[nodepool(taints=[taint("gpu")])],
        daemonsets=[pod("agent", cpu="1", memory="0")],
        claims=[{"app"}],
        check=lambda r: r.new_nodeclaims[0].instance_type_names[0] == "small",
    ),
    Scenario(
        "hostname anti-affinity: one node per replica",
        pods=pods(
            3, "solo", labels={"app": "solo"}, anti_affinity=[term(HOSTNAME, {"app": "solo"})]
        ),
        claims=[{"solo-0"}, {"solo-1"}, {"solo-2"}],
    ),
    Scenario(
        "zone spread with maxSkew 1 puts two of six in each zone",
        pods=pods(6, "s", cpu="1", labels={"app": "s"}, spread=[spread(ZONE, {"app": "s"})]),
        check=check_spread,
    ),
    Scenario(
        "hostname spread with maxSkew 2 allows two per node",
        pods=pods(5, "h", labels={"app": "h"}, spread=[spread(HOSTNAME, {"app": "h"}, max_skew=2)]),
        check=lambda r: sorted(len(c.pods) for c in r.new_nodeclaims) == [1, 2, 2],
    ),
    Scenario(
        "minDomains: fewer eligible zones than minDomains keep the global minimum at 0",
        pods=pods(
            3,
            "md",
            labels={"app": "md"},
            spread=[spread(ZONE, {"app": "md"}, minDomains=3)],
        ),
        pools=[nodepool(requirements=[expr(ZONE, "In", "zone-a", "zone-b")])],
        claim_count=2,
        check=lambda r: len(r.errors) == 1 and "topology spread" in r.errors[0].reason,
    ),
    Scenario(
        "zone self-affinity keeps a group in one zone",
        pods=pods(4, "aff", cpu="3", labels={"app": "aff"}, affinity=[term(ZONE, {"app": "aff"})]),
        check=lambda r: len(zones_of(r, names("aff", 4))) == 1,
    ),
    Scenario(
        "affinity to an existing pod follows it into its zone",
        pods=[pod("follower", affinity=[term(ZONE, {"app": "db"})])],
        nodes=[db_node()],
        existing={"db-node": {"follower"}},
    ),
    Scenario(
        "affinity to an existing pod on a full node gets a NodeClaim in that zone",
        pods=[pod("follower", cpu="3500m", affinity=[term(ZONE, {"app": "db"})])],
        nodes=[db_node()],
        claims=[{"follower"}],
        check=lambda r: domain_of(r, "follower", ZONE) == "zone-b",
    ),
    Scenario(
        "affinity to pods later in the batch is met on a second pass",
        pods=[
            pod("api", cpu="2", affinity=[term(ZONE, {"app": "cache"})]),
            pod("cache", cpu="100m", labels={"app": "cache"}, node_selector={ZONE: "zone-c"}),
        ],
        check=lambda r: domain_of(r, "api", ZONE) == "zone-c",
    ),
    Scenario(
        "an existing pod's anti-affinity keeps selected pods out of its zone",
        pods=pods(3, "web", labels={"app": "web"}),
        nodes=[guard_node()],
        check=lambda r: all(
            not claim_of(r, n).requirements[ZONE].has("zone-a") for n in names("web", 3)
        ),
    ),
    Scenario(
        "namespaceSelector: anti-affinity only against pods in selected namespaces",
        pods=[
            pod("prod-db", namespace="prod", labels={"app": "db"}, node_selector={ZONE: "zone-a"}),
            pod("dev-db", namespace="dev", labels={"app": "db"}, node_selector={ZONE: "zone-a"}),
            pod(
                "loner",
                node_selector={ZONE: "zone-a"},
                anti_affinity=[
                    term(
                        HOSTNAME, {"app": "db"}, namespaceSelector={"matchLabels": {"env": "prod"}}
                    )
                ],
            ),
        ],
        namespaces={"prod": {"env": "prod"}, "dev": {"env": "dev"}},
        check=lambda r: claim_of(r, "loner") is not claim_of(r, "prod-db"),
    ),
    Scenario(
        "host ports: pods binding the same port never share a node",
        pods=pods(3, "hp", host_ports=[8080]),
        claims=[{"hp-0"}, {"hp-1"}, {"hp-2"}],
    ),
    Scenario(
        "a satisfiable preferred node affinity is honoured",
        pods=[pod("pref", preferred_terms=[(10, [expr(ZONE, "In", "zone-b")])])],
        check=lambda r: domain_of(r, "pref", ZONE) == "zone-b",
    ),
    Scenario(
        "an impossible preference is relaxed instead of failing the pod",
        pods=[pod("pref", preferred_terms=[(10, [expr(ARCH, "In", "s390x")])])],
        claims=[{"pref"}],
    ),
    Scenario(
        "impossible preferred anti-affinity is dropped, the satisfiable one kept",
        pods=pods(
            4,
            "n",
            labels={"app": "n"},
            preferred_terms=[(1, [expr(ZONE, "In", "zone-a")])],
            preferred_anti_affinity=[
                (10, term(ZONE, {"app": "n"})),
                (1, term(HOSTNAME, {"app": "n"})),
            ],
        ),
        claim_count=4,
        check=lambda r: set(zones_of(r, names("n", 4))) == {"zone-a"},
    ),
    Scenario(
        "ScheduleAnyway spreads are relaxed when they cannot be met",
        pods=[
            pod(
                "anyway",
                labels={"app": "x"},
                node_selector={ZONE: "zone-a"},
                spread=[
                    spread(ZONE, {"app": "x"}, when="ScheduleAnyway", nodeAffinityPolicy="Ignore")
                ],
            )
        ],
        nodes=[
            node("full", zone="zone-a", cpu=1, bound=pods(3, "old", cpu="1", labels={"app": "x"}))
        ],
        claims=[{"anyway"}],
    ),
    Scenario(
        "DoNotSchedule spreads are never relaxed",
        pods=[
            pod(
                "strict",
                labels={"app": "x"},
                node_selector={ZONE: "zone-a"},
                spread=[spread(ZONE, {"app": "x"}, nodeAffinityPolicy="Ignore")],
            )
        ],
        nodes=[
            node("full", zone="zone-a", cpu=1, bound=pods(3, "old", cpu="1", labels={"app": "x"}))
        ],
        claims=[],
        errors={"strict": "unsatisfiable topology spread on topology.kubernetes.io/zone"},
    ),
    Scenario(
        "PreferNoSchedule is avoided while possible, tolerated when needed",
        pods=[pod("soft"), pod("arm", node_selector={ARCH: "arm64"})],
        pools=[
            nodepool(
                "soft-tainted",
                [itype("a1", 2, 4, arch="arm64"), *standard_types()],
                weight=10,
                taints=[taint("spot", "PreferNoSchedule")],
            ),
            nodepool("plain", requirements=[expr(ARCH, "In", "amd64")]),
        ],
        check=lambda r: (
            (claim_of(r, "soft").nodepool, claim_of(r, "arm").nodepool) == ("plain", "soft-tainted")
        ),
    ),
    Scenario(
        "volume topology restricts the zone",
        pods=[
            Pod.from_dict(
                {"metadata": {"name": "db"}, "spec": {"containers": [{"name": "c"}]}},
                volume_requirements=[Requirements.from_labels({ZONE: "zone-c"})],
            )
        ],
        claims=[{"db"}],
        check=lambda r: domain_of(r, "db", ZONE) == "zone-c",
    ),
    Scenario(
        "capacity type: a spot requirement narrows to types sold as spot",
        pods=[pod("cheap", node_selector={CAPACITY_TYPE: "spot"})],
        pools=[
            nodepool(
                types=[
                    itype("od-only", 2, 4),
                    itype("both", 2, 8, capacity_types=("spot", "on-demand")),
                ]
            )
        ],
        check=lambda r: r.new_nodeclaims[0].instance_type_names == ["both"],
    ),
    Scenario(
        "an unavailable offering is skipped for the next cheapest type",
        pods=[pod("a", node_selector={ZONE: "zone-a"})],
        pools=[
            nodepool(
                types=[
                    itype("small", 2, 4, unavailable=[("zone-a", "on-demand")]),
                    itype("medium", 4, 16),
                ]
            )
        ],
        check=lambda r: r.new_nodeclaims[0].instance_type_names == ["medium"],
    ),
    Scenario(
        "extended resources (GPUs) count like any resource",
        pods=[pod("trainer", extra_requests={"nvidia.com/gpu": "1"})],
        pools=[
            nodepool(types=[*standard_types(), itype("gpu", 8, 32, extra={"nvidia.com/gpu": 1})])
        ],
        check=check_gpu,
    ),
    Scenario(
        "at most 600 instance types per NodeClaim, the cheapest",
        pods=[pod("p", cpu="500m")],
        pools=[nodepool(types=many_types())],
        check=check_truncation,
    ),
    Scenario(
        "minValues keeps enough distinct values among the instance types",
        pods=[pod("p")],
        pools=[
            nodepool(
                types=family_types(), requirements=[{**expr("family", "Exists"), "minValues": 3}]
            )
        ],
        check=check_min_values,
    ),
    Scenario(
        "minValues that cannot be met is a reason, not a silent launch",
        pods=[pod("p", node_selector={"family": "c5"})],
        pools=[
            nodepool(
                types=family_types(), requirements=[{**expr("family", "Exists"), "minValues": 3}]
            )
        ],
        claims=[],
        errors={"p": "minValues requirement is not met for label 'family'"},
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(scenario: Scenario) -> None:
    simulator = Simulator(scenario.pools, daemonsets=scenario.daemonsets, options=scenario.options)
    results = simulator.solve(scenario.pods, nodes=scenario.nodes, namespaces=scenario.namespaces)
    errors = {e.pod.name: e.reason for e in results.errors}
    for name, words in scenario.errors.items():
        assert name in errors, f"{name} was placed, expected an error"
        assert words in errors[name], errors[name]
    if scenario.claims is not None:
        got = sorted(sorted(p.name for p in c.pods) for c in results.new_nodeclaims)
        assert got == sorted(sorted(c) for c in scenario.claims)
        if not scenario.errors:
            assert not errors, errors
    if scenario.claim_count is not None:
        assert len(results.new_nodeclaims) == scenario.claim_count
    existing = {n.node: {p.name for p in n.pods} for n in results.existing_nodes}
    assert existing == scenario.existing
    if scenario.claims is None and not scenario.errors and scenario.claim_count is None:
        assert not errors, errors
    if scenario.check is not None:
        outcome = scenario.check(results)
        assert outcome is None or outcome is True, f"check failed for {scenario.name}"
