"""The simulator's plans, checked against the real kube-scheduler.

For each scenario the simulator plans NodeClaims; each plan becomes a kwok Node (the
cheapest instance type it lists, in the zone and capacity type of that type's cheapest
compatible offering, with the NodePool's labels and taints). Then the pods are created
and the real kube-scheduler places them: every pod must bind, and the spread, affinity,
anti-affinity and host-port rules must hold on where they actually landed.

Isolation on a shared cluster: every scenario's nodes carry a scenario label and a
taint; its pods select the label and tolerate the taint, and the simulator sees both
(as a NodePool label and taint), so plan and reality have the same constraints.
"""

from __future__ import annotations

import json
import secrets
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from scheduling_support import (
    HOSTNAME,
    ZONE,
    expr,
    itype,
    nodepool,
    pod_dict,
    spread,
    taint,
    term,
    toleration,
)

from karpy.apis.labels import LABEL_ARCH, LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_OS
from karpy.scheduling import ExistingNode, InstanceType, NodeClaimPlan, Pod, Results, Simulator
from karpy.scheduling import resources as res
from karpy.scheduling.taints import untolerated

if TYPE_CHECKING:
    from controlplane.fixtures import Cluster

pytestmark = pytest.mark.cluster

SCENARIO_LABEL = "karpy.test/crosscheck"
ISOLATION_TAINT = {"key": "karpy.test/crosscheck", "effect": "NoSchedule"}
BIND_TIMEOUT = 90.0


def catalog() -> list[InstanceType]:
    return [
        itype("c2", 2, 4, zones=("zone-a", "zone-b", "zone-c")),
        itype("c4", 4, 8, zones=("zone-a", "zone-b", "zone-c")),
        itype("c8", 8, 16, zones=("zone-a", "zone-b", "zone-c")),
    ]


@dataclass
class Case:
    """One scenario: pod dicts (without namespace), NodePool options, existing nodes."""

    name: str
    pods: Callable[[], list[dict[str, Any]]]
    pool_taints: Sequence[dict[str, str]] = ()
    pool_requirements: Sequence[dict[str, Any]] = ()
    existing: Callable[[], list[tuple[dict[str, Any], list[dict[str, Any]]]]] | None = None
    expect_nodes: int | None = None
    extra_check: Callable[[dict[str, dict[str, Any]], dict[str, dict[str, str]]], None] | None = (
        None
    )
    types: Callable[[], list[InstanceType]] = field(default=catalog)


def replicas(count: int, prefix: str, **kwargs: Any) -> list[dict[str, Any]]:
    return [pod_dict(f"{prefix}-{i}", **kwargs) for i in range(count)]


def existing_zone_a_node() -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    bound = replicas(2, "old", cpu="500m", labels={"app": "s"})
    node = {"name": "old", "zone": "zone-a", "cpu": "4", "memory": "8Gi"}
    return [(node, bound)]


def all_distinct_nodes(pods: dict[str, dict[str, Any]], _: dict[str, dict[str, str]]) -> None:
    hosts = [p["spec"]["nodeName"] for p in pods.values()]
    assert len(set(hosts)) == len(hosts)


def web_with_cache(pods: dict[str, dict[str, Any]], _: dict[str, dict[str, str]]) -> None:
    cache = pods["cache-0"]["spec"]["nodeName"]
    assert all(p["spec"]["nodeName"] == cache for n, p in pods.items() if n.startswith("web"))


