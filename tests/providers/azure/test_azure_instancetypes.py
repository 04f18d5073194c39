"""Instance types from the recorded Resource SKUs: which SKUs AKS runs, every
karpenter.azure.com/sku-* label, the AKS allocatable, zones and capacity types as
offerings, prices, and the provider's unavailable offerings."""

from __future__ import annotations

from datetime import timedelta

import azurearm
import pytest
from karpy_azure._instancetypes import InstanceTypeParams, build_instance_types
from karpy_azure._pricing import PriceTable, fallback_prices
from karpy_azure._skus import parse_skus, parse_vm_size
from karpy_azure.apis import labels as az

from karpy.apis.labels import LABEL_ARCH, LABEL_REGION, LABEL_ZONE
from karpy.cloudprovider import InstanceType, OfferingKey, UnavailableOfferings
from karpy.runtime.testing import FakeClock
from karpy.scheduling import resources as res

SCUS = "southcentralus"


def build(
    location: str = SCUS,
    *,
    unavailable: UnavailableOfferings | None = None,
    prices: PriceTable | None = None,
    **params: object,
) -> dict[str, InstanceType]:
    types = build_instance_types(
        parse_skus(azurearm.skus(location), location),
        InstanceTypeParams(location=location, node_resource_group="MC_rg_demo_" + location,
                           **params),  # type: ignore[arg-type]
        prices or fallback_prices(location),
        unavailable or UnavailableOfferings(),
    )
    return {it.name: it for it in types}


def test_only_skus_aks_can_run_become_instance_types() -> None:
    types = build()
    # A0/B1s: under 2 vCPUs; DC8s_v3: confidential; M8-2ms: constrained vCPUs
    for excluded in ("Standard_A0", "Standard_B1s", "Standard_DC8s_v3", "Standard_M8-2ms"):
        assert excluded not in types
    assert {"Standard_D2s_v3", "Standard_D16plds_v5", "Standard_NC24ads_A100_v4"} <= set(types)
    # westcentralus restricts nothing it keeps, and has no zones at all
    west = build("westcentralus")
    assert "Standard_A0" not in west
    assert {o.zone for it in west.values() for o in it.offerings} == {"0"}


def test_d2s_v3_labels_are_the_azure_providers() -> None:
    labels = build()["Standard_D2s_v3"].requirements.labels()
    assert labels[az.LABEL_SKU_NAME] == "Standard_D2s_v3"
    assert labels[az.LABEL_SKU_FAMILY] == "D"
    assert labels[az.LABEL_SKU_SERIES] == "Ds_v3"
    assert labels[az.LABEL_SKU_VERSION] == "3"
    assert labels[az.LABEL_SKU_CPU] == labels[az.AKS_LABEL_CPU] == "2"
    assert labels[az.LABEL_SKU_MEMORY] == labels[az.AKS_LABEL_MEMORY] == "8192"
    assert labels[az.LABEL_SKU_ACCELERATED_NETWORKING] == "true"
    assert labels[az.LABEL_SKU_STORAGE_PREMIUM_CAPABLE] == "true"
    assert labels[az.LABEL_SKU_STORAGE_EPHEMERAL_OS_MAX_SIZE] == "53"
    assert labels[az.LABEL_SKU_STORAGE_ULTRA_SSD] == "false"
    assert labels[az.LABEL_SKU_GPU_COUNT] == "0"
    assert labels[az.AKS_LABEL_CLUSTER] == "MC_rg_demo_southcentralus"
    assert labels[az.AKS_LABEL_OS_SKU] == "Ubuntu"
    assert labels[LABEL_REGION] == SCUS
    assert labels[LABEL_ARCH] == "amd64"
    reqs = build()["Standard_D2s_v3"].requirements
    assert reqs[az.LABEL_SKU_HYPERV_GENERATION].sorted_values() == ["1", "2"]
    assert reqs[az.AKS_LABEL_MODE].sorted_values() == ["system", "user"]
    assert reqs[az.LABEL_SKU_GPU_NAME].operator == "DoesNotExist"
    assert reqs[az.AKS_LABEL_FIPS_ENABLED].operator == "DoesNotExist"


def test_gpu_and_arm_skus() -> None:
    types = build()
    a100 = types["Standard_NC24ads_A100_v4"]
    labels = a100.requirements.labels()
    assert labels[az.LABEL_SKU_GPU_NAME] == "A100"
    assert labels[az.LABEL_SKU_GPU_MANUFACTURER] == "nvidia"
    assert labels[az.LABEL_SKU_GPU_COUNT] == "1"
    assert labels[az.LABEL_SKU_SERIES] == "NCads_v4"
    assert a100.capacity["nvidia.com/gpu"] == 1
    assert types["Standard_D16plds_v5"].requirements.labels()[LABEL_ARCH] == "arm64"


