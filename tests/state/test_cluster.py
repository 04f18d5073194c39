"""The cluster model: joins, per-node pod sums, provisionable pods, nominations, usage."""

from __future__ import annotations

import copy
from typing import Any

from karpy.runtime.testing import FakeClock
from karpy.scheduling import resources as res
from karpy.state import Cluster
from karpy.state.testing import GIB, daemonset, node, nodeclaim, nodepool, pod


def make() -> tuple[Cluster, FakeClock]:
    clock = FakeClock()
    return Cluster(clock=clock, nomination_ttl=20.0), clock


# -- joining nodes and NodeClaims -------------------------------------------------------


def test_nodeclaim_and_node_join_by_provider_id() -> None:
    cluster, _ = make()
    cluster.update_nodeclaim(nodeclaim("default-abcde", provider_id="kwok://n1",
                                       launched=True, registered=True, initialized=True,
                                       labels={"node.kubernetes.io/instance-type": "c-4x"}))
    cluster.update_node(node("n1", provider_id="kwok://n1", nodepool="default"))

    [state] = cluster.nodes()
    assert state.name == "n1"
    assert state.nodeclaim_name == "default-abcde"
    assert state.initialized and state.registered and state.managed
    # Registered: the Node's labels are what pods see.
    assert state.labels["kubernetes.io/hostname"] == "n1"
    assert cluster.node_by_name("n1") is state
    assert cluster.node_for_nodeclaim("default-abcde") is state


def test_in_flight_nodeclaim_uses_its_own_labels_capacity_and_taints() -> None:
    cluster, _ = make()
    cluster.update_nodeclaim(nodeclaim(
        "default-abcde", provider_id="kwok://n1", cpu="8",
        labels={"topology.kubernetes.io/zone": "zone-a"},
        taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}],
    ))
    [state] = cluster.nodes()
    assert state.name == "default-abcde"      # no Node yet: named by its NodeClaim
    assert not state.initialized
    assert state.labels["topology.kubernetes.io/zone"] == "zone-a"
    assert state.allocatable[res.CPU] == 8000
    assert [t.key for t in state.taints] == ["team"]


def test_in_flight_nodeclaim_shows_the_labels_its_requirements_pin() -> None:
    # A pod that selects the zone can only count on in-flight capacity if the simulator
    # sees that zone before the node exists; a multi-valued requirement pins nothing.
    cluster, _ = make()
    claim = nodeclaim("c1", provider_id="p1")
    claim["spec"]["requirements"] = [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-b"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
    ]
    cluster.update_nodeclaim(claim)
    (existing,) = cluster.existing_nodes()
    assert existing.labels["topology.kubernetes.io/zone"] == "test-zone-b"
    assert "karpenter.sh/capacity-type" not in existing.labels
    assert existing.labels["karpenter.sh/nodepool"] == "default"


def test_unlaunched_nodeclaim_keeps_the_model_unsynced_until_it_launches() -> None:
    cluster, _ = make()
    cluster.update_nodeclaim(nodeclaim("default-abcde"))
    assert not cluster.synced
    assert cluster.nodes() == []                 # no capacity known yet
    cluster.update_nodeclaim(nodeclaim("default-abcde", provider_id="kwok://n1"))
    assert cluster.synced
    assert len(cluster.nodes()) == 1


def test_unlaunched_nodeclaim_being_deleted_does_not_block_sync() -> None:
    cluster, _ = make()
    cluster.update_nodeclaim(nodeclaim("default-abcde", deleting=True))
    assert cluster.synced


def test_deleting_nodeclaim_then_node_forgets_the_machine() -> None:
    cluster, _ = make()
    claim = nodeclaim("c1", provider_id="p1", initialized=True, registered=True)
    n1 = node("n1", provider_id="p1", nodepool="default")
    cluster.update_nodeclaim(claim)
    cluster.update_node(n1)
    cluster.delete_nodeclaim(claim)
    [state] = cluster.nodes()
    assert state.nodeclaim is None and state.node is not None
    cluster.delete_node(n1)
    assert cluster.nodes() == []
    assert cluster.nodepool_usage("default") == {}


