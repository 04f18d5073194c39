"""The provisioner plans NodeClaims where the pods' persistent volumes can be mounted,
and leaves out (with an event) pods whose claims cannot be resolved."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from provisioning_support import Harness, build

from karpy.state.testing import (
    node,
    nodepool,
    persistent_volume,
    persistent_volume_claim,
    pod,
    storage_class,
)

LOGGER = "controller"
ZONE = "topology.kubernetes.io/zone"
ALL_ZONES = {"test-zone-a", "test-zone-b", "test-zone-c"}


def claim_zones(claim: dict[str, Any]) -> set[str]:
    """The zones a created NodeClaim may launch in (all of them if unrestricted)."""
    for requirement in claim["spec"]["requirements"]:
        if requirement["key"] == ZONE:
            assert requirement["operator"] == "In"
            return set(requirement["values"])
    return set(ALL_ZONES)


def with_pool() -> Harness:
    h = build()
    h.cluster.update_nodepool(nodepool())
    return h


async def test_a_pod_whose_volume_lives_in_zone_b_gets_a_nodeclaim_in_zone_b() -> None:
    h = with_pool()
    h.cluster.volumes.update_volume(persistent_volume("pv-data", zones=["test-zone-b"]))
    h.cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-data"))
    h.cluster.update_pod(pod("db-0", claims=["data"]))

    assert await h.provisioner.provision() == 0

    [claim] = h.client.created
    assert claim_zones(claim) == {"test-zone-b"}
    assert h.cluster.nomination("default/db-0") == f"nodeclaim/{claim['metadata']['name']}"


async def test_without_the_volume_the_same_pod_may_go_to_any_zone() -> None:
    h = with_pool()
    h.cluster.update_pod(pod("db-0"))
    await h.provisioner.provision()
    [claim] = h.client.created
    assert claim_zones(claim) == ALL_ZONES


async def test_an_unbound_claim_limits_the_nodeclaim_to_its_class_topologies() -> None:
    h = with_pool()
    h.cluster.volumes.update_storage_class(
        storage_class("zonal", zones=["test-zone-a", "test-zone-c"]))
    h.cluster.volumes.update_claim(persistent_volume_claim("data", storage_class="zonal"))
    h.cluster.update_pod(pod("db-0", claims=["data"]))

    await h.provisioner.provision()

    [claim] = h.client.created
    assert claim_zones(claim) <= {"test-zone-a", "test-zone-c"}


async def test_an_ephemeral_volume_is_resolved_through_the_pods_generated_claim() -> None:
    h = with_pool()
    obj = pod("builder", ephemeral=["scratch"])
    h.cluster.volumes.update_storage_class(storage_class("zonal", zones=["test-zone-c"]))
    h.cluster.volumes.update_claim(
        persistent_volume_claim("builder-scratch", storage_class="zonal", owner=obj))
    h.cluster.update_pod(obj)

    await h.provisioner.provision()

    [claim] = h.client.created
    assert claim_zones(claim) == {"test-zone-c"}


async def test_a_pod_whose_claim_is_missing_is_ignored_with_an_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = with_pool()
    h.cluster.update_pod(pod("db-0", claims=["data"]))
    h.cluster.update_pod(pod("web-0"))
    caplog.set_level(logging.INFO, LOGGER)

    assert await h.provisioner.provision() == 0

    # The other pod is provisioned for; the one without its claim is not.
    [claim] = h.client.created
    assert claim["spec"]["resources"]["requests"]["pods"] == "1"
    assert h.cluster.is_provisionable("default/db-0")
    assert not h.cluster.is_provisionable("default/web-0")
    [event] = h.recorder.reasons("FailedScheduling")
    assert event.name == "db-0" and event.type == "Warning"
    assert event.message.startswith(
        'Failed to schedule pod, failed to validate pod, persistentvolumeclaim "default/data"')
    [line] = [r for r in caplog.records
              if r.name == LOGGER and r.getMessage() == "ignoring pod, failed to validate pod"]
    assert line.Pod == {"name": "db-0", "namespace": "default"}  # type: ignore[attr-defined]
    assert "not found" in line.error  # type: ignore[attr-defined]

    # Retried next round: still ignored, and the event is not written again.
    await h.provisioner.provision()
    assert len(h.client.created) == 1
    assert len(h.recorder.reasons("FailedScheduling")) == 1

    # Once the claim exists (and its volume), the pod is provisioned for, in its zone.
    h.cluster.volumes.update_volume(persistent_volume("pv-data", zones=["test-zone-a"]))
    h.cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-data"))
    await h.provisioner.provision()
    assert len(h.client.created) == 2
    assert claim_zones(h.client.created[-1]) == {"test-zone-a"}


async def test_a_pod_whose_storage_class_is_missing_is_ignored_with_an_event() -> None:
    h = with_pool()
    h.cluster.volumes.update_claim(persistent_volume_claim("data", storage_class="gone"))
    h.cluster.update_pod(pod("db-0", claims=["data"]))

    await h.provisioner.provision()

    assert h.client.created == []
    [event] = h.recorder.reasons("FailedScheduling")
    assert 'storageclass "gone"' in event.message and "not found" in event.message


async def test_volumes_in_zones_that_cannot_meet_are_reported_not_provisioned() -> None:
    h = with_pool()
    h.cluster.volumes.update_volume(persistent_volume("pv-a", zones=["test-zone-a"]))
    h.cluster.volumes.update_volume(persistent_volume("pv-b", zones=["test-zone-b"]))
    h.cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-a"))
    h.cluster.volumes.update_claim(persistent_volume_claim("logs", volume_name="pv-b"))
    h.cluster.update_pod(pod("db-0", claims=["data", "logs"]))

    await h.provisioner.provision()

    assert h.client.created == []
    [event] = h.recorder.reasons("FailedScheduling")
    assert event.name == "db-0" and ZONE in event.message


async def test_a_pod_leaving_a_deleted_node_is_replaced_where_its_volume_is() -> None:
    h = with_pool()
    h.cluster.volumes.update_volume(persistent_volume("pv-data", zones=["test-zone-c"]))
    h.cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-data"))
    h.cluster.update_node(node("old", provider_id="fake://old", nodepool="default",
                               labels={ZONE: "test-zone-c"}, deleting=True))
    h.cluster.update_pod(pod("db-0", node_name="old", claims=["data"], ephemeral=["tmp"]))

    await h.provisioner.provision()

    # Its ephemeral claim (not in the model) will be created anew: it does not block.
    [claim] = h.client.created
    assert claim_zones(claim) == {"test-zone-c"}
