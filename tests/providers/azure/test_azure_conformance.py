"""The conformance kit, green for the Azure provider against the ARM test server."""

from __future__ import annotations

from typing import ClassVar

import pytest
from karpy_azure import AzureCloudProvider
from karpy_azure.apis import labels as az

from karpy.cloudprovider.testing import CORE_WELL_KNOWN_LABELS, CloudProviderConformance


class TestAzureConformance(CloudProviderConformance):
    timeout: ClassVar[float] = 30.0
    well_known_labels: ClassVar[frozenset[str]] = CORE_WELL_KNOWN_LABELS | {
        az.LABEL_SKU_NAME,
        az.LABEL_SKU_FAMILY,
        az.LABEL_SKU_SERIES,
        az.LABEL_SKU_VERSION,
        az.LABEL_SKU_CPU,
        az.LABEL_SKU_MEMORY,
        az.LABEL_SKU_GPU_COUNT,
        az.LABEL_SKU_ACCELERATED_NETWORKING,
        az.LABEL_SKU_STORAGE_PREMIUM_CAPABLE,
        az.AKS_LABEL_CLUSTER,
        az.AKS_LABEL_OS_SKU,
        az.AKS_LABEL_CPU,
        az.AKS_LABEL_MEMORY,
        "topology.kubernetes.io/region",
    }

    @pytest.fixture
    def provider(self, azure: AzureCloudProvider) -> AzureCloudProvider:
        return azure
