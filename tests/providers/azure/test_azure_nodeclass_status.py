"""The AKSNodeClass status logic against the ARM test server: images from the community
gallery (newest, or pinned), the subnet, validation; Ready says what is wrong."""

from __future__ import annotations

from azure_support import (
    IMAGE_VERSION,
    SUBNET,
    azure_settings,
    kubernetes_version,
    ready_node_class,
)
from azurearm.server import ArmServer
from karpy_azure import ArmClients, AzureCloudProvider, StaticNodeClasses, make_credential
from karpy_azure._status import resolve_status
from karpy_azure.apis import AKSNodeClass


def condition(node_class: AKSNodeClass, type_: str) -> tuple[str, str, str]:
    c = node_class.status_conditions().get(type_)
    assert c is not None
    return c.status, c.reason, c.message


async def test_a_good_class_is_ready_with_the_newest_images(azure: AzureCloudProvider) -> None:
    node_class = await ready_node_class(azure)
    assert condition(node_class, "Ready")[0] == "True"
    ids = [image.id for image in node_class.status.images]
    assert ids == [
        f"/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/{d}/versions/"
        f"{IMAGE_VERSION}"
        for d in ("2204gen2containerd", "2204containerd", "2204gen2arm64containerd")
    ]
    assert node_class.status.images[2].requirements[0].values == ["arm64"]
    assert node_class.status.kubernetes_version == "1.31.2"
    azl = await ready_node_class(azure, imageFamily="AzureLinux")
    assert "/AKSAzureLinux-" in azl.status.images[0].id


async def test_a_pinned_image_version_is_used_as_is(arm: ArmServer) -> None:
    settings = azure_settings(arm, imageVersion="202401.01.0")
    provider = AzureCloudProvider(
        settings, arm=ArmClients.create(settings, make_credential(settings)),
        node_classes=StaticNodeClasses({}),
    )
    try:
        node_class = await ready_node_class(provider)
        assert all(i.id.endswith("/versions/202401.01.0") for i in node_class.status.images)
        assert not arm.bodies("GET", "communityGalleries")
    finally:
        await provider.aclose()


async def test_a_missing_subnet_is_named(azure: AzureCloudProvider) -> None:
    missing = SUBNET.replace("aks-subnet", "gone")
    node_class = await ready_node_class(azure, vnetSubnetID=missing)
    status, reason, message = condition(node_class, "SubnetsReady")
    assert (status, reason) == ("False", "SubnetNotFound")
    assert missing in message
    assert condition(node_class, "Ready")[0] == "False"


async def test_missing_images_and_fips_are_reported(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    arm.state.image_versions.clear()
    node_class = AKSNodeClass.model_validate(
        {"metadata": {"name": "fips"},
         "spec": {"fipsMode": "FIPS", "imageFamily": "AzureLinux"}}
    )
    await resolve_status(azure, node_class, kubernetes_version)
    assert condition(node_class, "ImagesReady")[:2] == ("False", "ImagesNotFound")
    status, reason, message = condition(node_class, "ValidationSucceeded")
    assert (status, reason) == ("False", "FIPSNotAvailable")
    assert "fipsMode" in message
    assert condition(node_class, "Ready")[0] == "False"
