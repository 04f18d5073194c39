"""End to end: ``karpy explain`` on the local cluster names why each pending pod cannot
be hosted, and why a node is or is not a disruption candidate.

One cluster session sets the whole scene up (module-scoped): karpy runs (it keeps the
NodePools Ready, provisions what can be provisioned, marks NodeClaims Consolidatable)
with its disruption pass held back, so that the empty node stays a candidate instead of
being deleted. Pods are made to fail for one cause each -- taint, node selector, zone,
volume zone, NodePool limit, too large, zonal anti-affinity, missing PVC -- and the "no
NodePool" answer is taken before any NodePool exists. Explanations are read through a
read-only cluster view of the live cluster (what ``karpy explain`` opens); the command
itself is run once for a pod and once for a node.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from harness import karpy_operator
from kube import clean_up, connect, eventually, nodepool, pool_objects, ready_node_class

from karpy.controllers.settings import Settings
from karpy.runtime import Client, errors, kinds
from karpy.state import NODE_CLAIM, NODE_POOL
from karpy.tools.explain import (
    NodeExplanation,
    PodExplanation,
    explain_node_in,
    explain_pod_in,
)
from karpy.tools.view import LiveCluster, open_view

pytestmark = [pytest.mark.cluster]

NODE_CLASS = "explain-e2e"
SELECT = "karpy-e2e-explain"
ZONE = "topology.kubernetes.io/zone"
TAINTED, ZONAL, LIMITED, GENERAL, NODES = (
    "explain-tainted", "explain-zonal", "explain-limited", "explain-general", "explain-nodes")
POOLS = (TAINTED, ZONAL, LIMITED, GENERAL, NODES)
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


def pod(name: str, select: str, *, cpu: str = "100m", labels: dict[str, str] | None = None,
        extra_selector: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": name, **(labels or {})}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {SELECT: select, **(extra_selector or {})},
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                            "resources": {"requests": {"cpu": cpu}}}],
            **spec,
        },
    }


def anti_affinity(key: str, app_group: str) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": key, "labelSelector": {"matchLabels": {"group": app_group}}}]}}


def local_volume(name: str, namespace: str, claim: str, zone: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
            "local": {"path": "/mnt/karpy-e2e"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": ZONE, "operator": "In", "values": [zone]}]}]}},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "namespace": namespace, "name": claim},
        },
    }


def pools() -> list[dict[str, Any]]:
    tainted = nodepool(TAINTED, node_class=NODE_CLASS, labels={SELECT: "tainted"})
    tainted["spec"]["template"]["spec"]["taints"] = [
        {"key": "karpy-e2e/dedicated", "value": "batch", "effect": "NoSchedule"}]
    zonal = nodepool(ZONAL, node_class=NODE_CLASS, labels={SELECT: "zonal"},
                     requirements=[{"key": ZONE, "operator": "In", "values": ["test-zone-a"]}])
    limited = nodepool(LIMITED, node_class=NODE_CLASS, labels={SELECT: "limited"},
                       limits={"cpu": "0"})
    general = nodepool(GENERAL, node_class=NODE_CLASS, labels={SELECT: "general"})
    nodes = nodepool(NODES, node_class=NODE_CLASS, labels={SELECT: "nodes"})
    nodes["spec"]["disruption"] = {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                   "consolidateAfter": "0s"}
    return [tainted, zonal, limited, general, nodes]


@dataclass
class Scene:
    namespace: str
    kubeconfig: str
    pods: dict[str, PodExplanation] = field(default_factory=dict)
    nodes: dict[str, NodeExplanation] = field(default_factory=dict)
    node_names: dict[str, str] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)


CAUSES = ("taint", "selector", "zone", "volume-zone", "limit", "too-large",
          "anti-affinity", "missing-pvc")


async def unschedulable(client: Client, namespace: str, name: str) -> bool:
    obj = await client.get(kinds.POD, name, namespace=namespace)
    return any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
               for c in (obj.get("status") or {}).get("conditions") or ())


async def running_on(client: Client, namespace: str, name: str) -> str | None:
    obj = await client.get(kinds.POD, name, namespace=namespace)
    if (obj.get("status") or {}).get("phase") == "Running":
        return str(obj["spec"]["nodeName"])
    return None


def make_namespace(cluster: Any) -> str:
    name = f"t-explain-{secrets.token_hex(3)}"
    cluster.kubectl("create", "namespace", name)
    deadline = time.monotonic() + 30
    while not cluster.kubectl("get", "serviceaccount", "default", "-n", name,
                              "--ignore-not-found", "-o", "name").strip():
        assert time.monotonic() < deadline, f"namespace {name}: no default ServiceAccount"
        time.sleep(0.05)
    return name


@pytest.fixture(scope="module")
async def scene(cluster: Any, kwok_crd: None) -> AsyncIterator[Scene]:
    namespace = make_namespace(cluster)
    out = Scene(namespace, cluster.kubeconfig)
    volume = f"karpy-e2e-explain-{namespace}"[:63]
    live = LiveCluster(kubeconfig=cluster.kubeconfig)
    # Karpy provisions and keeps NodePools Ready; its disruption pass is held back so
    # that the empty node stays a candidate for explain to find.
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0,
                        disruption_poll_period=3600.0)
    async with connect(cluster) as client:
        await client.create(kinds.POD, pod("lonely", "general"), namespace=namespace)
        await eventually(lambda: unschedulable(client, namespace, "lonely"), timeout=60,
                         what="kube-scheduler to mark pod lonely Unschedulable")
        foreign = [p["metadata"]["name"] for p in await client.list(NODE_POOL)]
        if not foreign:
            async with open_view(live) as view:
                out.pods["no-nodepool"] = await explain_pod_in(view, f"{namespace}/lonely")
        # It would get a node once the NodePools exist: not needed any more.
        await client.delete(kinds.POD, "lonely", namespace=namespace)
        async with karpy_operator(cluster, settings=settings):
            try:
                await build(client, namespace, volume, out)
                yield out
            finally:
                forced = await tear_down(client, namespace, volume)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")
        assert forced == [], f"termination left these behind: {forced}"


async def build(client: Client, ns: str, volume: str, out: Scene) -> None:
    await ready_node_class(client, NODE_CLASS)
    for obj in pools():
        await client.create(NODE_POOL, obj)
    # Capacity that exists: a db pod in test-zone-a, and two nodes for explain node.
    await client.create(kinds.POD, pod("db-0", "zonal", labels={"group": "db"}), namespace=ns)
    keep = pod("keep", "nodes", labels={"group": "spread"},
               affinity=anti_affinity("kubernetes.io/hostname", "spread"))
    keep["metadata"]["annotations"] = {DO_NOT_DISRUPT: "true"}
    leave = pod("leave", "nodes", labels={"group": "spread"},
                affinity=anti_affinity("kubernetes.io/hostname", "spread"))
    for obj in (keep, leave):
        await client.create(kinds.POD, obj, namespace=ns)
    # One pod per cause.
    await client.create(kinds.PERSISTENT_VOLUME, local_volume(volume, ns, "data", "test-zone-b"))
    await client.create(kinds.PERSISTENT_VOLUME_CLAIM, {"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
        "storageClassName": "", "volumeName": volume}}, namespace=ns)

    async def bound() -> bool:
        pvc = await client.get(kinds.PERSISTENT_VOLUME_CLAIM, "data", namespace=ns)
        return (pvc.get("status") or {}).get("phase") == "Bound"

    await eventually(bound, timeout=60, what="the PV controller to bind the claim")
    causes = {
        "taint": pod("taint", "tainted"),
        "selector": pod("selector", "general", extra_selector={"karpy-e2e/team": "nobody"}),
        "zone": pod("zone", "zonal", extra_selector={ZONE: "test-zone-b"}),
        "volume-zone": pod("volume-zone", "zonal", volumes=[
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
        "limit": pod("limit", "limited"),
        "too-large": pod("too-large", "general", cpu="4000"),
        "anti-affinity": pod("anti-affinity", "zonal", labels={"group": "db"},
                             affinity=anti_affinity(ZONE, "db")),
        "missing-pvc": pod("missing-pvc", "general", volumes=[
            {"name": "data", "persistentVolumeClaim": {"claimName": "nowhere"}}]),
    }
    db_node = await eventually(lambda: running_on(client, ns, "db-0"), timeout=120,
                               what="pod db-0 Running")
    for obj in causes.values():
        await client.create(kinds.POD, obj, namespace=ns)
    for name in causes:
        await eventually(lambda n=name: unschedulable(client, ns, n), timeout=60,  # type: ignore[misc]
                         what=f"pod {name} Unschedulable")
    out.node_names["db"] = db_node
    out.node_names["keep"] = await eventually(lambda: running_on(client, ns, "keep"),
                                              timeout=120, what="pod keep Running")
    out.node_names["leave"] = await eventually(lambda: running_on(client, ns, "leave"),
                                               timeout=120, what="pod leave Running")
    await client.delete(kinds.POD, "leave", namespace=ns)

    async def consolidatable() -> bool:
        claims = await pool_objects(client, NODE_CLAIM, [NODES])
        claim = next((c for c in claims
                      if (c.get("status") or {}).get("nodeName") == out.node_names["leave"]), None)
        with contextlib.suppress(errors.NotFound):
            await client.get(kinds.POD, "leave", namespace=ns)
            return False
        return claim is not None and any(
            c["type"] == "Consolidatable" and c["status"] == "True"
            for c in (claim.get("status") or {}).get("conditions") or ())

    await eventually(consolidatable, timeout=90, what="the emptied node to be Consolidatable")
    async with open_view(LiveCluster(kubeconfig=out.kubeconfig)) as view:
        for name in causes:
            out.pods[name] = await explain_pod_in(view, f"{ns}/{name}")
        for which in ("keep", "leave"):
            out.nodes[which] = await explain_node_in(view, out.node_names[which])


async def tear_down(client: Client, ns: str, volume: str) -> list[str]:
    for obj in await client.list(kinds.POD, namespace=ns):
        with contextlib.suppress(errors.NotFound):
            await client.delete(kinds.POD, obj["metadata"]["name"], namespace=ns)
    with contextlib.suppress(errors.NotFound):
        await client.delete(kinds.PERSISTENT_VOLUME_CLAIM, "data", namespace=ns)
    with contextlib.suppress(errors.NotFound):
        await client.delete(kinds.PERSISTENT_VOLUME, volume)
    return await clean_up(client, ns, "no-deployment", list(POOLS), timeout=180)


def pool_reason(answer: PodExplanation, pool: str) -> Any:
    verdict = next(v for v in answer.nodepools if v.nodepool == pool)
    assert not verdict.fits, f"{answer.pod}: {pool} fits"
    return verdict.reasons[0]


def test_no_nodepool_at_all(scene: Scene) -> None:
    answer = scene.pods.get("no-nodepool")
    assert answer is not None, "NodePools of another test were left in the cluster"
    assert [r.code for r in answer.reasons] == ["no-nodepool"]
    assert answer.status == "pending"


def test_taint(scene: Scene) -> None:
    reason = pool_reason(scene.pods["taint"], TAINTED)
    assert reason.code == "taint"
    assert reason.details["taint"] == "karpy-e2e/dedicated=batch:NoSchedule"
    assert 'nodepool "explain-tainted": did not tolerate taint' in scene.pods["taint"].event


def test_node_selector(scene: Scene) -> None:
    reason = pool_reason(scene.pods["selector"], GENERAL)
    assert reason.code == "requirement"
    assert reason.details["key"] == "karpy-e2e/team"
    assert reason.details["pod"] == "karpy-e2e/team In [nobody]"


def test_zone(scene: Scene) -> None:
    reason = pool_reason(scene.pods["zone"], ZONAL)
    assert reason.code == "requirement"
    assert reason.details == {"key": ZONE, "pod": f"{ZONE} In [test-zone-b]",
                              "nodepool": f"{ZONE} In [test-zone-a]"}


def test_volume_zone(scene: Scene) -> None:
    reason = pool_reason(scene.pods["volume-zone"], ZONAL)
    assert reason.code == "volume-zone"
    assert reason.details["volume"] == [f"{ZONE} In [test-zone-b]"]
    assert reason.details["offered"] == ["test-zone-a"]


def test_nodepool_limit(scene: Scene) -> None:
    reason = pool_reason(scene.pods["limit"], LIMITED)
    assert reason.code == "limit"
    assert reason.details == {"resource": "cpu", "used": "0", "limit": "0"}


def test_too_large_names_the_largest_compatible_type(scene: Scene) -> None:
    reason = pool_reason(scene.pods["too-large"], GENERAL)
    assert reason.code == "resources"
    largest = reason.details["instanceType"]
    assert largest.endswith("-amd64-linux")  # the pool's requirements are honoured
    assert reason.details["lacking"]["cpu"]["requested"].startswith("4000")
    assert largest in reason.message  # named to the user, not only in the details
    # ... beside the scheduler's own words, as karpy's FailedScheduling event has them
    assert "no instance type had enough resources" in scene.pods["too-large"].event


def test_anti_affinity(scene: Scene) -> None:
    reason = pool_reason(scene.pods["anti-affinity"], ZONAL)
    assert reason.code == "topology"
    assert "anti-affinity" in reason.message and ZONE in reason.message


def test_missing_pvc(scene: Scene) -> None:
    answer = scene.pods["missing-pvc"]
    assert [r.code for r in answer.reasons] == ["missing-pvc"]
    assert f'persistentvolumeclaim "{scene.namespace}/nowhere"' in answer.reasons[0].message


def test_every_cause_is_distinct(scene: Scene) -> None:
    firsts = {pool_reason(scene.pods[c], p).code for c, p in (
        ("taint", TAINTED), ("selector", GENERAL), ("volume-zone", ZONAL), ("limit", LIMITED),
        ("too-large", GENERAL), ("anti-affinity", ZONAL))}
    firsts |= {scene.pods["missing-pvc"].reasons[0].code}
    firsts |= {scene.pods["no-nodepool"].reasons[0].code} if "no-nodepool" in scene.pods else set()
    assert len(firsts) >= 7


def test_explain_node_do_not_disrupt_blocks(scene: Scene) -> None:
    answer = scene.nodes["keep"]
    assert answer.candidate_for == []
    assert answer.blockers[0].message == (
        f'pod has "{DO_NOT_DISRUPT}" annotation (Pod={scene.namespace}/keep)')


def test_explain_node_empty_node_is_a_candidate(scene: Scene) -> None:
    answer = scene.nodes["leave"]
    assert "Empty" in answer.candidate_for, answer.summary
    empty = next(m for m in answer.methods if m.method == "Empty")
    assert empty.action["decision"] == "delete"
    assert answer.price is not None and answer.price > 0


def test_the_command_line(scene: Scene) -> None:
    karpy = [sys.executable, "-m", "karpy.cli", "explain"]
    done = subprocess.run(
        [*karpy, "pod", f"{scene.namespace}/taint", "--kubeconfig", scene.kubeconfig,
         "-o", "json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    [tainted] = [v for v in data["nodepools"] if v["nodepool"] == TAINTED]
    assert tainted["reasons"][0]["code"] == "taint"
    done = subprocess.run(
        [*karpy, "node", scene.node_names["keep"], "--kubeconfig", scene.kubeconfig],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert f"cannot be disrupted: pod has \"{DO_NOT_DISRUPT}\"" in done.stdout
