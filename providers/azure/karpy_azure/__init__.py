"""The Azure cloud provider for karpy: AKS nodes as Azure VMs, on the async SDK clients
(``azure.mgmt.compute.aio``, ``azure.mgmt.network.aio``) and azure-identity, following
Karpenter's Azure provider; plus the ``karpenter.azure.com`` AKSNodeClass API
(:mod:`karpy_azure.apis`).

Entry points: ``karpy.cloudproviders: azure`` (:class:`AzureCloudProvider`) and
``karpy.crds: azure``. Settings are documented in :mod:`karpy_azure._settings` and
docs/providers/azure.md. The names below are what building the provider by hand takes
(settings, ARM clients and a credential, a NodeClass source); the rest (SKU parsing,
prices, instance types) is private to the package.
"""

from karpy_azure._arm import ArmClients, make_credential
from karpy_azure._hash import node_class_hash
from karpy_azure._nodeclasses import AKS_NODE_CLASS, NodeClassSource, StaticNodeClasses
from karpy_azure._provider import AzureCloudProvider
from karpy_azure._settings import AzureSettings, AzureSettingsError

__all__ = [
    "AKS_NODE_CLASS",
    "ArmClients",
    "AzureCloudProvider",
    "AzureSettings",
    "AzureSettingsError",
    "NodeClassSource",
    "StaticNodeClasses",
    "make_credential",
    "node_class_hash",
]
