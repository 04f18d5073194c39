"""Node images: an AKSNodeClass's ``imageFamily`` resolved by the cluster's Kubernetes
version (Ubuntu 22.04 / 24.04, Azure Linux 2 / 3) as Karpenter-Azure resolves it, the
trusted-launch variants, and trusted launch sent on the VM."""

from __future__ import annotations

import pytest
from azure_support import ready_node_class
from azurearm.bootstrap import custom_data_script, node_labels, script_variables
from azurearm.server import ArmServer
from karpy_azure import AzureCloudProvider, StaticNodeClasses
from karpy_azure._images import image_definitions, resolve_family
from karpy_azure._status import resolve_status
from karpy_azure.apis import AKSNodeClass

from karpy.apis import NodePool
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

POOL: NodePool = make_nodepool(
    NodeClassReference(group="karpenter.azure.com", kind="AKSNodeClass", name="default"),
    name="images",
)

# Kubernetes 1.31 ... 1.35: what Ubuntu and AzureLinux mean
EXPECTED = {
    "1.31.2": ("Ubuntu2204", "AzureLinux2"),
    "1.32.0": ("Ubuntu2204", "AzureLinux3"),
    "1.33.5": ("Ubuntu2204", "AzureLinux3"),
    "1.34.0": ("Ubuntu2404", "AzureLinux3"),
    "v1.35.1": ("Ubuntu2404", "AzureLinux3"),
}


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_families_resolve_by_kubernetes_version(version: str) -> None:
    ubuntu, azure_linux = EXPECTED[version]
    assert resolve_family("Ubuntu", kubernetes_version=version) == ubuntu
    assert resolve_family("AzureLinux", kubernetes_version=version) == azure_linux
    # the pinned releases do not move
    assert resolve_family("Ubuntu2204", kubernetes_version=version) == "Ubuntu2204"
    assert resolve_family("Ubuntu2404", kubernetes_version=version) == "Ubuntu2404"
    # trusted launch keeps Ubuntu on 22.04 (Karpenter-Azure's defaultUbuntu)
    assert resolve_family("Ubuntu", kubernetes_version=version,
                          trusted_launch=True) == "Ubuntu2204"


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_image_definitions_by_kubernetes_version(version: str) -> None:
    ubuntu = [d.definition for d in image_definitions("Ubuntu", kubernetes_version=version)]
    azl = [d.definition for d in image_definitions("AzureLinux", kubernetes_version=version)]
    release = "2404" if EXPECTED[version][0] == "Ubuntu2404" else "2204"
    assert ubuntu == [f"{release}gen2containerd", f"{release}containerd",
                      f"{release}gen2arm64containerd"]
    v = "V3" if EXPECTED[version][1] == "AzureLinux3" else "V2"
    assert azl == [f"{v}gen2", v, f"{v}gen2arm64"]
    tl = [(d.definition, d.architecture, d.hyperv_generation) for d in image_definitions(
        "AzureLinux", kubernetes_version=version, trusted_launch=True)]
    assert tl == [(f"{v}gen2TL", "amd64", "2")]
    assert [d.definition for d in image_definitions(
        "Ubuntu", kubernetes_version=version, trusted_launch=True)] == ["2204gen2TLcontainerd"]
    assert [d.definition for d in image_definitions(
        "Ubuntu2404", kubernetes_version=version, trusted_launch=True)] == [
        "2404gen2TLcontainerd"]
    # FIPS images are only in the AKS-managed shared image gallery
    assert image_definitions("AzureLinux", kubernetes_version=version, fips=True) == ()


@pytest.mark.parametrize(("version", "expected"), [
    ("1.33.5", "/images/2204gen2containerd/"),
    ("1.34.0", "/images/2404gen2containerd/"),
])
async def test_the_status_carries_the_release_of_the_clusters_version(
    azure: AzureCloudProvider, version: str, expected: str
) -> None:
    async def kubernetes_version() -> str:
        return version

    node_class = AKSNodeClass.model_validate({"metadata": {"name": "u"}, "spec": {}})
    await resolve_status(azure, node_class, kubernetes_version)
    assert expected in node_class.status.images[0].id
    assert node_class.status.kubernetes_version == version


async def test_azure_linux_below_1_32_is_azure_linux_2(azure: AzureCloudProvider) -> None:
    node_class = await ready_node_class(azure, imageFamily="AzureLinux")  # 1.31.2
    assert [i.id.split("/")[4] for i in node_class.status.images] == ["V2gen2", "V2",
                                                                        "V2gen2arm64"]


async def test_an_unknown_kubernetes_version_leaves_images_unresolved(
    azure: AzureCloudProvider,
) -> None:
    async def failing() -> str:
        raise ConnectionError("refused")

    node_class = AKSNodeClass.model_validate({"metadata": {"name": "u"}, "spec": {}})
    await resolve_status(azure, node_class, failing)
    ready = {c.type: (c.status, c.reason) for c in node_class.status.conditions}
    assert ready["ImagesReady"] == ("False", "KubernetesVersionUnknown")
    assert node_class.status.images == []


async def test_missing_trusted_launch_images_are_named(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    del arm.state.image_versions["V2gen2TL"]
    node_class = await ready_node_class(
        azure, imageFamily="AzureLinux", security={"trustedLaunch": {"vtpm": True}}
    )
    [images] = [c for c in node_class.status.conditions if c.type == "ImagesReady"]
    assert (images.status, images.reason) == ("False", "ImagesNotFound")
    assert "AzureLinux2 trusted-launch" in images.message


async def test_trusted_launch_is_sent_on_the_vm_with_the_trusted_launch_image(
    azure: AzureCloudProvider, arm: ArmServer, node_classes: StaticNodeClasses
) -> None:
    node_classes.items["default"] = await ready_node_class(
        azure, security={"trustedLaunch": {"secureBoot": True, "vtpm": False}}
    )
    launched = await azure.create(make_nodeclaim(
        POOL,
        requirements=[
            {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": ["Standard_D4s_v3"]},
            {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        ],
        requests={"cpu": "100m"},
    ))
    vm = arm.state.vms["aks-" + (launched.metadata.name or "")]
    props = vm["properties"]
    assert props["securityProfile"] == {
        "securityType": "TrustedLaunch",
        "uefiSettings": {"secureBootEnabled": True, "vTpmEnabled": False},
    }
    assert "/images/2204gen2TLcontainerd/" in props["storageProfile"]["imageReference"][
        "communityGalleryImageId"]
    labels = node_labels(script_variables(custom_data_script(vm)))
    assert labels["kubernetes.azure.com/os-sku-effective"] == "Ubuntu2204"
    assert labels["kubernetes.azure.com/os-sku-requested"] == "Ubuntu"


async def test_without_trusted_launch_no_security_type_is_sent(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    launched = await azure.create(make_nodeclaim(
        POOL,
        requirements=[{"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
        requests={"cpu": "100m"},
    ))
    props = arm.state.vms["aks-" + (launched.metadata.name or "")]["properties"]
    assert "securityProfile" not in props
