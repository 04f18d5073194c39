"""Volume topology in the cluster model: a pod's claims resolved to where it can run."""

from __future__ import annotations

from typing import Any, cast

import pytest

from karpy.runtime import Cache, Client, freeze, kinds
from karpy.runtime.testing import FakeClock
from karpy.scheduling import Pod, Requirements
from karpy.state import Cluster, VolumeError
from karpy.state.testing import (
    node,
    persistent_volume,
    persistent_volume_claim,
    pod,
    storage_class,
)

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def make() -> Cluster:
    return Cluster(clock=FakeClock())


def zones(alternatives: tuple[Requirements, ...]) -> list[list[str]]:
    """Each alternative's allowed zones."""
    return [alternative[ZONE].sorted_values() for alternative in alternatives]


def pending(cluster: Cluster, obj: dict[str, Any]) -> Pod:
    cluster.update_pod(obj)
    return cluster.scheduling_pod(obj)


def test_a_bound_claim_restricts_the_pod_to_its_volumes_zone() -> None:
    cluster = make()
    cluster.volumes.update_volume(persistent_volume("pv-data", zones=["test-zone-b"]))
    cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-data"))
    parsed = pending(cluster, pod("db-0", claims=["data"]))

    resolved = cluster.with_volume_topology(parsed)

    assert zones(resolved.volume_requirements) == [["test-zone-b"]]
    # Everything else about the pod is unchanged, and it stays one group with its peers.
    assert (resolved.key, resolved.requests) == (parsed.key, parsed.requests)
    twin = cluster.with_volume_topology(pending(cluster, pod("db-1", claims=["data"])))
    assert twin.signature == resolved.signature


def test_every_node_affinity_term_of_the_volume_is_an_alternative() -> None:
    cluster = make()
    cluster.volumes.update_volume(persistent_volume(
        "pv-data",
        node_selector_terms=[[{"key": ZONE, "operator": "In", "values": ["test-zone-a"]}],
                             [{"key": ZONE, "operator": "In", "values": ["test-zone-c"]}]],
    ))
    cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-data"))
    resolved = cluster.with_volume_topology(pending(cluster, pod("db-0", claims=["data"])))
    assert zones(resolved.volume_requirements) == [["test-zone-a"], ["test-zone-c"]]


def test_an_unbound_claim_follows_its_storage_class_allowed_topologies() -> None:
    cluster = make()
    cluster.volumes.update_storage_class(
        storage_class("zonal", zones=["test-zone-a", "test-zone-c"]))
    cluster.volumes.update_claim(persistent_volume_claim("data", storage_class="zonal"))
    resolved = cluster.with_volume_topology(pending(cluster, pod("db-0", claims=["data"])))
    assert zones(resolved.volume_requirements) == [["test-zone-a", "test-zone-c"]]


def test_a_storage_class_without_allowed_topologies_restricts_nothing() -> None:
    cluster = make()
    cluster.volumes.update_storage_class(storage_class("anywhere"))
    cluster.volumes.update_claim(persistent_volume_claim("data", storage_class="anywhere"))
    parsed = pending(cluster, pod("db-0", claims=["data"]))
    assert cluster.with_volume_topology(parsed).volume_requirements == ()


def test_several_volumes_must_all_be_reachable() -> None:
    cluster = make()
    cluster.volumes.update_volume(persistent_volume("pv-a", zones=["test-zone-a", "test-zone-b"]))
    cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-a"))
    cluster.volumes.update_storage_class(
        storage_class("zonal", zones=["test-zone-b", "test-zone-c"]))
    cluster.volumes.update_claim(persistent_volume_claim("logs", storage_class="zonal"))
    resolved = cluster.with_volume_topology(
        pending(cluster, pod("db-0", claims=["data", "logs"])))
    assert zones(resolved.volume_requirements) == [["test-zone-b"]]


def test_a_missing_claim_makes_the_pod_unresolvable_naming_the_claim() -> None:
    cluster = make()
    parsed = pending(cluster, pod("db-0", claims=["data"]))
    with pytest.raises(VolumeError, match=r'persistentvolumeclaim "default/data".*not found'):
        cluster.with_volume_topology(parsed)
    # Once the claim and its volume exist, the same pod resolves (nothing stale cached).
    cluster.volumes.update_volume(persistent_volume("pv-data", zones=["test-zone-c"]))
    cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-data"))
    assert zones(cluster.with_volume_topology(parsed).volume_requirements) == [["test-zone-c"]]


def test_a_missing_storage_class_makes_the_pod_unresolvable_naming_it() -> None:
    cluster = make()
    cluster.volumes.update_claim(persistent_volume_claim("data", storage_class="gone"))
    parsed = pending(cluster, pod("db-0", claims=["data"]))
    with pytest.raises(VolumeError, match=r'storageclass "gone".*not found'):
        cluster.with_volume_topology(parsed)


