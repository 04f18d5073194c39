"""NodeOverlays applied to the catalogue: prices, capacity, precedence and conflicts, as
Karpenter's nodeoverlay controller and store apply them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scheduling_support import CAPACITY_TYPE, INSTANCE_TYPE, itype, nodepool, pod

from karpy.apis.v1alpha1 import NodeOverlay
from karpy.scheduling import InstanceType
from karpy.scheduling.overlay import (
    Overlay,
    PoolTypes,
    adjusted_price,
    apply_overlays,
    evaluate,
    order,
)
from karpy.scheduling.simulator import Simulator

DEVICE = "example.com/device"


def overlay(name: str, *reqs: dict[str, Any], **spec: Any) -> Overlay:
    """An Overlay parsed from a NodeOverlay manifest's spec."""
    return Overlay.from_model(
        NodeOverlay.from_dict(
            {"metadata": {"name": name}, "spec": {"requirements": list(reqs), **spec}}
        )
    )


def is_type(*names: str) -> dict[str, Any]:
    return {"key": INSTANCE_TYPE, "operator": "In", "values": list(names)}


def catalogue() -> list[InstanceType]:
    return [itype("small", 2, 8, price=1.0), itype("large", 8, 32, price=4.0)]


def pool_of(types: list[InstanceType], name: str = "default") -> PoolTypes:
    return PoolTypes(name, {}, types)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("0.25", 0.25),
        ("+0.5", 2.5),
        ("-0.5", 1.5),
        ("+10%", 2.2),
        ("-15%", 1.7),
        ("-100%", 0.0),
        ("-5", 0.0),
        (None, 2.0),
    ],
)
def test_price_and_price_adjustment_as_karpenter_computes_them(
    change: str | None, expected: float
) -> None:
    assert adjusted_price(2.0, change) == pytest.approx(expected)


def test_order_is_weight_then_name_descending() -> None:
    items = [overlay("a", weight=5), overlay("b", weight=5), overlay("c"), overlay("d", weight=9)]
    assert [o.name for o in order(items)] == ["d", "b", "a", "c"]


def test_a_cheaper_large_type_is_chosen_once_an_overlay_prices_it_down() -> None:
    one = [pod("web", cpu="1500m", memory="1Gi")]
    before = Simulator([nodepool(types=catalogue())]).solve(one)
    assert before.new_nodeclaims[0].instance_type_names == ["small", "large"]

    discount = overlay("discount", is_type("large"), price="0.5")
    types = apply_overlays([discount], pool_of(catalogue()))
    after = Simulator([nodepool(types=types)]).solve(one)
    assert after.new_nodeclaims[0].instance_type_names == ["large", "small"]
    assert after.new_nodeclaims[0].price == pytest.approx(0.5)
    large = next(t for t in types if t.name == "large")
    assert {o.overlay for o in large.offerings} == {"discount"}


def test_price_adjustment_selects_offerings_by_capacity_type() -> None:
    types = [itype("m", 2, 8, price=1.0, capacity_types=("on-demand", "spot"))]
    spot_cut = overlay(
        "spot", {"key": CAPACITY_TYPE, "operator": "In", "values": ["spot"]},
        priceAdjustment="-50%",
    )
    (result,) = apply_overlays([spot_cut], pool_of(types))
    prices = {o.capacity_type: o.price for o in result.offerings}
    assert prices == {"on-demand": 1.0, "spot": pytest.approx(0.35)}


def test_capacity_overlay_lets_a_pod_requesting_the_resource_schedule() -> None:
    wants = pod("gpu", cpu="1", memory="1Gi", extra_requests={DEVICE: "2"})
    before = Simulator([nodepool(types=catalogue())]).solve([wants])
    assert before.errors and not before.new_nodeclaims

    devices = overlay("devices", is_type("large"), capacity={DEVICE: "4"})
    types = apply_overlays([devices], pool_of(catalogue()))
    after = Simulator([nodepool(types=types)]).solve([wants])
    assert not after.errors
    assert after.new_nodeclaims[0].instance_type_names == ["large"]
    large = next(t for t in types if t.name == "large")
    assert large.capacity[DEVICE] == 4 and large.capacity_overlays == ("devices",)