CASES = [
    Case(
        "zone spread, maxSkew 1",
        lambda: replicas(6, "s", cpu="1", labels={"app": "s"}, spread=[spread(ZONE, {"app": "s"})]),
    ),
    Case(
        "hostname spread, maxSkew 1",
        lambda: replicas(
            4, "h", cpu="500m", labels={"app": "h"}, spread=[spread(HOSTNAME, {"app": "h"})]
        ),
        expect_nodes=4,
    ),
    Case(
        "hostname anti-affinity",
        lambda: replicas(
            4, "a", cpu="500m", labels={"app": "a"}, anti_affinity=[term(HOSTNAME, {"app": "a"})]
        ),
        expect_nodes=4,
        extra_check=all_distinct_nodes,
    ),
    Case(
        "zone anti-affinity",
        lambda: replicas(
            3, "z", cpu="500m", labels={"app": "z"}, anti_affinity=[term(ZONE, {"app": "z"})]
        ),
        expect_nodes=3,
    ),
    Case(
        "zone self-affinity across several nodes",
        lambda: replicas(5, "f", cpu="3", labels={"app": "f"}, affinity=[term(ZONE, {"app": "f"})]),
    ),
    Case(
        "hostname affinity to another pod",
        lambda: [
            *replicas(3, "web", cpu="1", affinity=[term(HOSTNAME, {"app": "cache"})]),
            pod_dict("cache-0", cpu="500m", labels={"app": "cache"}),
        ],
        expect_nodes=1,
        extra_check=web_with_cache,
    ),
    Case(
        "tainted NodePool, tolerating pods",
        lambda: replicas(3, "t", cpu="1500m", tolerations=[toleration("gpu")]),
        pool_taints=[taint("gpu", value="true")],
    ),
    Case(
        "host ports",
        lambda: replicas(3, "hp", cpu="250m", host_ports=[9100]),
        expect_nodes=3,
        extra_check=all_distinct_nodes,
    ),
    Case(
        "zone spread plus hostname anti-affinity",
        lambda: replicas(
            6,
            "sa",
            cpu="500m",
            labels={"app": "sa"},
            spread=[spread(ZONE, {"app": "sa"})],
            anti_affinity=[term(HOSTNAME, {"app": "sa"})],
        ),
        expect_nodes=6,
    ),
    Case(
        "packing identical pods onto few nodes",
        lambda: replicas(12, "pk", cpu="1", memory="1Gi"),
    ),
    Case(
        "impossible preferred zone anti-affinity is relaxed",
        lambda: replicas(
            4,
            "pr",
            cpu="500m",
            labels={"app": "pr"},
            preferred_anti_affinity=[
                (10, term(ZONE, {"app": "pr"})),
                (1, term(HOSTNAME, {"app": "pr"})),
            ],
        ),
        pool_requirements=[expr(ZONE, "In", "zone-a", "zone-b")],
        # the plan honours the hostname preference (one node each); kube-scheduler
        # treats preferences as scores only, so it may still pair two of them up
        expect_nodes=4,
    ),
    Case(
        "zone spread counts pods already running",
        lambda: replicas(
            4, "s", cpu="500m", labels={"app": "s"}, spread=[spread(ZONE, {"app": "s"})]
        ),
        existing=existing_zone_a_node,
    ),
]


def isolate(raw: dict[str, Any], namespace: str, scenario: str) -> dict[str, Any]:
    """Put a pod in the test namespace, on this scenario's nodes only."""
    raw = {"apiVersion": "v1", "kind": "Pod", **json.loads(json.dumps(raw))}
    raw["metadata"]["namespace"] = namespace
    raw["metadata"].pop("uid", None)
    spec = raw["spec"]
    spec.setdefault("nodeSelector", {})[SCENARIO_LABEL] = scenario
    spec.setdefault("tolerations", []).append({**ISOLATION_TAINT, "operator": "Exists"})
    spec["terminationGracePeriodSeconds"] = 0
    return raw


def offering_for(plan: NodeClaimPlan) -> tuple[InstanceType, str, str]:
    """What a provider would launch: the cheapest type and its cheapest offering."""
    instance_type = plan.instance_types[0]
    choices = sorted(
        (o.price, o.zone, o.capacity_type)
        for o in instance_type.offerings
        if o.available and plan.requirements.overlaps(o.requirements)
    )
    _, zone, capacity_type = choices[0]
    return instance_type, zone, capacity_type


