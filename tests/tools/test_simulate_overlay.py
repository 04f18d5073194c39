"""``karpy simulate -f overlay.yaml``: what a NodeOverlay would change in the plan and its
$/h, on the small kwok snapshot (no cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy.cli import main

SMALL = str(Path(__file__).parent / "data" / "small-cluster.yaml")


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["simulate", "--snapshot", SMALL, "-o", "json", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    document: dict[str, Any] = json.loads(out.out)
    return document


def overlay_file(tmp_path: Path, *overlays: dict[str, Any]) -> str:
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump_all([
        {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
         "metadata": {"name": o.pop("name")}, "spec": o} for o in overlays]))
    return str(path)


def of_type(name: str) -> list[dict[str, Any]]:
    return [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [name]}]


def test_an_overlay_that_prices_another_type_down_changes_the_plan_and_its_price(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    before = simulate(capsys)
    assert "nodeOverlays" not in before  # the gate is off and no file brings one
    (claim,) = before["provisioning"]["nodeclaims"]
    chosen = claim["cheapestOffering"]["instanceType"]
    other = next(t for t in claim["instanceTypes"]["cheapest"] if t != chosen)

    doc = simulate(capsys, "-f", overlay_file(
        tmp_path, {"name": "negotiated", "requirements": of_type(other), "price": "0.0001"}))
    (claim,) = doc["provisioning"]["nodeclaims"]
    assert claim["cheapestOffering"] == {
        **claim["cheapestOffering"], "instanceType": other, "pricedBy": "negotiated"}
    assert claim["pricePerHour"] == pytest.approx(0.0001)
    assert doc["nodeOverlays"] == {"applied": ["negotiated"], "notApplied": {}}
    difference = doc["whatIf"]["difference"]
    assert difference["provisioningPerHour"]["change"] < 0


def test_conflicting_overlays_are_reported_and_the_table_names_the_overlay(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (claim,) = simulate(capsys)["provisioning"]["nodeclaims"]
    chosen = claim["cheapestOffering"]["instanceType"]
    path = overlay_file(
        tmp_path,
        {"name": "a", "requirements": of_type(chosen), "price": "0.0002", "weight": 3},
        {"name": "b", "requirements": of_type(chosen), "priceAdjustment": "-1%", "weight": 3},
    )
    doc = simulate(capsys, "-f", path)
    assert doc["nodeOverlays"]["applied"] == ["b"]
    assert "conflict with another overlay" in doc["nodeOverlays"]["notApplied"]["a"]
    code = main(["simulate", "--snapshot", SMALL, "-f", path])
    out = capsys.readouterr().out
    assert code == 0
    assert "NodeOverlays applied: b" in out
    assert "NodeOverlay a not applied: conflict with another overlay" in out
    assert "(b)" in out


def test_overlays_in_the_snapshot_apply_only_with_the_gate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (claim,) = simulate(capsys)["provisioning"]["nodeclaims"]
    chosen = claim["cheapestOffering"]["instanceType"]
    snapshot = yaml.safe_load(Path(SMALL).read_text())
    snapshot["items"].append({
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
        "metadata": {"name": "in-cluster"},
        "spec": {"requirements": of_type(chosen), "priceAdjustment": "-50%"}})
    path = tmp_path / "with-overlay.yaml"
    path.write_text(yaml.safe_dump(snapshot))

    def run(*flags: str) -> dict[str, Any]:
        code = main(["simulate", "--snapshot", str(path), "-o", "json", *flags])
        out = capsys.readouterr()
        assert code == 0, out.err
        document: dict[str, Any] = json.loads(out.out)
        return document

    off = run()
    assert "nodeOverlays" not in off
    assert off["provisioning"]["nodeclaims"][0]["pricePerHour"] == claim["pricePerHour"]
    on = run("--feature-gates", "NodeOverlay=true")
    assert on["nodeOverlays"]["applied"] == ["in-cluster"]
    (overlaid,) = on["provisioning"]["nodeclaims"]
    assert overlaid["pricePerHour"] == pytest.approx(claim["pricePerHour"] / 2)
    assert overlaid["cheapestOffering"]["pricedBy"] == "in-cluster"