def test_requirements_on_nodepool_name_and_template_labels() -> None:
    team = overlay(
        "team", {"key": "team", "operator": "In", "values": ["a"]}, price="0.1"
    )
    pool = overlay(
        "pool", {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["other"]},
        price="0.2",
    )
    labelled = apply_overlays([team, pool], PoolTypes("default", {"team": "a"}, catalogue()))
    assert {o.price for t in labelled for o in t.offerings} == {0.1}
    unlabelled = apply_overlays([team, pool], pool_of(catalogue()))
    assert {o.price for t in unlabelled for o in t.offerings} == {1.0, 4.0}


def test_higher_weight_wins_and_does_not_conflict() -> None:
    low = overlay("low", is_type("large"), price="3", weight=1)
    high = overlay("high", is_type("large"), price="2", weight=10)
    applied, conflicts = evaluate([low, high], [pool_of(catalogue())])
    assert conflicts == {}
    types = apply_overlays(applied, pool_of(catalogue()))
    assert {o.price for t in types if t.name == "large" for o in t.offerings} == {2.0}


def test_equal_weight_overlays_on_the_same_offering_conflict() -> None:
    first = overlay("b-first", is_type("large"), price="3", weight=5)
    second = overlay("a-second", is_type("large", "small"), priceAdjustment="-10%", weight=5)
    applied, conflicts = evaluate([first, second], [pool_of(catalogue())])
    assert [o.name for o in applied] == ["b-first"]
    assert set(conflicts) == {"a-second"}
    assert "conflict with another overlay" in conflicts["a-second"]
    # the conflicting overlay is not applied anywhere, not even to "small"
    types = apply_overlays(applied, pool_of(catalogue()))
    assert {t.name: t.offerings[0].price for t in types} == {"small": 1.0, "large": 3.0}


def test_equal_weight_capacity_conflicts_only_on_the_same_resource() -> None:
    one = overlay("one", is_type("large"), capacity={DEVICE: "1"}, weight=5)
    same = overlay("same", is_type("large"), capacity={DEVICE: "2"}, weight=5)
    other = overlay("other", is_type("large"), capacity={"example.com/fpga": "1"}, weight=5)
    applied, conflicts = evaluate([one, same, other], [pool_of(catalogue())])
    assert set(conflicts) == {"one"}  # "same" comes first in name-descending order
    assert {o.name for o in applied} == {"same", "other"}


def test_overlays_that_select_nothing_change_nothing() -> None:
    nothing = overlay("nothing", is_type("absent"), price="0")
    types = catalogue()
    assert apply_overlays([nothing], pool_of(types)) == tuple(types)


TYPE_NAMES = ("small", "large")


@st.composite
def overlays(draw: st.DrawFn) -> list[Overlay]:
    found = []
    for i in range(draw(st.integers(0, 5))):
        types = draw(st.lists(st.sampled_from(TYPE_NAMES), min_size=1, max_size=2, unique=True))
        spec: dict[str, Any] = {"weight": draw(st.sampled_from([1, 2]))}
        if draw(st.booleans()):
            spec["price"] = draw(st.sampled_from(["0.5", "2"]))
        else:
            spec["capacity"] = {draw(st.sampled_from([DEVICE, "example.com/b"])): "1"}
        found.append(overlay(f"o{i}", is_type(*types), **spec))
    return found


@given(overlays(), st.randoms())
def test_the_outcome_does_not_depend_on_the_order_overlays_are_listed(
    items: list[Overlay], rng: Any
) -> None:
    shuffled = list(items)
    rng.shuffle(shuffled)
    pools = [pool_of(catalogue())]
    assert evaluate(items, pools) == evaluate(shuffled, pools)
    applied, conflicts = evaluate(items, pools)
    assert {o.name for o in applied} | set(conflicts) == {o.name for o in items}
    types = apply_overlays(applied, pools[0])
    # every price comes from the provider or from an applied overlay that selected it
    names = {o.name for o in applied}
    for it in types:
        for offering in it.offerings:
            assert offering.overlay == "" or offering.overlay in names
