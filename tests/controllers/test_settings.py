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
