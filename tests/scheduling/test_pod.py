"""Parsing pods, nodes and NodePools from API dicts (parse once at the edge)."""

from __future__ import annotations

from typing import Any

import pytest
from scheduling_support import GIB, HOSTNAME, ZONE, pod, pod_dict

from karpy.scheduling import ExistingNode, NodePoolTemplate, Pod
from karpy.scheduling.pod import pod_limits, pod_requests, pod_resources


def container(cpu: str, memory: str = "0", **extra: Any) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}, **extra}


@pytest.mark.parametrize(
    ("spec", "cpu"),
    [
        # plain containers add up
        ({"containers": [container("1"), container("500m")]}, 1500),
        # an init container bigger than the app wins
        ({"containers": [container("1")], "initContainers": [container("3")]}, 3000),
        # init containers run one at a time: the largest counts
        (
            {"containers": [container("1")], "initContainers": [container("2"), container("2")]},
            2000,
        ),
        # a sidecar runs beside the app and beside later init containers
        (
            {
                "containers": [container("1")],
                "initContainers": [container("500m", restartPolicy="Always"), container("2")],
            },
            2500,
        ),
        # sidecar + app exceed the init container
        (
            {
                "containers": [container("2")],
                "initContainers": [container("1", restartPolicy="Always"), container("2")],
            },
            3000,
        ),
        # pod overhead is added on top
        ({"containers": [container("1")], "overhead": {"cpu": "250m"}}, 1250),
        # pod-level requests replace the container sum
        ({"containers": [container("1")], "resources": {"requests": {"cpu": "4"}}}, 4000),
    ],
)
def test_requests_follow_kube_scheduler(spec: dict[str, Any], cpu: int) -> None:
    requests = pod_requests(spec)
    assert requests["cpu"] == cpu
    assert requests["pods"] == 1


def test_limits_stand_in_for_missing_requests_and_gpus_count() -> None:
    spec = {
        "containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2", "memory": "1Gi"}}}
        ]
    }
    assert pod_requests(spec) == {"nvidia.com/gpu": 2, "memory": GIB, "pods": 1}


def limited(cpu: str, **extra: Any) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": cpu}},
            **extra}


def test_limits_are_summed_as_kubernetes_sums_them() -> None:
    """What karpenter_nodes_total_pod_limits adds up: container limits (sidecars add,
    init containers peak), overhead only on limited resources, no pod count."""
    spec = {
        "containers": [limited("1"), limited("500m"), container("2", "1Gi")],
        "initContainers": [limited("250m", restartPolicy="Always"), limited("3")],
        "overhead": {"cpu": "100m", "memory": "64Mi"},
    }
    # 1 + 0.5 + 0.25 (sidecar) = 1.75 < 3 + 0.25 (init beside the sidecar); + overhead
    assert pod_limits(spec) == {"cpu": 3350}
    assert pod_limits({"containers": [container("1")]}) == {}
    assert pod_limits({"containers": [limited("1")],
                       "resources": {"limits": {"cpu": "2"}}}) == {"cpu": 2000}
    assert Pod.from_dict({"metadata": {"name": "p"}, "spec": spec}).limits == {"cpu": 3350}


def test_affinity_spread_ports_and_tolerations_are_parsed() -> None:
    raw = pod_dict(
        "web",
        labels={"app": "web", "version": "v2"},
        node_selector={"disk": "ssd"},
        required_terms=[[{"key": ZONE, "operator": "In", "values": ["a"]}]],
        preferred_terms=[(1, [{"key": "x", "operator": "Exists"}]), (50, [])],
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        spread=[
            {
                "maxSkew": 2,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["version"],
                "minDomains": 3,
            }
        ],
        anti_affinity=[
            {
                "labelSelector": {"matchLabels": {"app": "web"}},
                "topologyKey": HOSTNAME,
                "namespaceSelector": {"matchLabels": {"env": "prod"}},
            }
        ],
        preferred_affinity=[(5, {"labelSelector": None, "topologyKey": ZONE})],
        host_ports=[8080],
    )
    parsed = Pod.from_dict(raw)
    assert parsed.key == "default/web"
    assert parsed.node_selector.labels() == {"disk": "ssd"}
    assert str(parsed.required_node_terms[0]) == f"{ZONE} In [a]"
    assert [w for w, _ in parsed.preferred_node_terms] == [50, 1]  # heaviest first
    assert parsed.tolerations[0].key == "gpu"
    constraint = parsed.spread_constraints[0]
    assert not constraint.required
    assert constraint.min_domains == 3
    assert constraint.selector.matches({"app": "web", "version": "v2"})
    assert not constraint.selector.matches({"app": "web", "version": "v1"})  # matchLabelKeys
    term = parsed.pod_anti_affinity[0]
    assert term.namespaces == frozenset() and term.namespace_selector is not None
    assert not parsed.preferred_pod_affinity[0].selector.matches({})  # null selector
    assert [str(p) for p in parsed.host_ports] == ["0.0.0.0:8080/TCP"]
    assert parsed.raw is raw


def test_identical_pods_share_a_signature_and_differences_split_it() -> None:
    a = pod("a", labels={"app": "x"}, cpu="1")
    b = pod("b", labels={"app": "x"}, cpu="2")  # requests do not matter
    c = pod("c", labels={"app": "y"}, cpu="1")  # labels do: others select on them
    assert a.signature == b.signature
    assert a.signature != c.signature


