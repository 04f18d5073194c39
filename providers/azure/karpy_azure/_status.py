"""The AKSNodeClass status controller: resolves what a class launches and says whether it
can, in the conditions Karpenter's Azure provider uses.

One sub-step per condition, one status patch per reconcile:

- **ImagesReady**: for the image family resolved by the Kubernetes version (Ubuntu 22.04
  or 24.04, Azure Linux 2 or 3; trusted-launch images when ``security.trustedLaunch`` is
  on), each image definition (per architecture and Hyper-V generation) at the pinned
  ``imageVersion`` or the newest version the community gallery lists; ``status.images``
  carries each image ID with the requirements an instance type must meet to boot it.
- **KubernetesVersionReady**: the API server's version, in ``status.kubernetesVersion``.
- **SubnetsReady**: the class's ``vnetSubnetID`` (or the cluster's default subnet) exists.
- **ValidationSucceeded**: what the CRD cannot check (FIPS images are not published to the
  community galleries; a swap file with ``kubelet.failSwapOn: true``; ``localDNS`` mode
  ``Required``, which karpy's bootstrap cannot honour).

Ready is True only when all four are; every False condition's message names what is
wrong. The class's spec hash goes on ``karpenter.azure.com/aksnodeclass-hash`` (with its
version annotation) so drift can be told from the NodeClaims' copies.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from azure.core.exceptions import HttpResponseError

from karpy.apis.core import NodeSelectorRequirement
from karpy.apis.labels import LABEL_ARCH
from karpy.runtime import (
    GENERATION_CHANGED,
    Client,
    Manager,
    ReportsServerVersion,
    Request,
    Result,
    thaw,
)
from karpy.runtime import errors as api_errors
from karpy_azure._arm import ArmAccess, error_code, is_not_found
from karpy_azure._images import (
    community_image_id,
    image_definitions,
    newest_version,
    resolve_family,
)
from karpy_azure._nodeclasses import AKS_NODE_CLASS
from karpy_azure._osconfig import swap_conflict
from karpy_azure.apis import AKSNodeClass
from karpy_azure.apis import labels as az
from karpy_azure.apis.aksnodeclass import (
    CONDITION_IMAGES_READY,
    CONDITION_KUBERNETES_VERSION_READY,
    CONDITION_SUBNETS_READY,
    CONDITION_VALIDATION_SUCCEEDED,
    NodeImage,
)

__all__ = [
    "NodeClassStatusReconciler",
    "api_server_version",
    "register_status_controller",
    "resolve_status",
]

log = logging.getLogger("karpy.cloudprovider.azure.nodeclass")

KubernetesVersion = Callable[[], Awaitable[str]]


def _subnet_parts(subnet_id: str) -> tuple[str, str, str] | None:
    parts = subnet_id.strip("/").split("/")
    if len(parts) != 10:
        return None
    return parts[3], parts[7], parts[9]  # resource group, vnet, subnet


async def _resolve_images(
    provider: ArmAccess, node_class: AKSNodeClass, kubernetes_version: str
) -> list[NodeImage]:
    settings = provider.settings
    images: list[NodeImage] = []
    definitions = image_definitions(
        node_class.spec.image_family,
        kubernetes_version=kubernetes_version,
        fips=node_class.spec.fips_mode == "FIPS",
        trusted_launch=node_class.trusted_launch_enabled,
    )
    for definition in definitions:
        version = settings.image_version
        if not version:
            pager = provider.arm.compute.community_gallery_image_versions.list(
                settings.location, definition.gallery, definition.definition
            )
            try:
                version = newest_version([str(v.name) async for v in pager]) or ""
            except HttpResponseError as exc:
                if not is_not_found(exc):
                    raise
                continue  # this definition is not published in the location
        if not version:
            continue
        images.append(
            NodeImage(
                id=community_image_id(definition, version),
                requirements=[
                    NodeSelectorRequirement(
                        key=LABEL_ARCH, operator="In", values=[definition.architecture]
                    ),
                    NodeSelectorRequirement(
                        key=az.LABEL_SKU_HYPERV_GENERATION,
                        operator="In",
                        values=[definition.hyperv_generation],
                    ),
                ],
            )
        )
    return images


async def _set_images(
    provider: ArmAccess, node_class: AKSNodeClass, kubernetes_version: str
) -> None:
    conditions = node_class.status_conditions()
    family = node_class.spec.image_family
    release = resolve_family(
        family,
        kubernetes_version=kubernetes_version,
        fips=node_class.spec.fips_mode == "FIPS",
        trusted_launch=node_class.trusted_launch_enabled,
    )
    try:
        images = await _resolve_images(provider, node_class, kubernetes_version)
    except HttpResponseError as exc:
        conditions.set_false(
            CONDITION_IMAGES_READY,
            "ImageResolutionFailed",
            f"listing {family} ({release}) image versions failed: "
            f"{error_code(exc) or exc.status_code}: {exc.message}",
        )
        return
    if images:
        node_class.status.images = images
        conditions.set_true(CONDITION_IMAGES_READY)
    else:
        variant = " trusted-launch" if node_class.trusted_launch_enabled else ""
        conditions.set_false(
            CONDITION_IMAGES_READY,
            "ImagesNotFound",
            f"no {family} ({release}{variant}) image versions found in the AKS community "
            "galleries",
        )


async def resolve_status(
    provider: ArmAccess, node_class: AKSNodeClass, kubernetes_version: KubernetesVersion
) -> None:
    """Fill ``node_class.status`` (images, Kubernetes version, conditions) in place.

    ``provider`` gives the settings and ARM clients (the AzureCloudProvider does).
    """
    conditions = node_class.status_conditions()
    family = node_class.spec.image_family
    # the Kubernetes version first: which OS release an image family means depends on it
    try:
        version = await kubernetes_version()
    except Exception as exc:  # any failure reading the version is reported, not raised
        version = ""
        conditions.set_false(
            CONDITION_KUBERNETES_VERSION_READY,
            "KubernetesVersionUnknown",
            f"reading the API server's version failed: {exc}",
        )
        conditions.set_false(
            CONDITION_IMAGES_READY,
            "KubernetesVersionUnknown",
            f"the {family} images depend on the Kubernetes version, which is unknown",
        )
    else:
        node_class.status.kubernetes_version = version
        conditions.set_true(CONDITION_KUBERNETES_VERSION_READY)
    if version:
        await _set_images(provider, node_class, version)
    subnet_id = node_class.spec.vnet_subnet_id or provider.settings.vnet_subnet_id
    parts = _subnet_parts(subnet_id)
    if parts is None:
        conditions.set_false(CONDITION_SUBNETS_READY, "SubnetInvalid",
                             f"{subnet_id!r} is not a subnet resource ID")
    else:
        try:
            await provider.arm.network.subnets.get(*parts)
        except HttpResponseError as exc:
            if is_not_found(exc):
                conditions.set_false(
                    CONDITION_SUBNETS_READY, "SubnetNotFound",
                    f"subnet {subnet_id} not found (spec.vnetSubnetID or the vnetSubnetID "
                    "setting)",
                )
            else:
                conditions.set_false(
                    CONDITION_SUBNETS_READY, "SubnetUnavailable",
                    f"reading subnet {subnet_id} failed: {error_code(exc) or exc.status_code}",
                )
        else:
            conditions.set_true(CONDITION_SUBNETS_READY)
    if node_class.spec.fips_mode == "FIPS":
        conditions.set_false(
            CONDITION_VALIDATION_SUCCEEDED,
            "FIPSNotAvailable",
            "spec.fipsMode FIPS needs the AKS-managed shared image gallery; the community "
            "galleries karpy uses publish no FIPS images",
        )
    elif conflict := swap_conflict(node_class):
        conditions.set_false(CONDITION_VALIDATION_SUCCEEDED, "SwapWithFailSwapOn", conflict)
    elif node_class.spec.local_dns is not None and node_class.spec.local_dns.mode == "Required":
        conditions.set_false(
            CONDITION_VALIDATION_SUCCEEDED,
            "LocalDNSNotSupported",
            "spec.localDNS.mode Required: karpy's node bootstrap does not configure LocalDNS "
            "yet; use mode Preferred (nodes run without it, labelled "
            "kubernetes.azure.com/localdns-state=disabled) or Disabled",
        )
    else:
        conditions.set_true(CONDITION_VALIDATION_SUCCEEDED)


def api_server_version(client: Client) -> KubernetesVersion:
    """Read the Kubernetes version (``1.31.2``) from the API server's ``/version``, through
    a client that can say it (:class:`~karpy.runtime.ReportsServerVersion`; a
    ``TypeError`` names any other)."""

    async def read() -> str:
        if not isinstance(client, ReportsServerVersion):
            raise TypeError(
                f"reading the API server's /version needs a client with server_version(), "
                f"not {type(client).__name__}"
            )
        info = await client.server_version()
        return info.git_version.lstrip("v").split("-")[0].split("+")[0]

    return read


class NodeClassStatusReconciler:
    """Reconciles one AKSNodeClass's status (see the module docstring)."""

    def __init__(
        self,
        provider: ArmAccess,
        client: Client,
        kubernetes_version: KubernetesVersion,
    ) -> None:
        self.provider = provider
        self.client = client
        self.kubernetes_version = kubernetes_version
        self.kind = AKS_NODE_CLASS

    async def reconcile(self, request: Request) -> Result:
        try:
            obj = await self.client.get(self.kind, request.name)
        except api_errors.NotFound:
            return Result()
        node_class = AKSNodeClass.model_validate(thaw(obj))
        if node_class.metadata.deletion_timestamp is not None:
            return Result()
        before = node_class.status.model_dump(mode="json", by_alias=True, exclude_none=True)
        await resolve_status(self.provider, node_class, self.kubernetes_version)
        after = node_class.status.model_dump(mode="json", by_alias=True, exclude_none=True)
        if after != before:
            await self.client.patch_status(self.kind, request.name, {"status": after})
        # The hash annotations are the nodeclass.hash controller's (karpy_azure._hash), as in
        # Karpenter Azure: it must see an old version first to re-stamp the NodeClaims.
        ready = node_class.status_conditions().is_true("Ready")
        return Result(requeue_after=300.0 if ready else 30.0)


def register_status_controller(provider: ArmAccess, manager: Manager) -> None:
    """Add the ``nodeclass.status`` controller for AKSNodeClasses to ``manager``."""
    reconciler = NodeClassStatusReconciler(
        provider, manager.client, api_server_version(manager.client)
    )
    (
        manager.controller("nodeclass.status")
        .for_(AKS_NODE_CLASS, predicate=GENERATION_CHANGED)
        .complete(reconciler)
    )