def node_manifest(
    name: str, labels: dict[str, str], taints: list[dict[str, str]], allocatable: dict[str, int]
) -> dict[str, Any]:
    quantities = res.format_resource_list(allocatable)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {**labels, HOSTNAME: name},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": taints},
        "status": {"allocatable": quantities, "capacity": quantities},
    }


def plan_nodes(results: Results, scenario: str) -> list[dict[str, Any]]:
    nodes = []
    for index, plan in enumerate(results.new_nodeclaims):
        instance_type, zone, capacity_type = offering_for(plan)
        labels = {k: v for k, v in plan.requirements.labels().items() if k != HOSTNAME}
        labels.update(plan.labels)
        labels.update(
            {
                ZONE: zone,
                LABEL_CAPACITY_TYPE: capacity_type,
                LABEL_INSTANCE_TYPE: instance_type.name,
                LABEL_ARCH: instance_type.requirements[LABEL_ARCH].single() or "amd64",
                LABEL_OS: "linux",
            }
        )
        taints = [t.to_dict() for t in plan.taints]
        nodes.append(
            node_manifest(f"{scenario}-n{index}", labels, taints, dict(instance_type.allocatable))
        )
    return nodes


def apply(cluster: Cluster, objects: list[dict[str, Any]]) -> None:
    if objects:
        body = {"apiVersion": "v1", "kind": "List", "items": objects}
        cluster.kubectl("create", "-f", "-", input=json.dumps(body))


def wait_bound(cluster: Cluster, namespace: str, names: set[str]) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + BIND_TIMEOUT
    while True:
        listed = cluster.kubectl_json("get", "pods", "-n", namespace, "-o", "json")["items"]
        pods = {p["metadata"]["name"]: p for p in listed if p["metadata"]["name"] in names}
        pending = {n: p for n, p in pods.items() if not p["spec"].get("nodeName")}
        if len(pods) == len(names) and not pending:
            return pods
        if time.monotonic() > deadline:
            reasons = {
                n: [c.get("message", "") for c in (p.get("status") or {}).get("conditions") or ()]
                for n, p in pending.items()
            }
            raise AssertionError(f"pods still Pending after {BIND_TIMEOUT}s: {reasons}")
        time.sleep(0.5)


def check_rules(
    parsed: list[Pod],
    pods: dict[str, dict[str, Any]],
    node_labels: dict[str, dict[str, str]],
    scheduled_before: list[tuple[str, dict[str, str]]],
) -> None:
    """Spread, affinity, anti-affinity and host ports on where pods actually landed."""
    where = {p.name: node_labels[pods[p.name]["spec"]["nodeName"]] for p in parsed}
    everyone = [(p.labels, where[p.name]) for p in parsed]
    everyone += [(labels, node_labels[node]) for node, labels in scheduled_before]
    for p in parsed:
        mine = where[p.name]
        for constraint in p.spread_constraints:
            key = constraint.topology_key
            counts = Counter({labels[key]: 0 for labels in node_labels.values() if key in labels})
            for labels, node in everyone:
                if constraint.selector.matches(labels) and key in node:
                    counts[node[key]] += 1
            skew = max(counts.values()) - min(counts.values())
            assert skew <= constraint.max_skew, (p.name, constraint, dict(counts))
        for anti in p.pod_anti_affinity:
            same = [
                labels
                for labels, node in everyone
                if node.get(anti.topology_key) == mine.get(anti.topology_key)
                and anti.selector.matches(labels)
            ]
            # the pod itself may match its own selector; nobody else may
            assert len(same) <= (1 if anti.selector.matches(p.labels) else 0), (p.name, anti)
        for affinity in p.pod_affinity:
            assert any(
                node.get(affinity.topology_key) == mine.get(affinity.topology_key)
                and affinity.selector.matches(labels)
                for labels, node in everyone
            ), (p.name, affinity)
    ports: dict[str, list[int]] = defaultdict(list)
    for p in parsed:
        for port in p.host_ports:
            ports[pods[p.name]["spec"]["nodeName"]].append(port.port)
    assert all(len(v) == len(set(v)) for v in ports.values()), ports