@pytest.mark.parametrize(
    ("claim", "objects", "message"),
    [
        (persistent_volume_claim("data"), [], "has no spec.storageClassName"),
        (persistent_volume_claim("data", storage_class="fast"),
         [storage_class("fast", binding_mode="Immediate")], "binds Immediately"),
        (persistent_volume_claim("data", storage_class="fast", deleting=True),
         [storage_class("fast")], "is being deleted"),
        (persistent_volume_claim("data", volume_name="pv-data"), [],
         'persistentvolume "pv-data", which does not exist'),
        (persistent_volume_claim("data", volume_name="pv-data", bind_completed=False),
         [persistent_volume("pv-data")], "is not bound yet"),
        (persistent_volume_claim("data", volume_name="pv-data", phase="Lost"),
         [persistent_volume("pv-data")], "is Lost"),
        (persistent_volume_claim("data", volume_name="pv-data"),
         [persistent_volume("pv-data", deleting=True)],
         'persistentvolume "pv-data" .* is being deleted'),
    ],
    ids=["no-class", "immediate", "claim-deleting", "volume-missing", "bind-incomplete",
         "lost", "volume-deleting"],
)
def test_claims_kube_scheduler_would_reject_make_the_pod_unresolvable(
    claim: dict[str, Any], objects: list[dict[str, Any]], message: str
) -> None:
    cluster = make()
    cluster.volumes.update_claim(claim)
    for obj in objects:
        if obj["kind"] == "StorageClass":
            cluster.volumes.update_storage_class(obj)
        else:
            cluster.volumes.update_volume(obj)
    with pytest.raises(VolumeError, match=message):
        cluster.with_volume_topology(pending(cluster, pod("db-0", claims=["data"])))


def test_an_ephemeral_volume_resolves_through_the_claim_generated_for_the_pod() -> None:
    cluster = make()
    obj = pod("builder", ephemeral=["scratch"])
    parsed = pending(cluster, obj)
    with pytest.raises(VolumeError, match='"default/builder-scratch" of ephemeral volume'):
        cluster.with_volume_topology(parsed)

    cluster.volumes.update_storage_class(storage_class("zonal", zones=["test-zone-a"]))
    cluster.volumes.update_claim(
        persistent_volume_claim("builder-scratch", storage_class="zonal", owner=obj))
    assert zones(cluster.with_volume_topology(parsed).volume_requirements) == [["test-zone-a"]]


def test_an_ephemeral_claim_of_another_pod_is_rejected() -> None:
    cluster = make()
    cluster.volumes.update_storage_class(storage_class("zonal", zones=["test-zone-a"]))
    cluster.volumes.update_claim(persistent_volume_claim(
        "builder-scratch", storage_class="zonal", owner=pod("someone-else")))
    with pytest.raises(VolumeError, match="was not created for pod"):
        cluster.with_volume_topology(pending(cluster, pod("builder", ephemeral=["scratch"])))


def test_a_pod_leaving_its_node_drops_ephemeral_claims_and_local_hostname_pins() -> None:
    cluster = make()
    local = persistent_volume("pv-local", node_selector_terms=[[
        {"key": HOSTNAME, "operator": "In", "values": ["node-1"]},
        {"key": ZONE, "operator": "In", "values": ["test-zone-b"]},
    ]], local_path="/mnt/disk")
    cluster.volumes.update_volume(local)
    cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-local"))
    obj = pod("db-0", claims=["data"], ephemeral=["scratch"], node_name="node-1")
    parsed = pending(cluster, obj)

    moving = cluster.with_volume_topology(parsed, bound=True)
    [alternative] = moving.volume_requirements
    assert HOSTNAME not in alternative      # the new node cannot be node-1
    assert alternative[ZONE].sorted_values() == ["test-zone-b"]


def test_a_pending_pod_keeps_its_local_volumes_hostname_pin() -> None:
    cluster = make()
    cluster.volumes.update_volume(persistent_volume("pv-local", node_selector_terms=[[
        {"key": HOSTNAME, "operator": "In", "values": ["node-1"]},
    ]], local_path="/mnt/disk"))
    cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-local"))
    resolved = cluster.with_volume_topology(pending(cluster, pod("db-0", claims=["data"])))
    [alternative] = resolved.volume_requirements
    assert alternative[HOSTNAME].sorted_values() == ["node-1"]


def test_pods_without_claims_are_returned_as_they_are() -> None:
    cluster = make()
    parsed = pending(cluster, pod("web-0"))
    assert cluster.with_volume_topology(parsed) is parsed


def test_resolutions_are_reused_until_a_volume_object_changes() -> None:
    cluster = make()
    cluster.volumes.update_volume(persistent_volume("pv-data", zones=["test-zone-b"]))
    cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-data"))
    parsed = pending(cluster, pod("db-0", claims=["data"]))
    first = cluster.with_volume_topology(parsed)
    assert cluster.with_volume_topology(parsed) is first
    cluster.volumes.update_volume(persistent_volume("pv-data", zones=["test-zone-c"]))
    assert zones(cluster.with_volume_topology(parsed).volume_requirements) == [["test-zone-c"]]
    cluster.volumes.delete_volume(persistent_volume("pv-data"))
    with pytest.raises(VolumeError, match="does not exist"):
        cluster.with_volume_topology(parsed)


