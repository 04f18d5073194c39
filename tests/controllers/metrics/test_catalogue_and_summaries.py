"""Karpenter's cost, catalogue, build and summary metrics as /metrics shows them."""

from __future__ import annotations

from karpy.controllers.metrics import GaugeStore
from karpy.controllers.metrics._cost import GAUGES, catalogue_samples
from karpy.controllers.metrics._state import build_info
from karpy.controllers.summary import Summary
from karpy.runtime.telemetry import Metrics
from karpy.scheduling import InstanceType, Offering


def lines(registry: Metrics, name: str) -> list[str]:
    text = registry.render().decode()
    return sorted(line for line in text.splitlines()
                  if line.startswith(name + "{") or line.startswith(name + " "))


def shape(name: str, offerings: list[Offering]) -> InstanceType:
    return InstanceType.build(
        name, capacity={"cpu": 4000, "memory": 16 * 2**30}, offerings=offerings
    )


def test_offerings_are_available_if_any_pool_offers_them_and_priced() -> None:
    registry = Metrics()
    store = GaugeStore(GAUGES)
    registry.registry.register(store)
    spot_gone = Offering(zone="z1", capacity_type="spot", price=0.05, available=False)
    spot_ok = Offering(zone="z1", capacity_type="spot", price=0.05)
    od = Offering(zone="z1", capacity_type="on-demand", price=0.2)
    store.replace_all({"catalogue": catalogue_samples({
        "a": {"m5.xlarge": shape("m5.xlarge", [spot_gone, od])},
        "b": {"m5.xlarge": shape("m5.xlarge", [spot_ok, od])},
        "c": {"c5.large": shape("c5.large", [spot_gone])},
    })})
    assert lines(registry, "karpenter_cloudprovider_instance_type_offering_available") == [
        'karpenter_cloudprovider_instance_type_offering_available{capacity_type="on-demand",'
        'instance_type="m5.xlarge",zone="z1"} 1.0',
        'karpenter_cloudprovider_instance_type_offering_available{capacity_type="spot",'
        'instance_type="c5.large",zone="z1"} 0.0',
        'karpenter_cloudprovider_instance_type_offering_available{capacity_type="spot",'
        'instance_type="m5.xlarge",zone="z1"} 1.0',
    ]
    assert ('karpenter_cloudprovider_instance_type_offering_price_estimate{capacity_type='
            '"on-demand",instance_type="m5.xlarge",zone="z1"} 0.2') in lines(
        registry, "karpenter_cloudprovider_instance_type_offering_price_estimate")
    assert ('karpenter_cloudprovider_instance_type_cpu_cores{instance_type="m5.xlarge"} 4.0'
            in lines(registry, "karpenter_cloudprovider_instance_type_cpu_cores"))
    assert ('karpenter_cloudprovider_instance_type_memory_bytes{instance_type="c5.large"} '
            '1.7179869184e+10') in lines(
        registry, "karpenter_cloudprovider_instance_type_memory_bytes")


def test_summary_exports_go_style_quantiles_over_a_ten_minute_window() -> None:
    """The performance dashboard queries {quantile="0"} .. {quantile="1"}."""
    now = [0.0]
    registry = Metrics()
    summary = Summary("karpenter_nodes_termination_duration_seconds", "help", ("nodepool",),
                      now=lambda: now[0])
    registry.registry.register(summary)
    for value in range(1, 101):
        summary.record(float(value), {"nodepool": "default"})
    got = lines(registry, "karpenter_nodes_termination_duration_seconds")
    assert got == [
        f'karpenter_nodes_termination_duration_seconds{{nodepool="default",quantile="{q}"}} {v}'
        for q, v in (("0", "1.0"), ("0.5", "50.0"), ("0.9", "90.0"), ("0.99", "99.0"),
                     ("1", "100.0"))
    ]
    now[0] = 601.0  # observations age out of the quantiles, not of _sum/_count
    summary.record(7.0, {"nodepool": "default"})
    got = lines(registry, "karpenter_nodes_termination_duration_seconds")
    assert 'karpenter_nodes_termination_duration_seconds{nodepool="default",quantile="1"} 7.0' \
        in got
    assert lines(registry, "karpenter_nodes_termination_duration_seconds_count") == [
        'karpenter_nodes_termination_duration_seconds_count{nodepool="default"} 101.0']


def test_build_info_is_one_with_karpenters_labels() -> None:
    sample = build_info()
    assert sample.value == 1.0
    assert set(sample.labels) == {"version", "goversion", "goarch", "commit"}
    assert sample.labels["version"]
