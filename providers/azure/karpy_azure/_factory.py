"""Building the Azure provider from what the operator gives it (the factory the ``azure``
entry point reaches through ``AzureCloudProvider.from_context``): the online provider,
or with ``offline=true`` the offline one."""

from __future__ import annotations

import base64
from pathlib import Path

from karpy.cloudprovider import ProviderContext
from karpy.runtime import Client
from karpy_azure._arm import ArmClients, make_credential
from karpy_azure._nodeclasses import ClusterNodeClasses
from karpy_azure._offline import OfflineAzureCloudProvider
from karpy_azure._provider import AzureCloudProvider
from karpy_azure._settings import AzureSettings, required_ca_bundle

__all__ = ["client_ca_bundle", "from_context"]


def from_context(context: ProviderContext) -> AzureCloudProvider | OfflineAzureCloudProvider:
    """The ``karpy.cloudproviders`` factory (``AzureCloudProvider.from_context``):
    settings from ``context.settings`` and the environment; DefaultAzureCredential
    (workload identity in a cluster). With ``offline=true``, the offline provider
    instead (no credential, no client; see :mod:`karpy_azure._offline`)."""
    settings = AzureSettings.from_settings(context.settings, cluster_name=context.cluster_name)
    if settings.offline:
        return OfflineAzureCloudProvider(
            settings, node_classes=ClusterNodeClasses(context.client)
        )
    # refuse before making any Azure client
    ca_bundle = required_ca_bundle(settings, client_ca_bundle(context.client))
    credential = make_credential(settings)
    return AzureCloudProvider(
        settings,
        arm=ArmClients.create(settings, credential),
        node_classes=ClusterNodeClasses(context.client),
        client=context.client,
        credential=credential,
        ca_bundle=ca_bundle,
        overlays=context.overlays,
    )


def client_ca_bundle(client: Client) -> str:
    """Base64 PEM of the CA karpy's Kubernetes client verifies the API server with (the
    service account's ``ca.crt`` in a pod, the kubeconfig's CA otherwise), as Karpenter's
    Azure provider takes the nodes' CA from its REST config; empty when there is none."""
    api_client = getattr(client, "api_client", None)
    path = getattr(getattr(api_client, "configuration", None), "ssl_ca_cert", None)
    if not path:
        return ""
    try:
        return base64.b64encode(Path(path).read_bytes()).decode()
    except OSError:
        return ""
