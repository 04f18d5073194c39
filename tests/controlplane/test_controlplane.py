"""End-to-end checks of the local control plane itself (issue 2, acceptance 1-3)."""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from collections.abc import Callable
from typing import Any, TypeVar

import yaml
from controlplane.crdsets import default_manifests
from controlplane.fixtures import BIN, Cluster

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], *, timeout: float, what: str) -> T:
    """Poll ``probe`` until it returns something other than None (or fail saying what)."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


async def test_readyz_answers_ok(api_client: Any) -> None:
    body = await api_client.call_api(
        "/readyz",
        "GET",
        auth_settings=["BearerToken"],
        response_types_map={200: "str"},
        _return_http_data_only=True,
    )
    assert body == "ok"


def test_kubectl_get_ns_with_the_written_kubeconfig(cluster: Cluster) -> None:
    # The kubectl wrapper a user runs, pointed at the kubeconfig the cluster wrote.
    out = subprocess.run(
        [str(BIN / "kubectl"), "--kubeconfig", cluster.kubeconfig, "get", "ns", "-o", "name"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert {"namespace/default", "namespace/kube-system", "namespace/kube-node-lease"} <= set(out)


def _pods(cluster: Cluster, namespace: str, app: str) -> list[dict[str, Any]]:
    doc = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", f"app={app}")
    return list(doc["items"])


def _deployment(name: str, replicas: int, node_label: str) -> str:
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        # Only the node this test creates carries the label, so the
                        # pods wait for it whatever else shares the cluster.
                        "nodeSelector": {"karpy.test/node": node_label},
                        "containers": [
                            {
                                "name": "pause",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                            }
                        ],
                    },
                },
            },
        }
    )


def _kwok_node(name: str, node_label: str) -> str:
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {"karpy.test/node": node_label, "kubernetes.io/hostname": name},
            },
            "status": {"capacity": capacity, "allocatable": capacity},
        }
    )


def _node_ready(cluster: Cluster, name: str) -> bool:
    node = cluster.kubectl_json("get", "node", name)
    conditions = node.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_deployment_pods_are_scheduled_onto_a_kwok_node_and_run(
    cluster: Cluster, namespace: str
) -> None:
    label = secrets.token_hex(4)
    app = "web"
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_deployment(app, 1, label))
    cluster.kubectl("scale", "-n", namespace, f"deployment/{app}", "--replicas=3")

    # kube-controller-manager: the Deployment scaled to 3 makes 3 Pods.
    pods = eventually(
        lambda: p if len(p := _pods(cluster, namespace, app)) == 3 else None,
        timeout=30,
        what="3 pods of the deployment",
    )
    # kube-scheduler: no node fits yet, so they are Pending and marked unschedulable.
    assert all(not p["spec"].get("nodeName") for p in pods)
    eventually(
        lambda: (
            all(
                any(
                    c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                    for c in p.get("status", {}).get("conditions", [])
                )
                for p in _pods(cluster, namespace, app)
            )
            or None
        ),
        timeout=30,
        what="the scheduler to report the pods unschedulable",
    )

    node = f"kwok-{label}"
    cluster.kubectl("create", "-f", "-", input=_kwok_node(node, label))
    try:
        # kwok: the annotated node becomes Ready.
        eventually(lambda: _node_ready(cluster, node) or None, timeout=30, what=f"{node} Ready")

        # The scheduler binds the pods to it and kwok runs them.
        def all_running() -> list[dict[str, Any]] | None:
            pods = _pods(cluster, namespace, app)
            ok = len(pods) == 3 and all(
                p["spec"].get("nodeName") == node and p["status"].get("phase") == "Running"
                for p in pods
            )
            return pods if ok else None

        running = eventually(all_running, timeout=60, what="3 pods Running on the kwok node")
        assert {p["spec"]["nodeName"] for p in running} == {node}
        assert all(p["status"].get("podIP") for p in running)

        # Deleting them completes: kwok plays the kubelet's part of pod termination.
        cluster.kubectl("delete", "-n", namespace, f"deployment/{app}", "--wait=false")
        eventually(
            lambda: not _pods(cluster, namespace, app) or None,
            timeout=60,
            what="the pods on the kwok node to be deleted",
        )
    finally:
        cluster.kubectl("delete", "node", node, "--ignore-not-found", "--wait=false")


def test_api_server_restart_keeps_server_and_credentials(cluster: Cluster, namespace: str) -> None:
    before = cluster.pid("apiserver")
    cluster.kubectl("create", "configmap", "before", "-n", namespace)

    cluster.restart_apiserver()

    assert cluster.pid("apiserver") != before
    # Same URL, same kubeconfig, data kept (etcd lives in the supervisor).
    names = cluster.kubectl("get", "configmaps", "-n", namespace, "-o", "name").split()
    assert "configmap/before" in names


def test_every_crd_in_the_repository_is_established(cluster: Cluster) -> None:
    manifests = default_manifests()
    kinds = {m.name for m in manifests}
    assert {"karpenter.sh_nodepools.yaml", "karpenter.k8s.aws_ec2nodeclasses.yaml"} <= kinds, (
        "crds/ holds the CRDs the fixture installs"
    )
    for manifest in manifests:
        for doc in yaml.safe_load_all(manifest.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            crd = cluster.kubectl_json("get", "crd", doc["metadata"]["name"])
            conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
            assert conditions.get("Established") == "True", manifest.name


def test_a_pod_can_be_created_in_the_namespace_at_once(cluster: Cluster, namespace: str) -> None:
    # The namespace fixture hands out a namespace whose default ServiceAccount exists,
    # so a bare Pod is admitted on the first try.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "first"},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]},
    }
    cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(pod))
    created = cluster.kubectl_json("get", "pod", "first", "-n", namespace)
    assert created["spec"]["serviceAccountName"] == "default"
