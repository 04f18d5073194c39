"""Feature gates parse Karpenter's FEATURE_GATES form and reject typos by name."""

from __future__ import annotations

import pytest

from karpy.controllers.settings import FeatureGates


def test_defaults_are_karpenters() -> None:
    gates = FeatureGates.parse("")
    assert gates.spot_to_spot_consolidation is False
    assert gates.node_repair is False
    assert gates.reserved_capacity is True


def test_parse_karpenter_form() -> None:
    gates = FeatureGates.parse(
        "SpotToSpotConsolidation=true, NodeRepair=True,ReservedCapacity=false"
    )
    assert gates.spot_to_spot_consolidation and gates.node_repair
    assert not gates.reserved_capacity
    assert gates.as_mapping()["NodeRepair"] is True


@pytest.mark.parametrize(
    ("text", "message"),
    [("SpotToSpot=true", "unknown feature gate 'SpotToSpot'"),
     ("NodeRepair=yes", "NodeRepair: 'yes' is not true or false")],
)
def test_bad_gates_name_the_gate(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FeatureGates.parse(text)


#: Karpenter v1.14's default FEATURE_GATES (kubernetes-sigs/karpenter
#: pkg/operator/options/options.go at 2266468104f36373ed002241afaee2d3bbc26078): a
#: cluster moving from Karpenter carries it in its Deployment's environment.
KARPENTER_V114_GATES = (
    "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,"
    "NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"
)
#: Karpenter v1.15.0's (featureGatesDefault(), sigs.k8s.io/karpenter@v1.15.0): three more.
KARPENTER_DEFAULT_GATES = (
    KARPENTER_V114_GATES
    + ",TerminateFirstDrift=false,TerminateFirstRepair=false,PodDeletionCostManagement=false"
)


def test_karpenters_default_string_is_accepted_with_its_values() -> None:
    assert FeatureGates.parse(KARPENTER_V114_GATES) == FeatureGates()
    gates = FeatureGates.parse(KARPENTER_DEFAULT_GATES)
    assert gates == FeatureGates()
    assert ",".join(f"{k}={str(v).lower()}" for k, v in gates.as_mapping().items()) == (
        KARPENTER_DEFAULT_GATES
    )


def test_static_capacity_and_capacity_buffer_gates() -> None:
    gates = FeatureGates.parse("StaticCapacity=true,CapacityBuffer=true")
    assert gates.static_capacity and gates.capacity_buffer


def test_the_gates_reach_providers_by_karpenters_names() -> None:
    gates = FeatureGates.parse("ReservedCapacity=false,NodeRepair=true").as_mapping()
    assert gates["ReservedCapacity"] is False and gates["NodeRepair"] is True
    assert gates["SpotToSpotConsolidation"] is False  # Karpenter's default
    assert set(gates) == {"NodeRepair", "ReservedCapacity", "SpotToSpotConsolidation",
                          "NodeOverlay", "StaticCapacity", "CapacityBuffer",
                          "TerminateFirstDrift", "TerminateFirstRepair",
                          "PodDeletionCostManagement"}  # fmt: skip
