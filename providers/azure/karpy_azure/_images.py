"""Node images: which AKS image definitions an image family uses, and the version to
launch.

As Karpenter's Azure provider does without the AKS-managed shared image gallery, images
come from AKS's community galleries (``AKSUbuntu-...``, ``AKSAzureLinux-...``); an image
family has one definition per architecture and Hyper-V generation, each with the
requirements an instance type must meet to use it. The version is the newest one the
gallery lists, or the ``imageVersion`` setting when pinned.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from karpy.apis.labels import LABEL_ARCH
from karpy.scheduling import Requirement, Requirements
from karpy.scheduling.requirements import IN
from karpy_azure.apis import labels as az

__all__ = [
    "ImageDefinition",
    "community_image_id",
    "image_definitions",
    "image_for",
    "newest_version",
    "parse_community_image_id",
]

UBUNTU_GALLERY: Final = "AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2"
AZURE_LINUX_GALLERY: Final = "AKSAzureLinux-f7c7cda5-1c9a-4bdc-a222-9614c968580b"


@dataclass(frozen=True, slots=True)
class ImageDefinition:
    """A gallery image definition and the instance types it suits."""

    gallery: str
    definition: str
    architecture: str
    hyperv_generation: str  # "1" or "2"

    @property
    def requirements(self) -> Requirements:
        """What an instance type must offer to boot this image."""
        return Requirements(
            (
                Requirement.new(LABEL_ARCH, IN, (self.architecture,)),
                Requirement.new(az.LABEL_SKU_HYPERV_GENERATION, IN, (self.hyperv_generation,)),
            )
        )


_U = UBUNTU_GALLERY
_A = AZURE_LINUX_GALLERY
_FAMILIES: Final[Mapping[str, tuple[ImageDefinition, ...]]] = {
    # first match wins: Gen2 before Gen1
    az.IMAGE_FAMILY_UBUNTU: (
        ImageDefinition(_U, "2204gen2containerd", "amd64", "2"),
        ImageDefinition(_U, "2204containerd", "amd64", "1"),
        ImageDefinition(_U, "2204gen2arm64containerd", "arm64", "2"),
    ),
    az.IMAGE_FAMILY_UBUNTU2204: (
        ImageDefinition(_U, "2204gen2containerd", "amd64", "2"),
        ImageDefinition(_U, "2204containerd", "amd64", "1"),
        ImageDefinition(_U, "2204gen2arm64containerd", "arm64", "2"),
    ),
    az.IMAGE_FAMILY_UBUNTU2404: (
        ImageDefinition(_U, "2404gen2containerd", "amd64", "2"),
        ImageDefinition(_U, "2404containerd", "amd64", "1"),
        ImageDefinition(_U, "2404gen2arm64containerd", "arm64", "2"),
    ),
    az.IMAGE_FAMILY_AZURE_LINUX: (
        ImageDefinition(_A, "V3gen2", "amd64", "2"),
        ImageDefinition(_A, "V3", "amd64", "1"),
        ImageDefinition(_A, "V3gen2arm64", "arm64", "2"),
    ),
}


def image_definitions(image_family: str) -> Sequence[ImageDefinition]:
    """The image definitions of ``image_family`` in order of preference."""
    return _FAMILIES[image_family]


def community_image_id(definition: ImageDefinition, version: str) -> str:
    """The community gallery image version ID VMs are created from."""
    return (
        f"/CommunityGalleries/{definition.gallery}/images/{definition.definition}"
        f"/versions/{version}"
    )


def parse_community_image_id(image_id: str) -> tuple[str, str, str] | None:
    """(gallery, definition, version) of a community gallery image ID, else None."""
    parts = image_id.strip("/").split("/")
    if len(parts) != 6 or parts[0].lower() != "communitygalleries":
        return None
    return parts[1], parts[3], parts[5]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def newest_version(versions: Iterable[str]) -> str | None:
    """The highest ``major.minor.patch`` version, or None."""
    found = sorted(versions, key=_version_key)
    return found[-1] if found else None


def image_for(
    images: Iterable[tuple[str, Requirements]], instance_type: Requirements
) -> str | None:
    """The first image (ID, requirements) whose requirements ``instance_type`` meets."""
    for image_id, reqs in images:
        if instance_type.intersects(reqs) is None:
            return image_id
    return None
