"""The OS disk and storage capabilities of a launched VM: an ephemeral OS disk where the
VM size's local disk holds it (else a managed one), the DiskEncryptionSet setting, and
Ultra SSD when the NodeClaim asks for it — read back from the ARM test server, which
refuses an ephemeral OS disk the VM size cannot hold as ARM does."""

from __future__ import annotations

from typing import Any

import pytest
from azure_support import azure_settings, ready_node_class
from azurearm import skus
from azurearm.server import ArmServer
from karpy_azure import AzureCloudProvider, AzureSettingsError, StaticNodeClasses, _instancetypes
from karpy_azure._skus import Sku, parse_skus
from karpy_azure.apis import labels as az
from test_azure_bootstrap import provider_on

from karpy.apis import NodeClaim, NodePool
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import CreateError
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

POOL: NodePool = make_nodepool(
    NodeClassReference(group="karpenter.azure.com", kind="AKSNodeClass", name="default"),
    name="disks",
)
DES = (
    "/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/rg-keys/providers/"
    "Microsoft.Compute/diskEncryptionSets/des-nodes"
)


def claim(size: str, *extra: dict[str, Any]) -> NodeClaim:
    return make_nodeclaim(
        POOL,
        requirements=[
            {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": [size]},
            {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
            *extra,
        ],
        requests={"cpu": "100m"},
    )


def os_disk_of(arm: ArmServer, launched: NodeClaim) -> dict[str, Any]:
    name = "aks-" + (launched.metadata.name or "")
    return dict(arm.state.vms[name]["properties"]["storageProfile"]["osDisk"])


async def use_class(azure: AzureCloudProvider, node_classes: StaticNodeClasses,
                    **spec: object) -> None:
    node_classes.items["default"] = await ready_node_class(azure, **spec)


async def test_a_size_whose_cache_holds_the_os_disk_gets_an_ephemeral_one(
    azure: AzureCloudProvider, arm: ArmServer, node_classes: StaticNodeClasses
) -> None:
    await use_class(azure, node_classes, osDiskSizeGB=64)
    disk = os_disk_of(arm, await azure.create(claim("Standard_D4s_v3")))  # 100 GiB cache
    assert disk["diffDiskSettings"] == {"option": "Local", "placement": "CacheDisk"}
    assert disk["caching"] == "ReadOnly"
    assert disk["diskSizeGB"] == 64
    assert "managedDisk" not in disk


async def test_a_size_too_small_for_the_os_disk_gets_a_managed_one(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    disk = os_disk_of(arm, await azure.create(claim("Standard_D4s_v3")))  # 128 > 100 GiB
    assert "diffDiskSettings" not in disk
    assert disk["managedDisk"] == {"storageAccountType": "Premium_LRS"}


async def test_the_limit_is_in_gib_as_arm_enforces_it(
    azure: AzureCloudProvider, arm: ArmServer, node_classes: StaticNodeClasses
) -> None:
    """Standard_D2s_v3's cache is 50 GiB (53.7 GB): a 52 GB OS disk does not fit (ARM's
    diskSizeGB is GiB), so it is managed, not refused by ARM."""
    await use_class(azure, node_classes, osDiskSizeGB=52)
    disk = os_disk_of(arm, await azure.create(claim("Standard_D2s_v3")))
    assert "diffDiskSettings" not in disk
    await use_class(azure, node_classes, osDiskSizeGB=50)
    disk = os_disk_of(arm, await azure.create(claim("Standard_D2s_v3")))
    assert disk["diffDiskSettings"]["placement"] == "CacheDisk"


async def test_arm_refuses_an_ephemeral_os_disk_the_size_cannot_hold(
    azure: AzureCloudProvider, arm: ArmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Sku, "ephemeral_os_placement_for", lambda self, size: "CacheDisk")
    with pytest.raises(CreateError) as raised:
        await azure.create(claim("Standard_D2s_v3"))  # 128 GB on a 50 GiB cache
    assert "NotSupported" in str(raised.value)
    assert "greater than 50 GB is not allowed for VM size Standard_D2s_v3" in str(raised.value)
    assert not arm.state.vms and not arm.state.nics


@pytest.mark.parametrize(
    ("caps", "expected"),
    [
        # NVMe first when the SKU offers it as a placement
        ({"NvmeDiskSizeInMiB": "7208960", "SupportedEphemeralOSDiskPlacements": "NvmeDisk",
          "CachedDiskBytes": "0"}, ("NvmeDisk", 7040)),
        ({"NvmeDiskSizeInMiB": "7208960", "SupportedEphemeralOSDiskPlacements": "ResourceDisk",
          "CachedDiskBytes": "53687091200"}, ("CacheDisk", 50)),
        ({"CachedDiskBytes": "53687091200", "MaxResourceVolumeMB": "16384"}, ("CacheDisk", 50)),
        ({"MaxResourceVolumeMB": "16384"}, ("ResourceDisk", 16)),
        ({"MaxResourceVolumeMB": "16384", "EphemeralOSDiskSupported": "False"}, ("", 0)),
    ],
)
def test_ephemeral_placement_follows_karpenter_azures_order(
    caps: dict[str, str], expected: tuple[str, int]
) -> None:
    capabilities = {"vCPUs": "4", "MemoryGB": "16", "EphemeralOSDiskSupported": "True", **caps}
    sku = Sku.from_arm(
        {"name": "Standard_D4ds_v5", "resourceType": "virtualMachines",
         "capabilities": [{"name": k, "value": v} for k, v in capabilities.items()]},
        "southcentralus",
    )
    assert sku.ephemeral_os_placement == expected


def test_every_recorded_size_karpy_would_make_ephemeral_is_one_arm_accepts() -> None:
    """karpy's choice and the test server's (ARM's) refusal agree for every recorded SKU
    at the largest OS disk karpy would put on it."""
    for sku in parse_skus(skus("southcentralus"), "southcentralus"):
        placement, max_gib = sku.ephemeral_os_placement
        if placement:
            assert sku.ephemeral_os_placement_for(max_gib) == placement
            assert sku.ephemeral_os_placement_for(max_gib + 1) == ""


async def test_the_disk_encryption_set_encrypts_the_os_disk(arm: ArmServer) -> None:
    provider = await provider_on(arm, diskEncryptionSetID=DES)
    try:
        launched = await provider.create(claim("Standard_D4s_v3"))
    finally:
        await provider.aclose()
    disk = os_disk_of(arm, launched)
    assert disk["managedDisk"]["diskEncryptionSet"] == {"id": DES}


def test_a_malformed_disk_encryption_set_is_refused(arm: ArmServer) -> None:
    with pytest.raises(AzureSettingsError, match=r"diskEncryptionSetID.*NODE_OSDISK"):
        azure_settings(arm, diskEncryptionSetID="/subscriptions/x/resourceGroups/rg")


async def test_ultra_ssd_is_enabled_only_when_the_nodeclaim_asks_for_it(
    azure: AzureCloudProvider, arm: ArmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the recording lists Ultra SSD per SKU, not per zone: offer it in every zone
    monkeypatch.setattr(_instancetypes, "_ultra_ssd", lambda sku, zone: ("false", "true"))
    ultra = {"key": az.LABEL_SKU_STORAGE_ULTRA_SSD, "operator": "In", "values": ["true"]}
    asked = await azure.create(claim("Standard_D4s_v3", ultra))
    plain = await azure.create(claim("Standard_D4s_v3"))
    vms = arm.state.vms
    assert vms["aks-" + (asked.metadata.name or "")]["properties"][
        "additionalCapabilities"] == {"ultraSSDEnabled": True}
    assert "additionalCapabilities" not in vms["aks-" + (plain.metadata.name or "")][
        "properties"]
    assert asked.metadata.labels[az.LABEL_SKU_STORAGE_ULTRA_SSD] == "true"
    assert plain.metadata.labels[az.LABEL_SKU_STORAGE_ULTRA_SSD] == "false"