def test_attach_follows_claims_volumes_and_storage_classes_from_the_shared_cache() -> None:
    cache = Cache(cast(Client, object()))
    # Objects already cached are replayed when the model attaches.
    cache.informer(kinds.PERSISTENT_VOLUME).store.put(
        freeze(persistent_volume("pv-data", zones=["test-zone-b"])))
    cache.informer(kinds.PERSISTENT_VOLUME_CLAIM).store.put(
        freeze(persistent_volume_claim("data", volume_name="pv-data")))
    cache.informer(kinds.STORAGE_CLASS).store.put(freeze(storage_class("zonal")))
    cluster = make()
    cluster.attach(cache)

    watched = {informer.kind for informer in cache.informers()}
    assert {kinds.PERSISTENT_VOLUME, kinds.PERSISTENT_VOLUME_CLAIM,
            kinds.STORAGE_CLASS} <= watched
    assert not cluster.synced          # their first lists count towards the model's sync
    resolved = cluster.with_volume_topology(pending(cluster, pod("db-0", claims=["data"])))
    assert zones(resolved.volume_requirements) == [["test-zone-b"]]
    cluster.detach()


def test_pending_pods_carry_volume_topology_and_the_unresolvable_are_reported() -> None:
    """``Cluster.pending_pods``: the provisionable pods as the simulator sees them, each
    restricted to its volumes' zones; a pod whose claim is missing is left out and
    reported with the reason; a pod the caller skips is never resolved."""
    cluster = make()
    cluster.volumes.update_volume(persistent_volume("pv-data", zones=["test-zone-b"]))
    cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-data"))
    cluster.update_pod(freeze(pod("db-0", claims=["data"])))
    cluster.update_pod(freeze(pod("lost", claims=["gone"])))
    cluster.update_pod(freeze(pod("skipped", claims=["gone"])))
    cluster.update_pod(freeze(pod("web")))
    invalid: list[tuple[str, str]] = []

    pods = cluster.pending_pods(
        skip=lambda obj, parsed: obj["metadata"]["name"] == parsed.name == "skipped",
        invalid=lambda parsed, exc: invalid.append((parsed.key, str(exc))),
    )

    by_key = {p.key: p for p in pods}
    assert sorted(by_key) == ["default/db-0", "default/web"]
    assert zones(by_key["default/db-0"].volume_requirements) == [["test-zone-b"]]
    assert by_key["default/web"].volume_requirements == ()
    [(key, reason)] = invalid
    assert key == "default/lost"
    assert 'persistentvolumeclaim "default/gone"' in reason
    # Without callbacks the unresolvable pods are still left out.
    assert sorted(p.key for p in cluster.pending_pods()) == ["default/db-0", "default/web"]


# -- the volumes a pod attaches, for attachment limits ----------------------------------


def test_a_pod_attaches_its_claims_per_csi_driver() -> None:
    cluster = make()
    cluster.volumes.update_volume(persistent_volume("pv-data"))  # csi test.csi.k8s.io
    cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-data"))
    in_tree = storage_class("gp2")
    in_tree["provisioner"] = "kubernetes.io/aws-ebs"
    cluster.volumes.update_storage_class(in_tree)
    cluster.volumes.update_claim(persistent_volume_claim("logs", storage_class="gp2"))
    resolved = cluster.with_volume_topology(
        pending(cluster, pod("db-0", claims=["data", "logs"])))
    assert dict(resolved.volumes) == {
        "test.csi.k8s.io": frozenset({"default/data"}),
        "ebs.csi.aws.com": frozenset({"default/logs"}),  # the in-tree name translated
    }


def test_a_volume_of_no_csi_driver_is_not_counted() -> None:
    cluster = make()
    cluster.volumes.update_volume(persistent_volume("pv-local", local_path="/mnt/x"))
    cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-local"))
    resolved = cluster.with_volume_topology(pending(cluster, pod("db-0", claims=["data"])))
    assert dict(resolved.volumes) == {}


def test_an_existing_node_carries_its_csinode_limits_and_its_pods_volumes() -> None:
    cluster = make()
    cluster.update_node(node("n1", provider_id="p1", nodepool="default"))
    cluster.volumes.update_volume(persistent_volume("pv-data"))
    cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-data"))
    cluster.update_pod(pod("db-0", claims=["data"], node_name="n1"))
    cluster.update_csinode({"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": "test.csi.k8s.io", "nodeID": "n1", "allocatable": {"count": 3}},
        {"name": "unbounded.csi.k8s.io", "nodeID": "n1"},
    ]}})
    [existing] = cluster.existing_nodes()
    assert dict(existing.volume_limits) == {"test.csi.k8s.io": 3, "unbounded.csi.k8s.io": None}
    assert dict(existing.attached) == {"test.csi.k8s.io": frozenset({"default/data"})}
    cluster.delete_csinode({"metadata": {"name": "n1"}})
    [existing] = cluster.existing_nodes()
    assert dict(existing.volume_limits) == {}