def test_allocatable_is_capacity_minus_the_aks_reservations() -> None:
    it = build()["Standard_D2s_v3"]
    memory = 8 * 2**30 - int(8 * 2**30 * 0.075 + 1)
    assert dict(it.capacity) == {
        res.CPU: 2000,
        res.MEMORY: memory,
        res.EPHEMERAL_STORAGE: 128 * 10**9,
        res.PODS: 250,
    }
    assert it.allocatable[res.CPU] == 1900
    assert it.allocatable[res.MEMORY] == memory - (1843 + 750) * 2**20
    small = build(max_pods=30, os_disk_size_gb=64)["Standard_D2s_v3"]
    assert small.capacity[res.PODS] == 30
    assert small.capacity[res.EPHEMERAL_STORAGE] == 64 * 10**9


def test_offerings_are_zones_times_capacity_types_with_prices() -> None:
    types = build()
    d2 = types["Standard_D2as_v6"]  # zones 2 and 3 only
    assert sorted((o.zone, o.capacity_type) for o in d2.offerings) == [
        ("southcentralus-2", "on-demand"), ("southcentralus-2", "spot"),
        ("southcentralus-3", "on-demand"), ("southcentralus-3", "spot"),
    ]
    assert d2.requirements[LABEL_ZONE].sorted_values() == ["southcentralus-2", "southcentralus-3"]
    assert {o.price for o in d2.offerings} == {fallback_prices(SCUS).on_demand["Standard_D2as_v6"]}
    regional = types["Standard_NC6s_v3"]
    assert {o.zone for o in regional.offerings} == {"0"}
    assert regional.requirements.labels()[az.LABEL_PLACEMENT_SCOPE] == "regional"
    # B20ms is not LowPriorityCapable: spot is offered but never available
    b20 = types["Standard_B20ms"]
    assert not any(o.available for o in b20.offerings if o.capacity_type == "spot")
    assert b20.requirements["karpenter.sh/capacity-type"].sorted_values() == ["on-demand"]


def test_retail_prices_win_and_unpriced_skus_sort_last() -> None:
    prices = PriceTable(on_demand={"Standard_D2s_v3": 0.5}, spot={"Standard_D2s_v3": 0.1})
    types = build(prices=prices)
    d2 = types["Standard_D2s_v3"]
    assert {o.capacity_type: o.price for o in d2.offerings} == {"on-demand": 0.5, "spot": 0.1}
    assert {o.price for o in types["Standard_D4s_v3"].offerings} == {999.0}


def test_unavailable_offerings_show_as_unavailable_until_the_ttl() -> None:
    clock = FakeClock()
    cache = UnavailableOfferings(clock=clock)
    key = OfferingKey("Standard_D2s_v3", "southcentralus-1", "on-demand")
    cache.mark([key], reason="ZonalAllocationFailure", ttl=timedelta(hours=1))
    d2 = build(unavailable=cache)["Standard_D2s_v3"]
    state = {(o.zone, o.capacity_type): o.available for o in d2.offerings}
    assert state[("southcentralus-1", "on-demand")] is False
    assert state[("southcentralus-1", "spot")] is True
    assert cache.reason(key) == "ZonalAllocationFailure"
    clock.advance(3601.0)
    d2 = build(unavailable=cache)["Standard_D2s_v3"]
    assert all(o.available for o in d2.offerings)


def test_node_class_shapes_labels_and_filters() -> None:
    types = build(image_family="AzureLinux", fips=True, encryption_at_host=True)
    labels = types["Standard_D2s_v3"].requirements.labels()
    assert labels[az.AKS_LABEL_OS_SKU] == "AzureLinux"
    assert labels[az.AKS_LABEL_FIPS_ENABLED] == "true"
    # D2_v2 has no encryption at host
    assert "Standard_D2_v2" not in types


@pytest.mark.parametrize(
    ("size", "family", "series", "version", "accelerator"),
    [
        ("D2s_v3", "D", "Ds_v3", "3", ""),
        ("Standard_NC24ads_A100_v4", "N", "NCads_v4", "4", "A100"),
        ("NC16as_T4_v3", "N", "NCas_v3", "3", "T4"),
        ("B20ms", "B", "Bms", "1", ""),
        ("DS2_v2", "D", "DS_v2", "2", ""),
        ("D16plds_v5", "D", "Dplds_v5", "5", ""),
    ],
)
def test_vm_size_names_parse(
    size: str, family: str, series: str, version: str, accelerator: str
) -> None:
    parsed = parse_vm_size(size)
    assert parsed is not None
    assert (parsed.family, parsed.series, parsed.version_number, parsed.accelerator) == (
        family, series, version, accelerator,
    )
    assert parse_vm_size("M8-2ms") is not None and parse_vm_size("M8-2ms").constrained_cpus == 2  # type: ignore[union-attr]
    assert parse_vm_size("D2_v2_Promo") is None


def test_each_size_attaches_as_many_disks_as_its_sku_says() -> None:
    # MaxDataDiskCount, the count the Azure Disk CSI driver publishes (issue 41 item 3)
    types = build()
    skus = {s.name: s for s in parse_skus(azurearm.skus(SCUS), SCUS)}
    for name in ("Standard_D2s_v3", "Standard_D16plds_v5"):
        assert skus[name].max_data_disks is not None
        assert types[name].volume_attachment_limits == {
            "disk.csi.azure.com": skus[name].max_data_disks}
    assert types["Standard_D2s_v3"].volume_attachment_limits == {"disk.csi.azure.com": 4}
