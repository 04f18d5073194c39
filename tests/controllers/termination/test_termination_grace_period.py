"""terminationGracePeriod bounds a drain: pods that block eviction (a PDB that never
allows one, karpenter.sh/do-not-disrupt) are deleted when the NodeClaim's deadline leaves
them their own grace period, and the node then terminates — also when the deadline is
already past, as node repair and expiration with a short period make it."""

from __future__ import annotations

from controllers.termination import factories as f
from controllers.termination.rigging import Rig

from karpy.apis.annotations import ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP
from karpy.runtime import Request, Result, kinds
from karpy.state.kinds import NODE_CLAIM

PID = "fake://node-a"


def seed(rig: Rig, *, tgp: str | None = None, annotations: dict[str, str] | None = None) -> None:
    nodeclaim = f.nodeclaim("default-abc", provider_id=PID, node_name="node-a",
                            termination_grace_period=tgp)
    if annotations:
        nodeclaim["metadata"]["annotations"] = dict(annotations)
    rig.kube.add(NODE_CLAIM, nodeclaim)
    rig.kube.add(kinds.NODE, f.node("node-a", provider_id=PID))
    rig.launch(nodeclaim)
    # A PDB that never allows a disruption, and a pod that asks not to be disrupted.
    rig.kube.add(kinds.POD, f.pod("web-1", node_name="node-a", labels={"app": "web"},
                                  grace_seconds=10))
    rig.kube.add(kinds.POD_DISRUPTION_BUDGET, f.pdb("web", {"app": "web"}, min_available=1))
    rig.kube.add(kinds.POD, f.pod("batch-1", node_name="node-a", do_not_disrupt="true",
                                  grace_seconds=20))


async def requeued(rig: Rig) -> None:
    """What the eviction queue's requeues would do: look at each pod left again."""
    for pod in pods_left(rig):
        await rig.queue.reconcile(Request("default", pod))


async def finish(rig: Rig) -> None:
    """Drive termination until the Node and NodeClaim are gone (bounded)."""
    for _ in range(20):
        if rig.kube.peek(kinds.NODE, "node-a") is not None:
            await rig.node.reconcile(Request("", "node-a"))
            await rig.evict_queued()
            await requeued(rig)
        elif rig.kube.peek(NODE_CLAIM, "default-abc") is not None:
            await rig.nodeclaim.reconcile(Request("", "default-abc"))
        else:
            return
        await rig.clock.step(5.0)
    raise AssertionError("termination did not finish")


def pods_left(rig: Rig) -> set[str]:
    return {name for name in ("web-1", "batch-1")
            if rig.kube.peek(kinds.POD, name, "default") is not None}


async def test_blocking_pods_give_way_at_the_deadline_and_the_node_terminates(rig: Rig) -> None:
    seed(rig, tgp="60s")
    await rig.kube.delete(NODE_CLAIM, "default-abc")
    await rig.nodeclaim.reconcile(Request("", "default-abc"))
    await rig.node.reconcile(Request("", "node-a"))
    results = await rig.evict_queued()
    assert results[Request("default", "web-1")].requeue_after == 5.0  # 429 from the PDB
    assert results[Request("default", "batch-1")].requeue_after == 5.0  # never evicted

    # Until deadline - own grace (00:00:40 for batch-1, 00:00:50 for web-1) both stay.
    for _ in range(7):
        await rig.clock.step(5.0)
        await requeued(rig)
        await rig.node.reconcile(Request("", "node-a"))
        if rig.clock.now().second < 40:
            assert pods_left(rig) == {"web-1", "batch-1"}
    assert rig.kube.peek(kinds.NODE, "node-a") is not None
    await finish(rig)
    assert pods_left(rig) == set()
    deletes = {c.name: c.options["grace_period_seconds"] for c in rig.kube.calls
               if c.verb == "delete" and c.kind == kinds.POD}
    # Each pod got what was left of the node's 60 s, so both end by 00:01:00.
    assert deletes["batch-1"] <= 20 and deletes["web-1"] <= 10
    assert rig.kube.peek(kinds.NODE, "node-a") is None
    assert rig.kube.peek(NODE_CLAIM, "default-abc") is None
    assert rig.provider.instances == {}


async def test_a_deadline_already_past_forces_every_pod_out_at_once(rig: Rig) -> None:
    # Node repair writes "now" before deleting the NodeClaim.
    seed(rig, annotations={ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: "2024-01-01T00:00:00Z"})
    await rig.clock.step(1.0)
    await rig.kube.delete(NODE_CLAIM, "default-abc")
    await rig.nodeclaim.reconcile(Request("", "default-abc"))
    stored = rig.kube.peek(NODE_CLAIM, "default-abc")
    assert stored is not None  # the annotation is kept, not recomputed
    assert stored["metadata"]["annotations"][ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP] == (
        "2024-01-01T00:00:00Z")
    await rig.node.reconcile(Request("", "node-a"))
    results = await rig.evict_queued()
    assert set(results.values()) == {Result()}
    assert pods_left(rig) == set()
    assert not [c for c in rig.kube.calls if c.verb == "evict"]
    deletes = [c.options["grace_period_seconds"] for c in rig.kube.calls
               if c.verb == "delete" and c.kind == kinds.POD]
    assert deletes == [1, 1]  # never 0: the pod must not vanish before it stopped
    await finish(rig)
    assert rig.kube.peek(kinds.NODE, "node-a") is None