def test_a_created_nodeclaim_never_overrides_what_the_watch_already_reported() -> None:
    cluster, _ = make()
    created = nodeclaim("c1")
    cluster.nodeclaim_created(created)             # the watch has not caught up yet
    assert not cluster.synced and cluster.nodeclaim_exists("c1")

    cluster, _ = make()
    cluster.update_nodeclaim(nodeclaim("c1", provider_id="p1"))   # watch was faster
    cluster.nodeclaim_created(created)
    assert cluster.synced and cluster.node_for_nodeclaim("c1") is not None

    cluster, _ = make()
    cluster.update_nodeclaim(created)
    cluster.delete_nodeclaim(created)              # launched and failed already
    cluster.nodeclaim_created(created)
    assert cluster.synced and not cluster.nodeclaim_exists("c1")


def test_managed_node_without_provider_id_waits() -> None:
    cluster, _ = make()
    cluster.update_node(node("n1", nodepool="default"))
    assert cluster.nodes() == []
    cluster.update_node(node("n1", nodepool="default", provider_id="p1"))
    assert cluster.node("p1") is not None


def test_unmanaged_node_is_keyed_by_name_and_initialized() -> None:
    cluster, _ = make()
    cluster.update_node(node("control-plane"))
    state = cluster.node("control-plane")
    assert state is not None and state.initialized and not state.managed


# -- pods per node ------------------------------------------------------------------------


def test_pod_requests_are_summed_per_node_as_pods_come_and_go() -> None:
    cluster, _ = make()
    cluster.update_node(node("n1", provider_id="p1"))
    a = pod("a", cpu="500m", node_name="n1")
    b = pod("b", cpu="1", memory="2Gi", node_name="n1")
    cluster.update_pod(a)
    cluster.update_pod(b)
    cluster.update_pod(b)                        # repeated updates count once
    state = cluster.node("p1")
    assert state is not None
    assert state.pod_requests[res.CPU] == 1500
    assert state.pod_requests[res.MEMORY] == 3 * GIB
    assert state.pod_requests[res.PODS] == 2
    cluster.update_pod(pod("a", cpu="500m", node_name="n1", phase="Succeeded") | {
        "metadata": a["metadata"]})
    assert state.pod_requests[res.CPU] == 1000   # a finished: no longer holds its share
    cluster.delete_pod(b)
    assert dict(state.pod_requests) == {}


def test_pods_bound_before_their_node_is_seen_are_counted_when_it_appears() -> None:
    cluster, _ = make()
    cluster.update_pod(pod("a", cpu="2", node_name="n1"))
    cluster.update_node(node("n1", provider_id="p1"))
    state = cluster.node("p1")
    assert state is not None and state.pod_requests[res.CPU] == 2000
    assert [p.name for p in cluster.pods_on("n1")] == ["a"]


def test_daemonset_pods_are_counted_apart() -> None:
    cluster, _ = make()
    cluster.update_node(node("n1", provider_id="p1"))
    cluster.update_pod(pod("agent-x", cpu="100m", node_name="n1", owner_kind="DaemonSet",
                           owner_name="agent"))
    cluster.update_pod(pod("app", cpu="1", node_name="n1"))
    state = cluster.node("p1")
    assert state is not None
    assert state.daemonset_requests[res.CPU] == 100
    assert state.pod_requests[res.CPU] == 1100


# -- provisionable pods and nominations ---------------------------------------------------