@pytest.fixture
def scenario_nodes(cluster: Cluster) -> Iterator[str]:
    """A unique scenario id; its nodes are deleted afterwards."""
    scenario = f"xc-{secrets.token_hex(4)}"
    yield scenario
    cluster.kubectl("delete", "nodes", "-l", f"{SCENARIO_LABEL}={scenario}", "--wait=false")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kube_scheduler_binds_every_planned_pod(
    case: Case, cluster: Cluster, namespace: str, scenario_nodes: str
) -> None:
    scenario = scenario_nodes
    raw_pods = [isolate(p, namespace, scenario) for p in case.pods()]
    pool = nodepool(
        "crosscheck",
        case.types(),
        labels={SCENARIO_LABEL: scenario},
        taints=[ISOLATION_TAINT, *case.pool_taints],
        requirements=list(case.pool_requirements),
    )
    existing_nodes: list[ExistingNode] = []
    existing_manifests: list[dict[str, Any]] = []
    bound_pods: list[dict[str, Any]] = []
    scheduled_before: list[tuple[str, dict[str, str]]] = []
    for spec, bound in case.existing() if case.existing else []:
        name = f"{scenario}-{spec['name']}"
        labels = {ZONE: spec["zone"], SCENARIO_LABEL: scenario}
        allocatable = res.parse_resource_list(
            {"cpu": spec["cpu"], "memory": spec["memory"], "pods": 110}
        )
        manifest = node_manifest(name, labels, [ISOLATION_TAINT], allocatable)
        existing_manifests.append(manifest)
        placed = []
        for raw in bound:
            raw = isolate(raw, namespace, scenario)
            raw["spec"]["nodeName"] = name
            bound_pods.append(raw)
            placed.append(Pod.from_dict(raw))
            scheduled_before.append((name, raw["metadata"]["labels"]))
        existing_nodes.append(ExistingNode.from_node_dict(manifest, placed))

    parsed = [Pod.from_dict(p) for p in raw_pods]
    results = Simulator([pool]).solve(parsed, nodes=existing_nodes)
    assert not results.errors, [str(e) for e in results.errors]
    if case.expect_nodes is not None:
        assert len(results.new_nodeclaims) == case.expect_nodes

    nodes = existing_manifests + plan_nodes(results, scenario)
    apply(cluster, nodes)
    apply(cluster, bound_pods)
    # largest first, as the simulator placed them
    ordered = sorted(raw_pods, key=lambda p: -Pod.from_dict(p).requests.get("cpu", 0))
    apply(cluster, ordered)
    pods = wait_bound(cluster, namespace, {p.name for p in parsed})

    node_labels = {
        n["metadata"]["name"]: n["metadata"]["labels"]
        for n in cluster.kubectl_json(
            "get", "nodes", "-l", f"{SCENARIO_LABEL}={scenario}", "-o", "json"
        )["items"]
    }
    for p in parsed:
        node_name = pods[p.name]["spec"]["nodeName"]
        assert node_name in node_labels, f"{p.name} landed outside the scenario on {node_name}"
        manifest = next(n for n in nodes if n["metadata"]["name"] == node_name)
        node_taints = [taint_of(t) for t in manifest["spec"]["taints"]]
        assert untolerated(node_taints, p.tolerations, prefer=False) is None
    check_rules(parsed, pods, node_labels, scheduled_before)
    if case.extra_check is not None:
        case.extra_check(pods, node_labels)


def taint_of(raw: dict[str, str]) -> Any:
    from karpy.scheduling import NodeTaint

    return NodeTaint.from_dict(raw)
