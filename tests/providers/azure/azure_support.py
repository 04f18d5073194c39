"""Helpers shared by karpy-azure's tests: the test cluster's Azure identifiers, settings
pointing the provider at the ARM test server, and a Ready AKSNodeClass resolved by the
real status logic against it."""

from __future__ import annotations

import base64

from azurearm.server import ArmServer
from karpy_azure import AzureCloudProvider, AzureSettings
from karpy_azure._hash import NODECLASS_HASH_VERSION, node_class_hash
from karpy_azure._status import resolve_status
from karpy_azure.apis import AKSNodeClass

SUBSCRIPTION = "11111111-2222-3333-4444-555555555555"
NODE_RG = "MC_rg-demo_demo_southcentralus"
SUBNET = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-demo/providers/Microsoft.Network/"
    "virtualNetworks/aks-vnet/subnets/aks-subnet"
)
IMAGE_VERSION = "202411.12.0"
API_SERVER = "demo-dns-12345678.hcp.southcentralus.azmk8s.io"
BOOTSTRAP_TOKEN = "abcdef.0123456789abcdef"
SSH_KEY = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 demo@karpy"
#: AKS's managed NSG in the node resource group (cluster ID 12345678)
NSG = "aks-agentpool-12345678-nsg"
KUBERNETES_VERSION = "1.31.2"


async def kubernetes_version() -> str:
    return KUBERNETES_VERSION


def azure_settings(server: ArmServer, **extra: str) -> AzureSettings:
    return AzureSettings.from_settings(
        {
            "subscriptionID": SUBSCRIPTION,
            "nodeResourceGroup": NODE_RG,
            "location": "southcentralus",
            "vnetSubnetID": SUBNET,
            "armEndpoint": server.url,
            "pricingEndpoint": server.url,
            "caBundle": str(server.cert.cert_file),
            "credential": "static",
            "pollInterval": "0",
            "clusterEndpoint": f"https://{API_SERVER}:443",
            "kubeletBootstrapToken": BOOTSTRAP_TOKEN,
            "sshPublicKey": SSH_KEY,
            "clusterCABundle": base64.b64encode(server.cert.cert_file.read_bytes()).decode(),
            **extra,
        },
        cluster_name="demo",
        environ={},
    )


async def ready_node_class(
    provider: AzureCloudProvider, name: str = "default", **spec: object
) -> AKSNodeClass:
    """An AKSNodeClass whose status the real status logic resolved against the server,
    with the hash annotations the nodeclass.hash controller stamps (drift compares them)."""
    node_class = AKSNodeClass.model_validate({"metadata": {"name": name}, "spec": spec})
    await resolve_status(provider, node_class, kubernetes_version)
    node_class.metadata.annotations = {
        "karpenter.azure.com/aksnodeclass-hash": node_class_hash(node_class),
        "karpenter.azure.com/aksnodeclass-hash-version": NODECLASS_HASH_VERSION,
    }
    return node_class
