"""``karpy simulate`` on a snapshot file checked in beside this test (no cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from karpy.cli import main
from karpy.cloudprovider.kwok._catalogue import generate_catalogue, to_instance_types

DATA = Path(__file__).parent / "data"
SMALL = str(DATA / "small-cluster.yaml")


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["simulate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def as_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = simulate(capsys, "--snapshot", SMALL, "-o", "json", *args)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def kwok_price(instance_type: str, zone: str, capacity_type: str) -> float:
    for it in to_instance_types(generate_catalogue()):
        if it.name == instance_type:
            return min(o.price for o in it.offerings
                       if o.zone == zone and o.capacity_type == capacity_type)
    raise AssertionError(f"no kwok instance type {instance_type}")


def test_the_plan_names_pool_types_offering_pods_and_price(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = as_json(capsys)
    assert doc["schemaVersion"] == 1 and doc["provider"] == "kwok" and doc["synced"]
    provisioning = doc["provisioning"]
    assert provisioning["pendingPods"] == 7
    (claim,) = provisioning["nodeclaims"]
    assert claim["nodepool"] == "default" and claim["pods"] == 6
    assert claim["capacityTypes"] == ["spot"]
    assert claim["instanceTypes"]["count"] >= len(claim["instanceTypes"]["cheapest"]) > 0
    offering = claim["cheapestOffering"]
    assert claim["instanceTypes"]["cheapest"][0] == offering["instanceType"]
    assert claim["pricePerHour"] == pytest.approx(kwok_price(
        offering["instanceType"], offering["zone"], offering["capacityType"]), abs=1e-6)
    (pending,) = provisioning["pending"]
    assert pending["pod"] == "shop/trainer-0"
    assert "example.com/accelerator" in pending["reason"]
    bound = provisioning["lowerBound"]
    assert 0 < bound["pricePerHour"] <= claim["pricePerHour"]
    assert bound["abovePercent"] == pytest.approx(
        (claim["pricePerHour"] / bound["pricePerHour"] - 1) * 100, abs=0.01)


def test_consolidation_and_totals_after_the_plan_lands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = as_json(capsys)
    node_price = kwok_price("c-8x-amd64-linux", "test-zone-a", "on-demand")
    disruption = doc["disruption"]
    assert disruption["method"] == "Underutilized/single"
    (command,) = disruption["commands"]
    # Its one pod would fit beside the web pods on the new spot node, but that node has
    # just landed: its NodePool's consolidateAfter (1m) keeps consolidation's pods off
    # it (Karpenter v1.14, PR #3006), so the node is replaced by a small spot one.
    assert command["decision"] == "replace"
    assert [c["node"] for c in command["candidates"]] == ["default-x7k2p"]
    (replacement,) = command["replacements"]
    assert replacement["pods"] == 1 and replacement["capacityTypes"] == ["spot"]
    offering = replacement["cheapestOffering"]
    replacement_price = kwok_price(
        offering["instanceType"], offering["zone"], offering["capacityType"])
    assert replacement["pricePerHour"] == pytest.approx(replacement_price, abs=1e-6)
    assert command["savingsPerHour"] == pytest.approx(node_price - replacement_price, abs=1e-6)
    totals = doc["totals"]
    plan = doc["provisioning"]["pricePerHour"]
    assert totals["nodes"] == 1
    assert totals["currentPerHour"] == pytest.approx(node_price, abs=1e-6)
    assert totals["afterPerHour"] == pytest.approx(
        node_price + plan - (node_price - replacement_price), abs=1e-6)
    assert doc["whatIf"] is None


def test_a_what_if_nodepool_shows_the_difference(capsys: pytest.CaptureFixture[str]) -> None:
    doc = as_json(capsys, "-f", str(DATA / "nodepool-on-demand.yaml"))
    assert doc["provisioning"]["nodeclaims"] == []
    pending = {p["pod"]: p["reason"] for p in doc["provisioning"]["pending"]}
    assert len(pending) == 7
    assert "karpenter.sh/capacity-type" in pending["shop/web-6d9f7-0"]
    difference = doc["whatIf"]["difference"]
    assert doc["whatIf"]["files"] == [str(DATA / "nodepool-on-demand.yaml")]
    (pool,) = difference["nodepools"]
    assert pool["name"] == "default" and pool["nodeclaims"] == {"unchanged": 1, "whatIf": 0}
    assert difference["pendingPods"] == {"unchanged": 1, "whatIf": 7}
    change = difference["provisioningPerHour"]
    assert change["whatIf"] == 0 and change["change"] == -change["unchanged"] < 0


def test_a_spot_only_nodepool_changes_what_replaces_the_on_demand_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = as_json(capsys, "-f", str(DATA / "nodepool-spot.yaml"))
    (claim,) = doc["provisioning"]["nodeclaims"]
    assert claim["capacityTypes"] == ["spot"]
    assert doc["whatIf"]["difference"]["pendingPods"] == {"unchanged": 1, "whatIf": 1}


def test_the_table_prints_plan_bound_disruption_and_difference(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = simulate(capsys, "--snapshot", SMALL, "-f",
                              str(DATA / "nodepool-on-demand.yaml"))
    assert code == 0, err
    for text in ("NodePools", "Pods that stay pending", "shop/trainer-0", "Disruption",
                 "default-x7k2p", "Totals", "What-if vs unchanged",
                 # the reason's brackets are text, not markup
                 "karpenter.sh/capacity-type In [spot]"):
        assert text in out, text
    code, out, _ = simulate(capsys, "--snapshot", SMALL)
    assert "NodeClaims provisioning would create" in out
    assert "lower bound $" in out and "% above" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--snapshot", "/nonexistent.yaml"], "karpy simulate: /nonexistent.yaml: cannot read"),
        (["--snapshot", SMALL, "--cloud-provider", "nope"],
         "karpy simulate: cannot build cloud provider 'nope'"),
        (["--snapshot", SMALL, "-f", str(DATA / "small-cluster.yaml").replace(
            "small-cluster", "missing")], "karpy simulate: "),
        (["--snapshot", SMALL, "--provider-setting", "x"], "expected KEY=VALUE"),
    ],
)
def test_bad_input_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = simulate(capsys, *args)
    assert code in (1, 2) and out == ""
    assert err.startswith(message) if message.startswith("karpy") else message in err
    assert len(err.strip().splitlines()) == 1