def test_provisionable_pods_exclude_what_kube_scheduler_or_others_handle() -> None:
    cluster, _ = make()
    cluster.update_pod(pod("pending"))
    cluster.update_pod(pod("not-tried-yet", unschedulable=False))
    cluster.update_pod(pod("daemon", owner_kind="DaemonSet"))
    cluster.update_pod(pod("static", owner_kind="Node"))
    cluster.update_pod(pod("leaving", deleting=True))
    cluster.update_pod(pod("preempting", nominated_node_name="n9"))
    cluster.update_pod(pod("bound", node_name="n1"))
    assert [p["metadata"]["name"] for p in cluster.provisionable_pods()] == ["pending"]


def test_bound_pod_stops_being_provisionable() -> None:
    cluster, _ = make()
    pending = pod("a")
    cluster.update_pod(pending)
    bound = pod("a", node_name="n1")
    bound["metadata"] = pending["metadata"]
    cluster.update_pod(bound)
    assert cluster.provisionable_pods() == []


def test_nominated_pods_are_not_provisioned_again_while_their_nodeclaim_is_in_flight() -> None:
    cluster, clock = make()
    a = pod("a")
    cluster.update_pod(a)
    cluster.update_nodeclaim(nodeclaim("c1"))
    cluster.nominate([cluster.scheduling_pod(a)], "c1")
    assert cluster.provisionable_pods() == []
    clock.advance(600)                           # in flight: the TTL does not end it
    assert cluster.is_nominated("default/a")
    cluster.update_nodeclaim(nodeclaim("c1", provider_id="p1", registered=True))
    clock.advance(600)
    assert cluster.nomination("default/a") == "nodeclaim/c1"


def test_nomination_lapses_a_ttl_after_the_target_initialized() -> None:
    cluster, clock = make()
    a = pod("a")
    cluster.update_pod(a)
    cluster.update_nodeclaim(nodeclaim("c1", provider_id="p1"))
    cluster.nominate([cluster.scheduling_pod(a)], "c1")
    clock.advance(100)
    cluster.update_nodeclaim(nodeclaim("c1", provider_id="p1", registered=True,
                                       initialized=True))
    clock.advance(19)
    assert cluster.is_nominated("default/a")
    clock.advance(2)
    assert not cluster.is_nominated("default/a")
    assert [p["metadata"]["name"] for p in cluster.provisionable_pods()] == ["a"]


SURPRISE = {"key": "example.com/surprise", "value": "x", "effect": "NoSchedule"}


