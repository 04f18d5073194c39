"""node.termination's other paths: volumes that must detach first, a Node whose
NodeClaim is gone, and a taint of the same key with another effect."""

from __future__ import annotations

from typing import Any

from controllers.termination import factories as f
from controllers.termination.rigging import Rig

from karpy.apis.taints import TAINT_DISRUPTED
from karpy.runtime import Request, Result, kinds
from karpy.state.kinds import NODE_CLAIM

PID = "fake://node-a"


def attachment(name: str, pv: str, node: str = "node-a") -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"nodeName": node, "attacher": "csi.example.com",
                     "source": {"persistentVolumeName": pv}}}


def conditions(rig: Rig) -> dict[str, tuple[str, str]]:
    stored = rig.kube.peek(NODE_CLAIM, "default-abc")
    assert stored is not None
    return {c["type"]: (c["status"], c.get("reason", "")) for c in stored["status"]["conditions"]}


async def drained(rig: Rig, *, tgp: str | None = None) -> None:
    """A deleted, already empty node past its minimum drain time."""
    claim = f.nodeclaim("default-abc", provider_id=PID, node_name="node-a",
                        termination_grace_period=tgp)
    rig.kube.add(NODE_CLAIM, claim)
    rig.kube.add(kinds.NODE, f.node("node-a", provider_id=PID))
    rig.launch(claim)
    await rig.kube.delete(NODE_CLAIM, "default-abc")
    await rig.nodeclaim.reconcile(Request("", "default-abc"))  # deletes the Node
    assert await rig.node.reconcile(Request("", "node-a")) == Result(requeue_after=1.0)
    await rig.clock.step(5.0)


async def test_termination_waits_for_volumes_to_detach(rig: Rig) -> None:
    rig.kube.add(kinds.VOLUME_ATTACHMENT, attachment("csi-1", "pv-1"))
    await drained(rig)
    assert await rig.node.reconcile(Request("", "node-a")) == Result(requeue_after=1.0)
    assert conditions(rig)["Drained"][0] == "True"
    assert conditions(rig)["VolumesDetached"] == ("Unknown", "AwaitingVolumeDetachment")
    assert rig.recorder.events[-1].message == (
        "Awaiting deletion of bound volumeattachments (csi-1)")
    assert rig.provider.delete_calls == []  # the instance stays until volumes are off

    rig.kube.clear(kinds.VOLUME_ATTACHMENT)  # the attach-detach controller did it
    assert await rig.node.reconcile(Request("", "node-a")) == Result(requeue_after=5.0)
    assert conditions(rig)["VolumesDetached"][0] == "True"
    assert len(rig.provider.delete_calls) == 1


async def test_volumes_of_pods_that_stay_are_not_waited_for(rig: Rig) -> None:
    stays = f.pod("agent", node_name="node-a", owner=("v1", "Node"))  # a mirror pod
    stays["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]
    rig.kube.add(kinds.POD, stays)
    rig.kube.add(kinds.PERSISTENT_VOLUME_CLAIM, {
        "metadata": {"name": "d", "namespace": "default"}, "spec": {"volumeName": "pv-mirror"}})
    rig.kube.add(kinds.VOLUME_ATTACHMENT, attachment("csi-m", "pv-mirror"))
    await drained(rig)
    assert await rig.node.reconcile(Request("", "node-a")) == Result(requeue_after=5.0)
    assert conditions(rig)["VolumesDetached"][0] == "True"


async def test_the_grace_period_ends_the_wait_for_volumes(rig: Rig) -> None:
    rig.kube.add(kinds.VOLUME_ATTACHMENT, attachment("csi-1", "pv-1"))
    await drained(rig, tgp="30s")
    assert await rig.node.reconcile(Request("", "node-a")) == Result(requeue_after=1.0)
    await rig.clock.step(30.0)
    assert await rig.node.reconcile(Request("", "node-a")) == Result(requeue_after=5.0)
    assert conditions(rig)["VolumesDetached"] == ("False", "TerminationGracePeriodElapsed")


async def test_a_node_without_a_nodeclaim_is_drained_and_released(rig: Rig) -> None:
    rig.kube.add(kinds.NODE, f.node("node-a", provider_id=PID, taints=[
        {"key": TAINT_DISRUPTED, "effect": "NoExecute"}]))
    rig.kube.add(kinds.POD, f.pod("web-1", node_name="node-a"))
    await rig.kube.delete(kinds.NODE, "node-a")
    assert await rig.node.reconcile(Request("", "node-a")) == Result(requeue_after=1.0)
    node = rig.kube.peek(kinds.NODE, "node-a")
    assert node is not None
    # The key's other effect is replaced, not duplicated.
    assert [t for t in node["spec"]["taints"] if t["key"] == TAINT_DISRUPTED] == [
        {"key": TAINT_DISRUPTED, "effect": "NoSchedule"}]
    assert node["metadata"]["labels"][
        "node.kubernetes.io/exclude-from-external-load-balancers"] == "karpenter"
    await rig.evict_queued()
    # No NodeClaim: no conditions to wait on and no instance to delete by name.
    assert await rig.node.reconcile(Request("", "node-a")) == Result()
    assert rig.kube.peek(kinds.NODE, "node-a") is None
    assert rig.provider.delete_calls == []
