"""Launching, reading back and deleting VMs through the real SDK clients against the ARM
test server: the request bodies ARM receives, capacity errors, retries, LRO failures and
clean-up."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from typing import Any

import pytest
from azure_support import IMAGE_VERSION, NODE_RG, SUBNET, ready_node_class
from azurearm.server import CAPACITY_CODES, ArmServer
from karpy_azure import AzureCloudProvider, StaticNodeClasses

from karpy.apis import NodeClaim, NodePool
from karpy.apis.labels import LABEL_ARCH, LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import CreateError, InsufficientCapacityError, NodeClaimNotFoundError
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

POOL: NodePool = make_nodepool(
    NodeClassReference(group="karpenter.azure.com", kind="AKSNodeClass", name="default"),
    name="general",
)


def claim(*requirements: dict[str, Any], cpu: str = "100m") -> NodeClaim:
    return make_nodeclaim(POOL, requirements=requirements, requests={"cpu": cpu})


def pin(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


async def test_create_sends_what_arm_expects(azure: AzureCloudProvider, arm: ArmServer) -> None:
    launched = await azure.create(claim(pin(LABEL_CAPACITY_TYPE, "on-demand")))
    name = "aks-" + (launched.metadata.name or "")
    assert launched.status.provider_id == (
        f"azure:///subscriptions/{azure.settings.subscription_id}/resourceGroups/"
        f"{NODE_RG.lower()}/providers/Microsoft.Compute/virtualMachines/{name}"
    )
    # NIC first, then VM, then the AKS billing extension
    puts = [r for r in arm.requests if r.method == "PUT"]
    assert [r.path.rsplit("/", 2)[-2] for r in puts] == [
        "networkInterfaces", "virtualMachines", "extensions"
    ]
    nic = arm.bodies("PUT", "networkInterfaces/" + name)[0]
    config = nic["properties"]["ipConfigurations"][0]
    assert config["properties"]["subnet"]["id"] == SUBNET
    assert config["properties"]["primary"] is True
    assert nic["properties"]["enableAcceleratedNetworking"] is True
    vm = arm.bodies("PUT", "virtualMachines/" + name)[0]
    props = vm["properties"]
    size = launched.metadata.labels[LABEL_INSTANCE_TYPE]
    assert props["hardwareProfile"]["vmSize"] == size
    assert props["priority"] == "Regular"
    assert "evictionPolicy" not in props
    assert props["storageProfile"]["osDisk"]["deleteOption"] == "Delete"
    assert props["storageProfile"]["osDisk"]["diskSizeGB"] == 128
    assert props["storageProfile"]["imageReference"]["communityGalleryImageId"].endswith(
        "/images/2204gen2containerd/versions/" + IMAGE_VERSION
    )
    nic_ref = props["networkProfile"]["networkInterfaces"][0]
    assert nic_ref["id"].endswith("/networkInterfaces/" + name)
    assert nic_ref["properties"] == {"primary": True, "deleteOption": "Delete"}
    custom = base64.b64decode(props["osProfile"]["customData"]).decode()
    assert "provision_start.sh" in custom and "karpenter.sh/nodepool=general" in custom
    zone = launched.metadata.labels[LABEL_ZONE]
    assert vm["zones"] == [zone.rsplit("-", 1)[1]]
    assert vm["location"] == "southcentralus"
    assert vm["tags"]["karpenter.sh_nodepool"] == "general"
    assert vm["tags"]["karpenter.azure.com_cluster"] == "demo"
    assert launched.status.image_id == props["storageProfile"]["imageReference"][
        "communityGalleryImageId"
    ]
    # both were long-running operations, polled through InProgress to Succeeded
    assert sum("/operations/" in r.path for r in arm.requests) >= 4
    assert arm.state.vms[name]["properties"]["provisioningState"] == "Succeeded"


async def test_spot_vms_are_evicted_by_delete_at_any_price(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    launched = await azure.create(claim(pin(LABEL_CAPACITY_TYPE, "spot")))
    assert launched.metadata.labels[LABEL_CAPACITY_TYPE] == "spot"
    assert launched.metadata.labels["kubernetes.azure.com/scalesetpriority"] == "spot"
    props = arm.bodies("PUT", "virtualMachines/")[0]["properties"]
    assert props["priority"] == "Spot"
    assert props["evictionPolicy"] == "Delete"
    assert props["billingProfile"] == {"maxPrice": -1}


@pytest.mark.parametrize("lro", [False, True], ids=["sync", "lro"])
@pytest.mark.parametrize("code", CAPACITY_CODES)
async def test_capacity_errors_mark_offerings_and_leave_nothing(
    azure: AzureCloudProvider, arm: ArmServer, code: str, lro: bool
) -> None:
    arm.fail("vm.create", code, lro=lro)
    asked = claim(pin(LABEL_INSTANCE_TYPE, "Standard_D2s_v3"), pin(LABEL_CAPACITY_TYPE, "spot"))
    with pytest.raises(InsufficientCapacityError) as raised:
        await azure.create(asked)
    refused = set(raised.value.offerings)
    assert refused and all(k.instance_type == "Standard_D2s_v3" for k in refused)
    assert code in str(raised.value)
    assert not arm.state.vms and not arm.state.nics, "a failed launch left resources"
    types = {it.name: it for it in await azure.get_instance_types(POOL)}
    state = {(o.zone, o.capacity_type): o.available for o in types["Standard_D2s_v3"].offerings}
    for key in refused:
        assert state[(key.zone, key.capacity_type)] is False
    # the next launch avoids what was refused: D2s_v3 elsewhere, or another size when
    # the error ruled out every D2s_v3 offering (AllocationFailed, Overconstrained)
    left = any(state.values())
    launched = await azure.create(
        claim(pin(LABEL_INSTANCE_TYPE, "Standard_D2s_v3")) if left else claim()
    )
    labels = launched.metadata.labels
    if not left:
        assert code in ("AllocationFailed", "OverconstrainedAllocationRequest")
        assert labels[LABEL_INSTANCE_TYPE] != "Standard_D2s_v3"
    assert (labels[LABEL_INSTANCE_TYPE], labels[LABEL_ZONE], labels[LABEL_CAPACITY_TYPE]) not in {
        (k.instance_type, k.zone, k.capacity_type) for k in refused
    }


async def test_zonal_allocation_failure_moves_to_another_zone(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    arm.fail("vm.create", "ZonalAllocationFailed", lro=True)
    with pytest.raises(InsufficientCapacityError) as raised:
        await azure.create(claim(pin(LABEL_INSTANCE_TYPE, "Standard_D2s_v3")))
    zones = {k.zone for k in raised.value.offerings}
    assert len(zones) == 1
    assert {k.capacity_type for k in raised.value.offerings} == {"on-demand", "spot"}
    launched = await azure.create(claim(pin(LABEL_INSTANCE_TYPE, "Standard_D2s_v3")))
    assert launched.metadata.labels[LABEL_ZONE] not in zones


async def test_family_quota_exhaustion_marks_the_capacity_type(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    arm.fail(
        "vm.create",
        "OperationNotAllowed",
        message="Operation could not be completed as it results in exceeding approved "
        "standardDSv3Family Family Cores quota. Current Limit: 0",
    )
    with pytest.raises(InsufficientCapacityError) as raised:
        await azure.create(
            claim(
                pin(LABEL_INSTANCE_TYPE, "Standard_D2s_v3"), pin(LABEL_CAPACITY_TYPE, "on-demand")
            )
        )
    assert {k.capacity_type for k in raised.value.offerings} == {"on-demand"}
    assert {k.zone for k in raised.value.offerings} == {
        "southcentralus-1", "southcentralus-2", "southcentralus-3"
    }


async def test_other_failures_are_create_errors_and_clean_up(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    arm.fail("vm.create", "InternalExecutionError", lro=True)
    with pytest.raises(CreateError, match="InternalExecutionError"):
        await azure.create(claim())
    assert not arm.state.vms and not arm.state.nics
    arm.fail("vm.create", "InvalidParameter", status=400)
    with pytest.raises(CreateError, match="InvalidParameter"):
        await azure.create(claim())
    assert not arm.state.vms and not arm.state.nics


async def test_throttling_and_server_errors_are_retried(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    arm.fail("vm.create", "TooManyRequests", status=429, retry_after=1)
    arm.fail("vm.create", "InternalServerError", status=500)
    launched = await azure.create(claim())
    assert launched.status.provider_id
    assert len([r for r in arm.requests if r.method == "PUT"
                and r.path.rsplit("/", 2)[-2] == "virtualMachines"]) == 3


async def test_a_retry_after_longer_than_the_retry_cap_fails_at_once(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    # as the Go SDK (MaxRetryDelay 60 s): an hour's Retry-After is not slept through in a
    # reconcile; the error comes back now and the reconcile's backoff takes over
    arm.fail("vm.create", "TooManyRequests", status=429, retry_after=3600)
    started = asyncio.get_running_loop().time()
    with pytest.raises(CreateError, match="TooManyRequests"):
        await asyncio.wait_for(azure.create(claim()), 30)
    assert asyncio.get_running_loop().time() - started < 10
    assert not arm.state.vms and not arm.state.nics


async def test_get_list_and_delete(azure: AzureCloudProvider, arm: ArmServer) -> None:
    launched = await azure.create(claim(pin(LABEL_CAPACITY_TYPE, "spot")))
    pid = launched.status.provider_id or ""
    got = await azure.get(pid)
    for key in (LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE):
        assert got.metadata.labels[key] == launched.metadata.labels[key]
    assert got.status.capacity == launched.status.capacity
    # a VM of another cluster in the same resource group is not ours
    arm.state.vms["aks-other"] = {**arm.state.vms["aks-" + (launched.metadata.name or "")],
                                  "name": "aks-other", "tags": {"karpenter.azure.com_cluster": "x"}}
    assert [nc.status.provider_id for nc in await azure.list()] == [pid]
    arm.state.vms.pop("aks-other")
    await azure.delete(launched)
    deletes = [r for r in arm.requests if r.method == "DELETE"]
    assert deletes[0].path.endswith("/virtualMachines/aks-" + (launched.metadata.name or ""))
    assert deletes[0].query.get("forceDeletion") == "true"
    assert not arm.state.vms and not arm.state.nics
    with pytest.raises(NodeClaimNotFoundError):
        await azure.delete(launched)
    with pytest.raises(NodeClaimNotFoundError):
        await azure.get(pid)


async def test_delete_cleans_up_a_leftover_nic(azure: AzureCloudProvider, arm: ArmServer) -> None:
    launched = await azure.create(claim())
    name = "aks-" + (launched.metadata.name or "")
    # the VM is gone but its NIC was kept (deleteOption Detach, say)
    arm.state.vms.pop(name)
    assert name in arm.state.nics
    with pytest.raises(NodeClaimNotFoundError):
        await azure.delete(launched)
    assert name not in arm.state.nics


async def test_a_price_overlaid_nodeclaim_launches_its_listed_first_size(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    """Karpenter-Azure applies the NodePool's overlays to the sizes it ranks, so it
    launches the cheapest at the overlaid price: the size the core listed first."""
    listed = pin(LABEL_INSTANCE_TYPE, "Standard_D4s_v3", "Standard_D2s_v3")
    on_demand = pin(LABEL_CAPACITY_TYPE, "on-demand")
    plain = await azure.create(claim(listed, on_demand))
    assert plain.metadata.labels[LABEL_INSTANCE_TYPE] == "Standard_D2s_v3"  # ARM's cheapest
    await azure.delete(plain)
    asked = claim(listed, on_demand)
    asked.metadata.annotations["karpenter.sh/price-overlay-applied"] = "true"
    launched = await azure.create(asked)
    vm = arm.bodies("PUT", "virtualMachines/aks-" + (launched.metadata.name or ""))[0]
    assert vm["properties"]["hardwareProfile"]["vmSize"] == "Standard_D4s_v3"
    await azure.delete(launched)


@pytest.mark.parametrize(
    ("cloud", "billed"),
    [("AzurePublicCloud", True), ("AzureChinaCloud", True), ("AzureUSGovernmentCloud", True),
     ("AzureStackCloud", False)],
)
async def test_the_billing_extension_only_in_the_clouds_that_have_it(
    azure: AzureCloudProvider, arm: ArmServer, cloud: str, billed: bool
) -> None:
    azure.settings = dataclasses.replace(azure.settings, arm_cloud=cloud)
    launched = await azure.create(claim())
    name = "aks-" + (launched.metadata.name or "")
    assert list(arm.extensions_of(name)) == (["computeAksLinuxBilling"] if billed else [])
    assert arm.state.vms[name]["properties"]["provisioningState"] == "Succeeded"


async def test_a_class_that_streams_images_offers_no_arm64_size(
    azure: AzureCloudProvider,
) -> None:
    # AKS streams images on amd64 nodes only: as Karpenter-Azure does, a class with
    # artifactStreaming.enabled offers no arm64 size (rather than arm64 nodes where
    # streaming is silently off)
    types = await azure.get_instance_types(POOL)
    assert "arm64" in {it.requirements.labels()[LABEL_ARCH] for it in types}
    node_classes = azure.node_classes
    assert isinstance(node_classes, StaticNodeClasses)
    node_classes.items["default"] = await ready_node_class(
        azure, artifactStreaming={"enabled": True}
    )
    streaming = await azure.get_instance_types(POOL)
    assert {it.requirements.labels()[LABEL_ARCH] for it in streaming} == {"amd64"}
    assert {it.name for it in streaming} == {
        it.name for it in types if it.requirements.labels()[LABEL_ARCH] == "amd64"
    }
