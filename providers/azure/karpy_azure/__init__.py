"""The Azure cloud provider for karpy: AKS nodes as Azure VMs, on the async SDK clients
(``azure.mgmt.compute.aio``, ``azure.mgmt.network.aio``) and azure-identity, following
Karpenter's Azure provider; plus the ``karpenter.azure.com`` AKSNodeClass API
(:mod:`karpy_azure.apis`).

Entry points: ``karpy.cloudproviders: azure`` (:class:`AzureCloudProvider`) and
``karpy.crds: azure``. Settings are documented in :mod:`karpy_azure._settings` and
docs/providers/azure.md.
"""

from karpy_azure._arm import ArmClients, StaticTokenCredential, make_credential
from karpy_azure._hash import node_class_hash
from karpy_azure._instancetypes import InstanceTypeParams, build_instance_types
from karpy_azure._nodeclasses import (
    AKS_NODE_CLASS,
    ClusterNodeClasses,
    NodeClassSource,
    StaticNodeClasses,
)
from karpy_azure._overhead import aks_overhead, max_pods
from karpy_azure._pricing import MISSING_PRICE, PriceTable, fallback_prices, fetch_retail_prices
from karpy_azure._provider import AzureCloudProvider
from karpy_azure._settings import AzureSettings, AzureSettingsError
from karpy_azure._skus import Sku, VMSize, parse_skus, parse_vm_size

__all__ = [
    "AKS_NODE_CLASS",
    "MISSING_PRICE",
    "ArmClients",
    "AzureCloudProvider",
    "AzureSettings",
    "AzureSettingsError",
    "ClusterNodeClasses",
    "InstanceTypeParams",
    "NodeClassSource",
    "PriceTable",
    "Sku",
    "StaticNodeClasses",
    "StaticTokenCredential",
    "VMSize",
    "aks_overhead",
    "build_instance_types",
    "fallback_prices",
    "fetch_retail_prices",
    "make_credential",
    "max_pods",
    "node_class_hash",
    "parse_skus",
    "parse_vm_size",
]