def registered_with(
    taints: list[dict[str, str]], *, declared: list[dict[str, str]] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A NodeClaim c1 whose Node n1 registered and initialized carrying ``taints``."""
    claim = nodeclaim("c1", provider_id="p1", registered=True, initialized=True,
                      taints=declared or [])
    return claim, node("n1", provider_id="p1", nodepool="default", taints=taints)


def test_a_node_that_came_up_with_an_undeclared_taint_keeps_its_nominated_pods() -> None:
    """The kubelet added a taint the NodeClaim did not declare and the pod does not
    tolerate: every NodeClaim planned for the pod would come up the same way, so its
    nomination holds past the TTL and the pod is not provisioned again (no runaway)."""
    cluster, clock = make()
    a = pod("a")
    cluster.update_pod(a)
    cluster.update_nodeclaim(nodeclaim("c1", provider_id="p1"))
    cluster.nominate([cluster.scheduling_pod(a)], "c1")
    claim, n1 = registered_with([SURPRISE])
    cluster.update_nodeclaim(claim)
    cluster.update_node(n1)
    [state] = cluster.nodes()
    assert [str(t) for t in state.undeclared_taints] == ["example.com/surprise=x:NoSchedule"]
    clock.advance(3600)
    assert cluster.nomination("default/a") == "nodeclaim/c1"
    assert cluster.provisionable_pods() == []
    # the taint is removed: the usual TTL applies again, and the pod fits the node anyway
    cluster.update_node(node("n1", provider_id="p1", nodepool="default"))
    assert not cluster.is_nominated("default/a")


def test_declared_tolerated_and_kubernetes_taints_do_not_hold_a_nomination() -> None:
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    prefer = {"key": "example.com/soft", "effect": "PreferNoSchedule"}
    cases = [
        ([SURPRISE], [SURPRISE], pod("a")),                       # declared by the NodeClaim
        ([SURPRISE], [], pod("a", tolerations=[{"key": "example.com/surprise",
                                                "operator": "Exists"}])),
        ([not_ready], [], pod("a")),                               # Kubernetes' own
        ([prefer], [], pod("a")),                                  # only a preference
    ]
    for taints, declared, a in cases:
        cluster, clock = make()
        cluster.update_pod(a)
        cluster.update_nodeclaim(nodeclaim("c1", provider_id="p1"))
        cluster.nominate([cluster.scheduling_pod(a)], "c1")
        claim, n1 = registered_with(taints, declared=declared)
        cluster.update_nodeclaim(claim)
        cluster.update_node(n1)
        clock.advance(21)
        assert not cluster.is_nominated("default/a"), (taints, declared)


def test_deleting_the_target_releases_its_pods_and_tells_the_handlers() -> None:
    cluster, _ = make()
    released: list[list[str]] = []
    cluster.add_release_handler(lambda keys: released.append(sorted(keys)))
    a, b = pod("a"), pod("b")
    for p in (a, b):
        cluster.update_pod(p)
    claim = nodeclaim("c1")
    cluster.update_nodeclaim(claim)
    cluster.nominate([cluster.scheduling_pod(a), cluster.scheduling_pod(b)], "c1")
    assert cluster.provisionable_pods() == []
    cluster.delete_nodeclaim(claim)
    assert released == [["default/a", "default/b"]]
    assert len(cluster.provisionable_pods()) == 2


def test_marking_a_machine_for_deletion_releases_its_nominations() -> None:
    cluster, _ = make()
    released: list[str] = []
    cluster.add_release_handler(released.extend)
    a = pod("a")
    cluster.update_pod(a)
    cluster.update_nodeclaim(nodeclaim("c1", provider_id="p1"))
    cluster.nominate([cluster.scheduling_pod(a)], "c1")
    cluster.mark_for_deletion("p1")
    assert released == ["default/a"]
    assert not cluster.is_nominated("default/a")


def test_a_pod_taking_a_nominated_pods_room_releases_that_nomination_at_once() -> None:
    # kube-scheduler binds whichever pending pod comes first; the pods karpy nominated
    # to this node that no longer fit must be provisioned again now, not after the TTL.
    cluster, _ = make()
    released: list[str] = []
    cluster.add_release_handler(released.extend)
    cluster.update_nodeclaim(nodeclaim("c1", provider_id="p1", cpu="3"))
    cluster.update_node(node("n1", provider_id="p1", nodepool="default", cpu="3"))
    mine = [pod(f"mine-{i}") for i in range(3)]
    for p in mine:
        cluster.update_pod(p)
    cluster.nominate([cluster.scheduling_pod(p) for p in mine], "c1")
    assert cluster.provisionable_pods() == []

    cluster.update_pod(pod("mine-0", node_name="n1"))
    assert released == []                     # its own pod: the others still fit
    cluster.update_pod(pod("stranger", node_name="n1"))
    assert len(released) == 1                 # one of the two waiting ones lost its room
    assert [p["metadata"]["name"] for p in cluster.provisionable_pods()] == [
        released[0].split("/")[1]]
    still = {"default/mine-1", "default/mine-2"} - set(released)
    assert all(cluster.is_nominated(k) for k in still)


def test_room_left_for_the_nominated_pods_releases_nothing() -> None:
    cluster, _ = make()
    released: list[str] = []
    cluster.add_release_handler(released.extend)
    cluster.update_nodeclaim(nodeclaim("c1", provider_id="p1", cpu="4"))
    cluster.update_node(node("n1", provider_id="p1", nodepool="default", cpu="4"))
    waiting = pod("waiting")
    cluster.update_pod(waiting)
    cluster.nominate([cluster.scheduling_pod(waiting)], "c1")
    for i in range(3):
        cluster.update_pod(pod(f"other-{i}", node_name="n1"))
    assert released == []
    assert cluster.is_nominated("default/waiting")


def test_node_nomination_is_a_short_lived_flag() -> None:
    cluster, clock = make()
    cluster.update_node(node("n1", provider_id="p1"))
    cluster.nominate([], "n1", ttl=5)
    assert cluster.is_node_nominated("p1")
    clock.advance(6)
    assert not cluster.is_node_nominated("p1")


def _up_with_a_pod_nominated_before_launch() -> tuple[Cluster, FakeClock]:
    """Pod a nominated to NodeClaim c1 when it was just created; c1 then launched,
    registered and initialized as Node n1 (provider ID p1), a not bound yet."""
    cluster, clock = make()
    a = pod("a")
    cluster.update_pod(a)
    cluster.update_nodeclaim(nodeclaim("c1"))
    cluster.nominate([cluster.scheduling_pod(a)], "c1")
    cluster.update_nodeclaim(nodeclaim("c1", provider_id="p1", registered=True,
                                       initialized=True))
    cluster.update_node(node("n1", provider_id="p1", nodepool="default"))
    return cluster, clock


def test_pods_nominated_before_launch_keep_the_machine_nominated_once_it_is_up() -> None:
    """The provisioner nominates pods to a NodeClaim it has just created, before the
    machine exists. Once the machine is up, and while those pods have not bound, it is
    nominated, so emptiness does not take a node that the pods are on their way to."""
    cluster, clock = _up_with_a_pod_nominated_before_launch()
    clock.advance(10)
    assert cluster.is_node_nominated("p1")
    clock.advance(11)                            # the TTL after it initialized has run out
    assert not cluster.is_node_nominated("p1")


def test_a_machine_is_no_longer_nominated_once_its_pods_have_bound() -> None:
    cluster, _ = _up_with_a_pod_nominated_before_launch()
    cluster.update_pod(pod("a", node_name="n1"))
    assert not cluster.is_node_nominated("p1")


# -- what the simulator is given ----------------------------------------------------------


def test_existing_nodes_carry_bound_and_nominated_pods_but_not_machines_going_away() -> None:
    cluster, _ = make()
    cluster.update_node(node("n1", provider_id="p1"))
    cluster.update_pod(pod("bound", node_name="n1"))
    waiting = pod("waiting")
    cluster.update_pod(waiting)
    cluster.update_nodeclaim(nodeclaim("c1", provider_id="p2"))
    cluster.nominate([cluster.scheduling_pod(waiting)], "c1")
    cluster.update_nodeclaim(nodeclaim("c2", provider_id="p3"))
    cluster.mark_for_deletion("p3")

    nodes = {n.name: n for n in cluster.existing_nodes()}
    assert set(nodes) == {"n1", "c1"}
    assert [p.name for p in nodes["n1"].pods] == ["bound"]
    assert [p.name for p in nodes["c1"].pods] == ["waiting"]
    assert not nodes["c1"].initialized


def test_in_flight_machines_expect_the_daemonset_pods_that_will_start_there() -> None:
    cluster, _ = make()
    cluster.update_daemonset(daemonset("agent", cpu="200m"))
    cluster.update_daemonset(daemonset("gpu-agent", node_selector={"gpu": "true"}))
    cluster.update_nodeclaim(nodeclaim("c1", provider_id="p1"))
    [existing] = cluster.existing_nodes()
    assert [p.name for p in existing.pods] == ["agent"]
    assert existing.pods[0].requests[res.CPU] == 200


def test_reschedulable_pods_come_from_machines_being_deleted() -> None:
    cluster, _ = make()
    cluster.update_node(node("n1", provider_id="p1", nodepool="default"))
    cluster.update_pod(pod("app", node_name="n1"))
    cluster.update_pod(pod("agent", node_name="n1", owner_kind="DaemonSet"))
    assert cluster.reschedulable_pods() == []
    assert not cluster.needs_capacity()
    cluster.update_node(node("n1", provider_id="p1", nodepool="default", deleting=True))
    assert [p.name for p in cluster.reschedulable_pods()] == ["app"]
    assert cluster.needs_capacity()


def test_nodepool_usage_sums_capacity_and_nodes_of_machines_not_going_away() -> None:
    cluster, _ = make()
    cluster.update_nodeclaim(nodeclaim("c1", provider_id="p1", cpu="4", memory="8Gi"))
    cluster.update_nodeclaim(nodeclaim("c2", provider_id="p2", cpu="2", memory="8Gi"))
    cluster.update_nodeclaim(nodeclaim("c3", nodepool="other", provider_id="p3", cpu="16"))
    usage = cluster.nodepool_usage("default")
    assert usage[res.CPU] == 6000 and usage["nodes"] == 2 and usage[res.MEMORY] == 16 * GIB
    cluster.mark_for_deletion("p2")
    assert cluster.nodepool_usage("default")[res.CPU] == 4000
    cluster.unmark_for_deletion("p2")
    assert cluster.nodepool_usage("default")[res.CPU] == 6000
    assert cluster.nodepool_usage("other")["nodes"] == 1


def test_nodepools_are_parsed_once_and_ordered_by_weight() -> None:
    cluster, _ = make()
    cluster.update_nodepool(nodepool("light", weight=1))
    cluster.update_nodepool(nodepool("heavy", weight=50))
    cluster.update_nodepool(nodepool("plain"))
    broken = nodepool("broken")
    broken["spec"]["template"]["spec"].pop("nodeClassRef")
    cluster.update_nodepool(broken)
    pools = cluster.nodepools()
    assert [p.name for p in pools] == ["heavy", "light", "broken", "plain"]
    entry = cluster.nodepool("broken")
    assert entry is not None and entry.model is None and "nodeClassRef" in (entry.error or "")
    assert all(p.model is not None for p in pools if p.name != "broken")


def test_needs_capacity_answers_what_the_two_pod_lists_would() -> None:
    cluster, _ = make()
    assert not cluster.needs_capacity()
    a = pod("a")
    cluster.update_pod(a)
    assert cluster.needs_capacity()
    cluster.update_nodeclaim(nodeclaim("c1"))
    cluster.nominate([cluster.scheduling_pod(a)], "c1")
    assert not cluster.needs_capacity()  # nominated to capacity on its way
    cluster.delete_nodeclaim(nodeclaim("c1"))  # the capacity went away: needed again
    assert cluster.needs_capacity() == bool(cluster.provisionable_pods()) is True


def test_a_pod_resized_in_place_is_counted_anew_on_its_node() -> None:
    # InPlacePodVerticalScaling: the spec shrinks first, the kubelet's status follows.
    cluster, _ = make()
    cluster.update_node(node("n1", provider_id="p1"))
    a = pod("a", cpu="3", node_name="n1", phase="Running")
    a["status"]["containerStatuses"] = [{"name": "app", "resources": {"requests": {"cpu": "3"}},
                                         "allocatedResources": {"cpu": "3"}}]
    cluster.update_pod(copy.deepcopy(a))  # a new object per event, as a watch
    state = cluster.node("p1")
    assert state is not None and state.pod_requests[res.CPU] == 3000
    a["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    cluster.update_pod(copy.deepcopy(a))
    assert state.pod_requests[res.CPU] == 3000   # still running and allocated at 3
    a["status"]["containerStatuses"][0].update(
        resources={"requests": {"cpu": "1"}}, allocatedResources={"cpu": "1"})
    cluster.update_pod(copy.deepcopy(a))
    assert state.pod_requests[res.CPU] == 1000   # resized
    a["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    cluster.update_pod(copy.deepcopy(a))
    assert state.pod_requests[res.CPU] == 2000   # growing: the spec counts at once
    assert state.pod_requests[res.PODS] == 1
