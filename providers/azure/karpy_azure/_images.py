"""Node images: which AKS image definitions an image family uses, and the version to
launch.

As Karpenter's Azure provider does without the AKS-managed shared image gallery, images
come from AKS's community galleries (``AKSUbuntu-...``, ``AKSAzureLinux-...``). The
AKSNodeClass's ``imageFamily`` resolves to an OS release by the cluster's Kubernetes
version (:func:`resolve_family`); a release has one definition per architecture and
Hyper-V generation, each with the requirements an instance type must meet to use it, and
one trusted-launch definition (Gen2, amd64). The version is the newest one the gallery
lists, or the ``imageVersion`` setting when pinned.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from karpy.apis.labels import LABEL_ARCH
from karpy.scheduling import IN, Requirement, Requirements
from karpy_azure.apis import AKSNodeClass
from karpy_azure.apis import labels as az

__all__ = [
    "ImageDefinition",
    "community_image_id",
    "image_definitions",
    "image_for",
    "image_requirements",
    "newest_version",
    "parse_community_image_id",
    "resolve_family",
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


def _standard(gallery: str, gen2: str, gen1: str, arm64: str) -> tuple[ImageDefinition, ...]:
    # first match wins: Gen2 before Gen1
    return (
        ImageDefinition(gallery, gen2, "amd64", "2"),
        ImageDefinition(gallery, gen1, "amd64", "1"),
        ImageDefinition(gallery, arm64, "arm64", "2"),
    )


# the image families behind the AKSNodeClass's imageFamily values: (standard images,
# trusted-launch images); FIPS images are published to the AKS-managed shared image
# gallery only, never to the community galleries karpy uses
UBUNTU_2204: Final = "Ubuntu2204"
UBUNTU_2404: Final = "Ubuntu2404"
AZURE_LINUX_2: Final = "AzureLinux2"
AZURE_LINUX_3: Final = "AzureLinux3"
_IMAGES: Final[Mapping[str, tuple[tuple[ImageDefinition, ...], tuple[ImageDefinition, ...]]]] = {
    UBUNTU_2204: (
        _standard(_U, "2204gen2containerd", "2204containerd", "2204gen2arm64containerd"),
        (ImageDefinition(_U, "2204gen2TLcontainerd", "amd64", "2"),),
    ),
    UBUNTU_2404: (
        _standard(_U, "2404gen2containerd", "2404containerd", "2404gen2arm64containerd"),
        (ImageDefinition(_U, "2404gen2TLcontainerd", "amd64", "2"),),
    ),
    AZURE_LINUX_2: (
        _standard(_A, "V2gen2", "V2", "V2gen2arm64"),
        (ImageDefinition(_A, "V2gen2TL", "amd64", "2"),),
    ),
    AZURE_LINUX_3: (
        _standard(_A, "V3gen2", "V3", "V3gen2arm64"),
        (ImageDefinition(_A, "V3gen2TL", "amd64", "2"),),
    ),
}


def _minor_at_least(kubernetes_version: str, minor: int) -> bool:
    """``kubernetes_version`` is 1.<minor> or later (False when unparseable)."""
    parts = kubernetes_version.removeprefix("v").split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= (1, minor)
    except (IndexError, ValueError):
        return False


def resolve_family(
    image_family: str, *, kubernetes_version: str, fips: bool = False,
    trusted_launch: bool = False,
) -> str:
    """The OS release an AKSNodeClass's ``imageFamily`` means, as Karpenter's Azure
    provider resolves it: ``Ubuntu`` is Ubuntu 22.04 below Kubernetes 1.34 and 24.04 from
    1.34 (22.04 with trusted launch or FIPS; FIPS without trusted launch is 20.04, which
    has FIPS images only), ``AzureLinux`` is Azure Linux 2 below 1.32 and 3 from 1.32;
    ``Ubuntu2204`` and ``Ubuntu2404`` are themselves."""
    if image_family == az.IMAGE_FAMILY_UBUNTU2204:
        return UBUNTU_2204
    if image_family == az.IMAGE_FAMILY_UBUNTU2404:
        return UBUNTU_2404
    if image_family == az.IMAGE_FAMILY_AZURE_LINUX:
        return AZURE_LINUX_3 if _minor_at_least(kubernetes_version, 32) else AZURE_LINUX_2
    if fips and not trusted_launch:
        return "Ubuntu2004"  # FIPS images only
    if trusted_launch or fips or not _minor_at_least(kubernetes_version, 34):
        return UBUNTU_2204
    return UBUNTU_2404


def image_definitions(
    image_family: str, *, kubernetes_version: str, fips: bool = False,
    trusted_launch: bool = False,
) -> Sequence[ImageDefinition]:
    """The community gallery image definitions of ``image_family`` for a cluster at
    ``kubernetes_version``, in order of preference: the trusted-launch images when
    trusted launch is on; none with FIPS (the community galleries publish no FIPS
    images)."""
    if fips:
        return ()
    family = resolve_family(image_family, kubernetes_version=kubernetes_version,
                            trusted_launch=trusted_launch)
    standard, trusted = _IMAGES[family]
    return trusted if trusted_launch else standard


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


def image_requirements(node_class: AKSNodeClass) -> list[tuple[str, Requirements]]:
    """The images ``node_class`` resolved (its status), each with its requirements, as
    :func:`image_for` takes them."""
    return [
        (
            image.id,
            Requirements(Requirement.new(r.key, r.operator, r.values) for r in image.requirements),
        )
        for image in node_class.status.images
    ]
