"""What wakes the provisioner: pending pods, nodes going away, NodePools turning Ready."""

from __future__ import annotations

from typing import cast

from provisioning_support import Harness, build

from karpy.controllers.provisioning import ProvisionerTrigger
from karpy.runtime import Client, Informer, kinds
from karpy.state import NODE_POOL
from karpy.state.testing import node, nodeclaim, nodepool, pod


def trigger_for(h: Harness) -> ProvisionerTrigger:
    client = cast(Client, None)  # the informers are never run here
    return ProvisionerTrigger(
        h.provisioner, h.cluster,
        pods=Informer(client, kinds.POD), nodes=Informer(client, kinds.NODE),
        nodepools=Informer(client, NODE_POOL),
    )


def test_a_pod_kube_scheduler_could_not_place_triggers_a_round() -> None:
    h = build()
    trigger_for(h).on_pod(pod("a"))
    assert h.provisioner.batcher.armed


def test_pods_others_take_care_of_do_not_trigger() -> None:
    h = build()
    trigger = trigger_for(h)
    for p in (pod("bound", node_name="n1"), pod("fresh", unschedulable=False),
              pod("daemon", owner_kind="DaemonSet"), pod("going", deleting=True)):
        trigger.on_pod(p)
    assert not h.provisioner.batcher.armed


def test_a_nominated_pod_does_not_trigger_again() -> None:
    h = build()
    a = pod("a")
    h.cluster.update_pod(a)
    h.cluster.update_nodeclaim(nodeclaim("c1"))
    h.cluster.nominate([h.cluster.scheduling_pod(a)], "c1")
    trigger_for(h).on_pod(a)
    assert not h.provisioner.batcher.armed


def test_a_node_being_deleted_or_disrupted_triggers() -> None:
    h = build()
    trigger = trigger_for(h)
    trigger.on_node(node("fine", provider_id="p1"))
    assert not h.provisioner.batcher.armed
    trigger.on_node(node("tainted", provider_id="p2", taints=[
        {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]))
    assert h.provisioner.batcher.armed


def test_only_the_disrupted_no_schedule_taint_marks_a_node_as_going_away() -> None:
    """Key and effect, as Karpenter's MatchTaint: the same key with another effect is
    someone else's taint, not a disruption."""
    h = build()
    trigger_for(h).on_node(node("other", provider_id="p3", taints=[
        {"key": "karpenter.sh/disrupted", "effect": "NoExecute"}]))
    assert not h.provisioner.batcher.armed


def test_a_nodepool_turning_ready_triggers_but_status_churn_does_not() -> None:
    h = build()
    trigger = trigger_for(h)
    not_ready = nodepool("p", ready=False)
    ready = nodepool("p", ready=True)
    ready["metadata"] = not_ready["metadata"]
    trigger.on_nodepool(None, not_ready)
    assert not h.provisioner.batcher.armed
    trigger.on_nodepool(ready, ready)            # e.g. status.resources changed
    assert not h.provisioner.batcher.armed
    trigger.on_nodepool(not_ready, ready)
    assert h.provisioner.batcher.armed


def test_released_nominations_trigger_through_the_cluster() -> None:
    h = build()
    h.cluster.add_release_handler(h.provisioner.release)
    a = pod("a")
    h.cluster.update_pod(a)
    claim = nodeclaim("c1")
    h.cluster.update_nodeclaim(claim)
    h.cluster.nominate([h.cluster.scheduling_pod(a)], "c1")
    h.cluster.delete_nodeclaim(claim)
    assert h.provisioner.batcher.armed
