"""An asynchronous, idempotent create: long-running operations that outlast a reconcile go
on in the background, a retry picks up the launch in flight or the VM an earlier attempt
made (never replacing or deleting it), and a launch that fails after it was reported
launched deletes its NodeClaim. Against the ARM test server with slow LROs
(``lro_seconds``) and its PropertyChangeNotAllowed refusal."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import aiohttp
import pytest
from azurearm.server import ArmServer
from karpy_azure import AzureCloudProvider

from karpy.apis import NodeClaim, NodePool
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import NODE_CLAIM as NODE_CLAIM_KIND
from karpy.cloudprovider import CreateError, NodeClaimNotFoundError, OfferingKey
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.runtime import errors
from karpy.runtime.testing import FakeClient

POOL: NodePool = make_nodepool(
    NodeClassReference(group="karpenter.azure.com", kind="AKSNodeClass", name="default"),
    name="general",
)
D2 = {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": ["Standard_D2s_v3"]}


def claim(*requirements: dict[str, Any]) -> NodeClaim:
    return make_nodeclaim(POOL, requirements=requirements, requests={"cpu": "100m"})


def wait_at_most(azure: AzureCloudProvider, seconds: float) -> None:
    azure.settings = dataclasses.replace(azure.settings, launch_wait=seconds)


def puts(arm: ArmServer, kind: str) -> int:
    return len([r for r in arm.requests if r.method == "PUT" and r.path.rsplit("/", 2)[-2] == kind])


def deletes(arm: ArmServer) -> list[str]:
    return [r.path for r in arm.requests if r.method == "DELETE"]


async def finished(azure: AzureCloudProvider, name: str) -> None:
    launch = azure.launches.get(name)
    if launch is not None and launch.task is not None:
        await asyncio.wait({launch.task}, timeout=30)


async def test_lros_longer_than_the_wait_are_reported_launched_and_finish_alone(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    wait_at_most(azure, 0.3)
    arm.lro_seconds = 1.0  # every operation outlasts what one create waits
    launched = await azure.create(claim())
    returned = asyncio.get_running_loop().time()
    name = "aks-" + (launched.metadata.name or "")
    assert launched.status.provider_id and launched.status.provider_id.endswith(name)
    # create returned before its VM's operation was done (the bound is the server's own
    # clock for that LRO, not a fixed number of seconds, which a loaded machine missed),
    # and the VM is still Creating: had create waited, its poll would have seen Succeeded.
    assert returned < arm.ready_at("vm", name)
    assert arm.state.vms[name]["properties"]["provisioningState"] == "Creating"
    await finished(azure, name)
    assert arm.state.vms[name]["properties"]["provisioningState"] == "Succeeded"
    assert list(arm.extensions_of(name)) == ["computeAksLinuxBilling"]
    assert (puts(arm, "virtualMachines"), puts(arm, "networkInterfaces")) == (1, 1)
    assert deletes(arm) == []


async def test_a_cancelled_create_is_picked_up_by_the_next_whatever_it_would_choose(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    wait_at_most(azure, 0.2)
    arm.lro_seconds = 1.0
    nodeclaim = claim(D2)
    name = "aks-" + (nodeclaim.metadata.name or "")
    # the reconcile is cancelled (its timeout, a lost lease) while the NIC is created
    reconcile = asyncio.create_task(azure.create(nodeclaim))
    for _ in range(1000):
        if azure.launches.get(name) is not None:
            break
        await asyncio.sleep(0.01)
    reconcile.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reconcile
    assert name not in arm.state.vms
    first = azure.launches.get(name)
    assert first is not None
    chosen = first.launched.metadata.labels
    # meanwhile that offering was marked unavailable: a fresh choice would differ
    azure.unavailable.mark(
        [OfferingKey(chosen[LABEL_INSTANCE_TYPE], chosen[LABEL_ZONE], chosen[LABEL_CAPACITY_TYPE])],
        reason="test", ttl=timedelta(minutes=5),
    )
    launched = await azure.create(nodeclaim)
    for key in (LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE):
        assert launched.metadata.labels[key] == chosen[key]
    await finished(azure, name)
    assert list(arm.state.vms) == [name] and list(arm.state.nics) == [name]
    assert (puts(arm, "virtualMachines"), puts(arm, "networkInterfaces")) == (1, 1)
    assert deletes(arm) == []


async def test_an_existing_vm_is_reused_never_replaced_or_deleted(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    nodeclaim = claim(D2)
    first = await azure.create(nodeclaim)
    name = "aks-" + (nodeclaim.metadata.name or "")
    labels = first.metadata.labels
    # karpy restarted (nothing in memory) and the offering it chose is now unavailable
    await azure.launches.aclose()
    azure.unavailable.mark(
        [OfferingKey(labels[LABEL_INSTANCE_TYPE], labels[LABEL_ZONE], labels[LABEL_CAPACITY_TYPE])],
        reason="test", ttl=timedelta(minutes=5),
    )
    again = await azure.create(nodeclaim)
    assert again.status.provider_id == first.status.provider_id
    for key in (LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE):
        assert again.metadata.labels[key] == labels[key]
    assert again.status.image_id == first.status.image_id
    assert puts(arm, "virtualMachines") == 1
    assert deletes(arm) == []
    assert list(arm.state.vms) == [name]


async def test_an_adopted_vm_gets_the_extensions_its_creator_did_not_make(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    nodeclaim = claim()
    await azure.create(nodeclaim)
    name = "aks-" + (nodeclaim.metadata.name or "")
    arm.state.extensions.clear()  # the earlier attempt died before its extensions
    await azure.launches.aclose()
    await azure.create(nodeclaim)
    await finished(azure, name)
    assert list(arm.extensions_of(name)) == ["computeAksLinuxBilling"]
    assert puts(arm, "virtualMachines") == 1


async def test_a_vm_whose_creator_died_mid_operation_is_finished_by_the_next(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    nodeclaim = claim()
    name = "aks-" + (nodeclaim.metadata.name or "")
    arm.hold_vm_creates = True  # the VM exists, its creator gets no answer
    first = asyncio.create_task(azure.create(nodeclaim))
    for _ in range(1000):
        if name in arm.state.vms:
            break
        await asyncio.sleep(0.01)
    first.cancel()
    await azure.launches.aclose()  # the process died: nothing in memory, no poller
    arm.hold_vm_creates = False
    launched = await azure.create(nodeclaim)
    assert launched.status.provider_id and launched.status.provider_id.endswith(name)
    await finished(azure, name)
    assert arm.state.vms[name]["properties"]["provisioningState"] == "Succeeded"
    assert list(arm.extensions_of(name)) == ["computeAksLinuxBilling"]
    assert (puts(arm, "virtualMachines"), puts(arm, "networkInterfaces")) == (1, 1)
    assert deletes(arm) == []


async def test_a_refused_put_leaves_the_vm_an_earlier_attempt_made(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    nodeclaim = claim(D2)
    first = await azure.create(nodeclaim)
    name = "aks-" + (nodeclaim.metadata.name or "")
    await azure.launches.aclose()
    labels = first.metadata.labels
    azure.unavailable.mark(
        [OfferingKey(labels[LABEL_INSTANCE_TYPE], labels[LABEL_ZONE], labels[LABEL_CAPACITY_TYPE])],
        reason="test", ttl=timedelta(minutes=5),
    )
    # the GET misses the VM (a stale read), so a PUT with another zone goes out
    arm.fail("vm.get", "ResourceNotFound", status=404)
    with pytest.raises(CreateError, match="PropertyChangeNotAllowed"):
        await azure.create(nodeclaim)
    assert deletes(arm) == []
    assert list(arm.state.vms) == [name] and list(arm.state.nics) == [name]
    assert arm.state.vms[name]["properties"]["provisioningState"] == "Succeeded"


async def test_a_handed_over_launch_that_fails_deletes_its_vm_nic_and_nodeclaim(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    client = FakeClient()
    azure.client = client  # type: ignore[assignment]
    stored = await client.create(NODE_CLAIM_KIND, claim().to_dict())
    nodeclaim = NodeClaim.model_validate(stored)
    name = "aks-" + (nodeclaim.metadata.name or "")
    wait_at_most(azure, 0.3)
    arm.lro_seconds = 1.0
    arm.fail("vm.create", "InternalExecutionError", lro=True)
    launched = await azure.create(nodeclaim)
    assert launched.status.provider_id
    await finished(azure, name)
    for _ in range(100):
        if not arm.state.vms and not arm.state.nics:
            break
        await asyncio.sleep(0.1)
    assert not arm.state.vms and not arm.state.nics
    for _ in range(50):
        try:
            await client.get(NODE_CLAIM_KIND, nodeclaim.metadata.name or "")
        except errors.NotFound:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("the NodeClaim of the failed launch was not deleted")


async def test_arm_refuses_changing_an_immutable_property(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    launched = await azure.create(claim())
    name = "aks-" + (launched.metadata.name or "")
    body = arm.bodies("PUT", "virtualMachines/" + name)[0]
    other = {**body, "zones": ["3" if body.get("zones") != ["3"] else "1"]}
    async with aiohttp.ClientSession() as session, session.put(
        f"{arm.url}/subscriptions/x/resourceGroups/rg/providers/Microsoft.Compute/"
        f"virtualMachines/{name}?api-version=2024-07-01",
        json=other, headers={"Authorization": "Bearer t"}, ssl=False,
    ) as response:
        answer = await response.json()
    assert response.status == 409
    assert answer["error"]["code"] == "PropertyChangeNotAllowed"
    assert answer["error"]["message"] == "Changing property 'zones' is not allowed."
    assert arm.state.vms[name]["zones"] == body.get("zones")


async def test_deleting_a_nodeclaim_stops_its_launch_in_flight(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    client = FakeClient()
    azure.client = client  # type: ignore[assignment]
    stored = await client.create(NODE_CLAIM_KIND, claim().to_dict())
    nodeclaim = NodeClaim.model_validate(stored)
    name = "aks-" + (nodeclaim.metadata.name or "")
    wait_at_most(azure, 0.2)
    arm.lro_seconds = 1.0
    launched = await azure.create(nodeclaim)  # handed over: the VM still provisioning
    launch = azure.launches.get(name)
    assert launch is not None and launch.task is not None and not launch.task.done()
    arm.lro_seconds = 0.0
    await azure.delete(launched)
    with pytest.raises(NodeClaimNotFoundError):
        await azure.delete(launched)
    assert launch.task.cancelled()
    assert azure.launches.get(name) is None
    assert not arm.state.vms and not arm.state.nics
    # the stopped launch is not a failed one: its NodeClaim is left to termination
    await client.get(NODE_CLAIM_KIND, nodeclaim.metadata.name or "")


async def test_a_vm_deleted_and_created_again_under_its_name_stays(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    # the ARM test server applies each operation once: the first VM's finished delete
    # does not remove the second VM of that name when it is read
    nodeclaim = claim()
    name = "aks-" + (nodeclaim.metadata.name or "")
    first = await azure.create(nodeclaim)
    await azure.delete(first)
    again = await azure.create(nodeclaim)
    await finished(azure, name)
    got = await azure.get(again.status.provider_id or "")
    assert got.status.provider_id == again.status.provider_id
    assert name in arm.state.vms and name in arm.state.nics
