"""The finalizer flow: deleting a Node or a NodeClaim ends with both gone, the pods
evicted in Karpenter's order, the instance deleted and the finalizers removed."""

from __future__ import annotations

import logging

import pytest
from controllers.termination import factories as f
from controllers.termination.rigging import Rig

from karpy.apis.annotations import ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP
from karpy.apis.taints import TAINT_DISRUPTED
from karpy.runtime import Request, Result, kinds
from karpy.state.kinds import NODE_CLAIM

PID = "fake://node-a"


def seed(rig: Rig, *, tgp: str | None = None) -> None:
    nodeclaim = f.nodeclaim("default-abc", provider_id=PID, node_name="node-a",
                            termination_grace_period=tgp)
    rig.kube.add(NODE_CLAIM, nodeclaim)
    rig.kube.add(kinds.NODE, f.node("node-a", provider_id=PID))
    rig.launch(nodeclaim)


def conditions(rig: Rig, name: str = "default-abc") -> dict[str, tuple[str, str]]:
    stored = rig.kube.peek(NODE_CLAIM, name)
    assert stored is not None
    return {c["type"]: (c["status"], c.get("reason", "")) for c in stored["status"]["conditions"]}


async def test_deleting_a_node_evicts_its_pods_in_order_and_gives_the_machine_back(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    seed(rig)
    kube = rig.kube
    kube.add(kinds.POD, f.pod("web-1", node_name="node-a"))
    kube.add(kinds.POD, f.pod("dns-1", node_name="node-a",
                              priority_class="system-cluster-critical"))
    kube.add(kinds.POD, f.pod("logs-1", node_name="node-a", owner=("apps/v1", "DaemonSet")))
    kube.add(kinds.POD, f.pod("cni-1", node_name="node-a", owner=("apps/v1", "DaemonSet"),
                              priority_class="system-node-critical"))
    kube.add(kinds.POD, f.pod("static-1", node_name="node-a", owner=("v1", "Node")))
    kube.add(kinds.POD, f.pod("stays-1", node_name="node-a", tolerations=[
        {"key": TAINT_DISRUPTED, "operator": "Exists"}]))
    kube.add(kinds.POD, f.pod("job-1", node_name="node-a", phase="Succeeded"))
    caplog.set_level(logging.INFO)

    await kube.delete(kinds.NODE, "node-a")  # kubectl delete node node-a
    evicted: list[str] = []
    result = Result()
    for _ in range(10):
        result = await rig.node.reconcile(Request("", "node-a"))
        if result.requeue_after != 1.0:
            break
        evicted += [r.name for r in rig.queued]
        await rig.evict_queued()

    # One tier at a time: non-critical, non-critical DaemonSet, critical, critical DaemonSet.
    assert evicted == ["web-1", "logs-1", "dns-1", "cni-1"]
    # What never had to leave stayed: the mirror pod, the tolerating pod, the finished job.
    assert {p["metadata"]["name"] for p in kube.objects(kinds.POD)} == {
        "static-1", "stays-1", "job-1"}
    node = kube.peek(kinds.NODE, "node-a")
    assert node is not None
    assert {"key": TAINT_DISRUPTED, "effect": "NoSchedule"} in node["spec"]["taints"]
    assert rig.recorder.reasons("web-1") == ["Evicted"]
    assert next(e.message for e in rig.recorder.events if e.name == "node-a") == (
        "Failed to drain node, 4 pods are waiting to be evicted")
    # The user deleted the Node, so its NodeClaim is being deleted too.
    nodeclaim = kube.peek(NODE_CLAIM, "default-abc")
    assert nodeclaim is not None and nodeclaim["metadata"].get("deletionTimestamp")
    # Drained waits MIN_DRAIN_TIME (5 s) for pods bound just before the taint was seen.
    assert conditions(rig)["Drained"] == ("Unknown", "Draining")
    assert result == Result(requeue_after=1.0)

    await rig.clock.step(5.0)
    # Drained; the instance's deletion starts, and is checked again until it is gone.
    assert await rig.node.reconcile(Request("", "node-a")) == Result(requeue_after=5.0)
    assert rig.provider.instances == {}
    await rig.clock.step(5.0)
    assert await rig.node.reconcile(Request("", "node-a")) == Result()
    assert kube.peek(kinds.NODE, "node-a") is None
    assert conditions(rig)["Drained"][0] == "True"
    assert conditions(rig)["VolumesDetached"][0] == "True"
    assert conditions(rig)["InstanceTerminating"][0] == "True"

    result = await rig.nodeclaim.reconcile(Request("", "default-abc"))
    assert result == Result()
    assert kube.peek(NODE_CLAIM, "default-abc") is None

    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("tainted node") == 1
    assert messages.count("deleted node") == 1
    assert messages.count("deleted nodeclaim") == 1
    tainted = next(r for r in caplog.records if r.getMessage() == "tainted node")
    assert (tainted.__dict__["taint.Key"], tainted.__dict__["taint.Effect"]) == (
        TAINT_DISRUPTED, "NoSchedule")
    assert rig.metric("karpenter_nodes_terminated_total") == [
        'karpenter_nodes_terminated_total{nodepool="default",zone="test-zone-a"} 1.0']
    assert rig.metric("karpenter_nodeclaims_terminated_total") == [
        'karpenter_nodeclaims_terminated_total{capacity_type="on-demand",nodepool="default",'
        'zone="test-zone-a"} 1.0']
    assert rig.metric("karpenter_nodes_drained_total") == [
        'karpenter_nodes_drained_total{nodepool="default"} 1.0']
    assert rig.metric("karpenter_pods_drained_total") == [
        'karpenter_pods_drained_total{reason="Forceful Termination"} 4.0']


async def test_a_pdb_holds_back_the_last_pod_until_its_replacement_runs(rig: Rig) -> None:
    seed(rig)
    kube = rig.kube
    for name in ("web-1", "web-2"):
        kube.add(kinds.POD, f.pod(name, node_name="node-a", labels={"app": "web"}))
    kube.add(kinds.POD_DISRUPTION_BUDGET, f.pdb("web", {"app": "web"}, min_available=1))
    await kube.delete(kinds.NODE, "node-a")

    await rig.node.reconcile(Request("", "node-a"))
    results = await rig.evict_queued()
    # The first eviction leaves one healthy pod: allowed. The second would leave none.
    assert results[Request("default", "web-1")] == Result()
    assert results[Request("default", "web-2")] == Result(requeue_after=5.0)
    assert kube.peek(kinds.POD, "web-1", "default") is None
    assert kube.peek(kinds.POD, "web-2", "default") is not None
    refused = [e for e in rig.recorder.events if e.name == "node-a"]
    assert refused[-1].reason == "FailedDraining"
    assert refused[-1].message == "Failed to drain node, evicting pod violates a PDB"
    assert 'code="429"' in "".join(rig.metric("karpenter_pods_eviction_requests_total"))

    # Retrying changes nothing while the last healthy pod is alone...
    await rig.clock.step(5.0)
    assert await rig.queue.reconcile(Request("default", "web-2")) == Result(requeue_after=5.0)
    # ...until the Deployment's replacement is Running and Ready elsewhere.
    kube.add(kinds.POD, f.pod("web-3", node_name="node-b", labels={"app": "web"}))
    await rig.clock.step(5.0)
    assert await rig.queue.reconcile(Request("default", "web-2")) == Result()
    assert kube.peek(kinds.POD, "web-2", "default") is None

    await rig.clock.step(5.0)
    assert await rig.node.reconcile(Request("", "node-a")) == Result(requeue_after=5.0)
    assert await rig.node.reconcile(Request("", "node-a")) == Result()
    assert kube.peek(kinds.NODE, "node-a") is None


async def test_deleting_a_nodeclaim_deletes_its_node_and_instance(rig: Rig) -> None:
    seed(rig)
    kube = rig.kube
    kube.add(kinds.POD, f.pod("web-1", node_name="node-a"))
    await kube.delete(NODE_CLAIM, "default-abc")

    # The NodeClaim waits for its Node, whose deletion starts the drain.
    result = await rig.nodeclaim.reconcile(Request("", "default-abc"))
    assert result.requeue_after > 0
    node = kube.peek(kinds.NODE, "node-a")
    assert node is not None and node["metadata"].get("deletionTimestamp")
    assert rig.provider.instances  # not before the node is drained

    await rig.node.reconcile(Request("", "node-a"))
    await rig.evict_queued()
    await rig.clock.step(5.0)
    assert await rig.node.reconcile(Request("", "node-a")) == Result(requeue_after=5.0)
    assert await rig.node.reconcile(Request("", "node-a")) == Result()
    assert kube.peek(kinds.NODE, "node-a") is None
    assert await rig.nodeclaim.reconcile(Request("", "default-abc")) == Result()
    assert kube.peek(NODE_CLAIM, "default-abc") is None
    assert rig.provider.instances == {}
    # Called until NotFound: started, then gone (node.termination), gone (nodeclaim's).
    assert len(rig.provider.delete_calls) == 3


async def test_do_not_disrupt_holds_until_the_grace_period_forces_deletion(rig: Rig) -> None:
    seed(rig, tgp="60s")
    kube = rig.kube
    kube.add(kinds.POD, f.pod("batch-1", node_name="node-a", do_not_disrupt="true",
                              grace_seconds=30))
    await kube.delete(NODE_CLAIM, "default-abc")
    await rig.nodeclaim.reconcile(Request("", "default-abc"))
    stored = kube.peek(NODE_CLAIM, "default-abc")
    assert stored is not None
    # deletion at 00:00:00 + terminationGracePeriod 60s
    assert stored["metadata"]["annotations"][ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP] == (
        "2024-01-01T00:01:00Z")
    assert "TerminationGracePeriodExpiring" in rig.recorder.reasons("default-abc")

    await rig.node.reconcile(Request("", "node-a"))
    assert "TerminationGracePeriodExpiring" in rig.recorder.reasons("node-a")
    results = await rig.evict_queued()
    # Never evicted while protected; looked at again in time for the forced deletion.
    assert results == {Request("default", "batch-1"): Result(requeue_after=5.0)}
    assert not [c for c in kube.calls if c.verb == "evict"]

    await rig.clock.step(29.0)  # deadline - pod grace = 00:00:30; now 00:00:29
    assert await rig.queue.reconcile(Request("default", "batch-1")) == Result(
        requeue_after=1.0)
    await rig.clock.step(2.0)  # 00:00:31: deleting now lets the pod finish by 00:01:00
    assert await rig.queue.reconcile(Request("default", "batch-1")) == Result()
    delete = [c for c in kube.calls if c.verb == "delete" and c.kind == kinds.POD]
    assert delete[0].options["grace_period_seconds"] == 29
    assert rig.recorder.reasons("batch-1") == ["Disrupted"]
    assert "bypasses the PDB of the pod and the do-not-disrupt annotation" in (
        rig.recorder.events[-1].message)
    assert kube.peek(kinds.POD, "batch-1", "default") is None


async def test_a_not_ready_node_whose_instance_is_gone_is_not_drained(rig: Rig) -> None:
    rig.kube.add(NODE_CLAIM, f.nodeclaim("default-abc", provider_id=PID, node_name="node-a"))
    rig.kube.add(kinds.NODE, f.node("node-a", provider_id=PID, ready=False))
    rig.kube.add(kinds.POD, f.pod("web-1", node_name="node-a"))
    await rig.kube.delete(kinds.NODE, "node-a")

    assert await rig.node.reconcile(Request("", "node-a")) == Result()
    assert rig.kube.peek(kinds.NODE, "node-a") is None
    assert rig.queued == []  # no kubelet left to stop the pod: nothing evicted


async def test_a_node_karpy_does_not_manage_is_left_alone(rig: Rig) -> None:
    rig.kube.add(kinds.NODE, f.node("other", provider_id="aws:///i-1", nodepool=None))
    await rig.kube.delete(kinds.NODE, "other")
    assert await rig.node.reconcile(Request("", "other")) == Result()
    stored = rig.kube.peek(kinds.NODE, "other")
    assert stored is not None and stored["metadata"]["finalizers"]  # not ours to remove
    assert not [c for c in rig.kube.calls if c.verb == "patch"]


async def test_nodeclaims_get_the_finalizer_and_unlaunched_ones_go_without_a_cloud_call(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    rig.kube.add(NODE_CLAIM, f.nodeclaim("pending-1", finalizer=False))
    rig.kube.add(NODE_CLAIM, f.nodeclaim("theirs-1", finalizer=False, managed=False))
    await rig.nodeclaim.reconcile(Request("", "pending-1"))
    await rig.nodeclaim.reconcile(Request("", "theirs-1"))
    ours, theirs = rig.kube.peek(NODE_CLAIM, "pending-1"), rig.kube.peek(NODE_CLAIM, "theirs-1")
    assert ours is not None and ours["metadata"]["finalizers"] == ["karpenter.sh/termination"]
    assert theirs is not None and theirs["metadata"]["finalizers"] == []

    await rig.kube.delete(NODE_CLAIM, "pending-1")
    assert await rig.nodeclaim.reconcile(Request("", "pending-1")) == Result()
    assert rig.kube.peek(NODE_CLAIM, "pending-1") is None
    assert rig.provider.delete_calls == []  # never launched: nothing to delete
    record = next(r for r in caplog.records if r.getMessage() == "deleted nodeclaim")
    assert record.name == "controller"


async def test_instance_deletion_is_repeated_until_the_provider_reports_it_gone(rig: Rig) -> None:
    nodeclaim = f.nodeclaim("default-abc", provider_id=PID, registered=False)
    rig.kube.add(NODE_CLAIM, nodeclaim)
    rig.launch(nodeclaim)
    await rig.kube.delete(NODE_CLAIM, "default-abc")
    rig.provider.next_delete_error = RuntimeError("throttled")
    with pytest.raises(RuntimeError):
        await rig.nodeclaim.reconcile(Request("", "default-abc"))
    # First successful call starts termination; the NodeClaim waits for NotFound.
    assert await rig.nodeclaim.reconcile(Request("", "default-abc")) == Result(requeue_after=5.0)
    assert conditions(rig)["InstanceTerminating"][0] == "True"
    assert await rig.nodeclaim.reconcile(Request("", "default-abc")) == Result()
    assert rig.kube.peek(NODE_CLAIM, "default-abc") is None
    assert len(rig.provider.delete_calls) == 3