def test_daemonset_template_becomes_a_daemon_pod() -> None:
    ds = {
        "metadata": {"name": "fluentd", "namespace": "kube-system"},
        "spec": {"template": {"spec": {"containers": [container("100m", "200Mi")]}}},
    }
    daemon = Pod.from_daemonset_dict(ds)
    assert daemon.is_daemon and daemon.key == "kube-system/fluentd"
    assert daemon.requests["cpu"] == 100


def test_node_and_nodeclaim_views() -> None:
    bound = pod("bound", cpu="1")
    node = ExistingNode.from_node_dict(
        {
            "metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        },
        [bound],
    )
    # managed, not initialized: the ephemeral taint will go away, so it does not count
    assert not node.initialized
    assert node.effective_taints() == ()
    assert node.hostname == "n1" and node.nodepool == "default"
    assert node.allocatable["cpu"] == 4000
    claim = ExistingNode.from_nodeclaim_dict(
        {
            "metadata": {"name": "default-abc", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {
                "requirements": [
                    {"key": ZONE, "operator": "In", "values": ["zone-a"]},
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["a", "b"],
                    },
                ],
                "startupTaints": [{"key": "cni", "effect": "NoSchedule"}],
                "taints": [{"key": "cni", "effect": "NoSchedule"}],
            },
            "status": {"allocatable": {"cpu": "2"}},
        }
    )
    assert claim.labels[ZONE] == "zone-a"
    assert "node.kubernetes.io/instance-type" not in claim.labels
    assert claim.effective_taints() == ()  # startup taints are ignored


def test_nodepool_from_dict() -> None:
    pool = NodePoolTemplate.from_nodepool_dict(
        {
            "metadata": {"name": "gpu"},
            "spec": {
                "weight": 10,
                "limits": {"cpu": "100", "memory": "400Gi"},
                "template": {
                    "metadata": {"labels": {"team": "ml"}},
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "d",
                        },
                        "requirements": [
                            {
                                "key": "karpenter.sh/capacity-type",
                                "operator": "In",
                                "values": ["spot"],
                            }
                        ],
                        "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
                    },
                },
            },
        },
        [],
    )
    assert pool.weight == 10
    assert pool.limits == {"cpu": 100_000, "memory": 400 * GIB}
    assert pool.labels["karpenter.sh/nodepool"] == "gpu"
    assert pool.labels["karpenter.k8s.aws/ec2nodeclass"] == "d"
    assert pool.requirements.labels()["team"] == "ml"
    assert str(pool.taints[0]) == "gpu=true:NoSchedule"


def test_only_an_apps_v1_daemonset_makes_a_daemon_pod() -> None:
    # Karpenter's IsOwnedByDaemonSet: group and kind; OpenKruise's Advanced DaemonSet
    # (apps.kruise.io) places pods through kube-scheduler like any other workload.
    def owned_by(api_version: str) -> Pod:
        return Pod.from_dict({
            "metadata": {"name": "agent", "namespace": "kube-system", "ownerReferences": [
                {"apiVersion": api_version, "kind": "DaemonSet", "name": "agent",
                 "uid": "u", "controller": True}]},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        })  # fmt: skip

    assert owned_by("apps/v1").is_daemon
    assert not owned_by("apps.kruise.io/v1alpha1").is_daemon


def _resized(spec_cpu: str, running_cpu: str, allocated_cpu: str | None,
             reason: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = {"containers": [{"name": "app", "resources": {"requests": {"cpu": spec_cpu}}}]}
    status: dict[str, Any] = {"containerStatuses": [{
        "name": "app", "resources": {"requests": {"cpu": running_cpu}},
        **({"allocatedResources": {"cpu": allocated_cpu}} if allocated_cpu else {})}]}
    if reason:
        status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": reason}]
    return spec, status


@pytest.mark.parametrize(("spec_cpu", "running", "allocated", "reason", "cpu"), [
    ("1", "3", "3", None, 3000),          # shrinking: the scheduler keeps the larger
    ("3", "1", "1", None, 3000),          # growing: the spec already counts
    ("3", "1", "1", "Deferred", 3000),    # deferred: still counted at the spec
    ("3", "1", "1", "Infeasible", 1000),  # infeasible: only what runs and is allocated
    ("1", "1", "2", None, 2000),          # allocated but not yet running
])
def test_a_resizing_pod_counts_as_kube_scheduler_counts_it(
    spec_cpu: str, running: str, allocated: str, reason: str | None, cpu: int
) -> None:
    spec, status = _resized(spec_cpu, running, allocated, reason)
    assert pod_resources(spec, status)[0]["cpu"] == cpu
    assert Pod.from_dict({"metadata": {"name": "p"}, "spec": spec, "status": status}
                         ).requests["cpu"] == cpu


def test_a_status_without_resources_leaves_the_spec_alone() -> None:
    spec, _ = _resized("1", "3", "3")
    status = {"containerStatuses": [{"name": "app", "allocatedResources": {"cpu": "3"}}],
              "conditions": [{"type": "PodResizePending", "reason": "Infeasible"}]}
    assert pod_resources(spec, status)[0]["cpu"] == 1000
    assert pod_requests(spec)["cpu"] == 1000
