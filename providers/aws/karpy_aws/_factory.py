"""Building the AWS provider from what the operator gives it (the factory the ``aws``
entry point reaches through ``AWSCloudProvider.from_context``): the online provider, or
with ``offline=true`` the offline one."""

from __future__ import annotations

import logging
import os

import aioboto3

from karpy.cloudprovider import ProviderContext
from karpy.runtime import Client
from karpy.runtime import errors as kerrors
from karpy.runtime.kinds import SERVICE
from karpy_aws._clients import AWSClients
from karpy_aws._cluster import ClusterDiscovery, KubeDNSLookup, kube_client_ca_bundle
from karpy_aws._nodeclasses import node_classes_from
from karpy_aws._offline import OfflineAWSCloudProvider
from karpy_aws._provider import AWSCloudProvider
from karpy_aws._settings import UNIMPLEMENTED_AWS_GATES, AWSSettings

__all__ = ["from_context", "kube_dns_from", "warn_unimplemented_gates"]

log = logging.getLogger("karpy_aws")


def warn_unimplemented_gates(settings: AWSSettings) -> None:
    """Say once, as the provider is built at start-up, which AWS_FEATURE_GATES are on
    that karpy-aws accepts but does not implement: Karpenter AWS would act on them."""
    for gate in settings.unimplemented_gates_on():
        log.warning(
            "aws feature gate is not implemented by karpy-aws and has no effect",
            extra={"feature-gate": gate, "effect": UNIMPLEMENTED_AWS_GATES[gate]},
        )


async def from_context(context: ProviderContext) -> AWSCloudProvider | OfflineAWSCloudProvider:
    """The factory the ``aws`` entry point names: parse the settings (see
    :mod:`karpy_aws._settings`), open the AWS clients, read EC2NodeClasses through
    the operator's client. With ``offline=true``, the offline provider instead (no
    client at all; see :mod:`karpy_aws._offline`)."""
    session = aioboto3.Session()  # reads the config files only; no call is made
    settings = AWSSettings.from_settings(
        context.settings,
        cluster_name=context.cluster_name,
        environ=os.environ,
        default_region=session.region_name,
    )
    warn_unimplemented_gates(settings)
    if settings.offline:
        return OfflineAWSCloudProvider(
            settings=settings, node_classes=node_classes_from(context.client)
        )
    clients = await AWSClients.open(settings, session=session)
    return AWSCloudProvider(
        settings=settings,
        clients=clients,
        node_classes=node_classes_from(context.client),
        client=context.client,
        cluster=ClusterDiscovery(
            clients,
            settings,
            kube_ca_bundle=kube_client_ca_bundle(getattr(context.client, "api_client", None)),
            kube_dns=kube_dns_from(context.client),
        ),
        reserved_capacity=context.feature_gates.get("ReservedCapacity", True),
        overlays=context.overlays,
    )


def kube_dns_from(client: Client) -> KubeDNSLookup:
    """A lookup of the ``kube-system/kube-dns`` Service's ClusterIP through ``client``."""

    async def lookup() -> str | None:
        try:
            service = await client.get(SERVICE, "kube-dns", namespace="kube-system")
        except kerrors.NotFound:
            return None
        ip = str((service.get("spec") or {}).get("clusterIP") or "")
        return ip if ip and ip != "None" else None

    return lookup
