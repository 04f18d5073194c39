"""``karpy simulate`` shows which NodeClaims land on reserved capacity and how much of
each reservation the plan takes (issue 28): a kwok catalogue with a 2-instance
reservation and three pending pods that each need a node of their own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from karpy.cli import main

READY = [{"type": t, "status": "True", "reason": t, "message": "",
          "lastTransitionTime": "2026-11-23T20:00:00Z"}
         for t in ("ValidationSucceeded", "NodeClassReady", "Ready")]


def _catalogue() -> list[dict[str, Any]]:
    def offering(capacity_type: str, price: float, **extra: Any) -> dict[str, Any]:
        reqs = [{"key": "karpenter.sh/capacity-type", "operator": "In",
                 "values": [capacity_type]},
                {"key": "topology.kubernetes.io/zone", "operator": "In",
                 "values": ["test-zone-a"]}]
        if capacity_type == "reserved":
            reqs.append({"key": "karpenter.kwok.sh/reservation-id", "operator": "In",
                         "values": ["cr-sim"]})
        return {"Price": price, "Available": True, "Requirements": reqs, **extra}

    return [{"name": "m-4x-amd64-linux", "architecture": "amd64",
             "operatingSystems": ["linux"],
             "resources": {"cpu": "4", "memory": "16Gi", "pods": "64"},
             "offerings": [offering("on-demand", 0.2),
                           offering("reserved", 0.00002, ReservationCapacity=2)]}]


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": "app", "uid": "owner-app",
                                          "controller": True}]},
        "spec": {"containers": [{"name": "app", "image": "pause",
                                 "resources": {"requests": {"cpu": "3"}}}]},
        "status": {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "lastTransitionTime": "2026-11-23T20:15:00Z", "message": "no nodes"}]},
    }


def _snapshot() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": "default", "labels": {"kubernetes.io/metadata.name": "default"}}},
        {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
         "metadata": {"name": "default", "uid": "nc-1"},
         "status": {"conditions": READY[2:]}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
         "metadata": {"name": "default", "uid": "np-1", "generation": 1},
         "spec": {"template": {"metadata": {"labels": {}}, "spec": {
             "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                              "name": "default"},
             "requirements": [{"key": "kubernetes.io/arch", "operator": "In",
                               "values": ["amd64"]}]}},
             "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}},
         "status": {"conditions": READY}},
        *(_pod(f"app-{i}") for i in range(3)),
    ]}


def test_the_plan_shows_reserved_claims_and_the_reservation_use(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps the table on a narrow terminal
    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(json.dumps(_snapshot()))
    catalogue = tmp_path / "types.json"
    catalogue.write_text(json.dumps(_catalogue()))
    args = ["simulate", "--snapshot", str(snapshot),
            "--provider-setting", f"instanceTypesFile={catalogue}"]
    assert main([*args, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    provisioning = doc["provisioning"]
    claims = provisioning["nodeclaims"]
    assert [c["reservations"] for c in claims] == [["cr-sim"], ["cr-sim"]]
    assert all(c["capacityTypes"] == ["reserved"] for c in claims)
    assert provisioning["reservations"] == [{"id": "cr-sim", "used": 2, "free": 2}]
    # the third pod waits for the reservation (the provisioner defers it)
    (pending,) = provisioning["pending"]
    assert "reserved offerings" in pending["reason"]

    assert main(args) == 0
    table = capsys.readouterr().out
    assert "reserved (cr-sim)" in table
    assert "reservation cr-sim: the plan takes 2 of 2 free slot(s)" in table


def test_explain_says_the_pod_lands_on_the_reservation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(json.dumps(_snapshot()))
    catalogue = tmp_path / "types.json"
    catalogue.write_text(json.dumps(_catalogue()))
    code = main(["explain", "pod", "default/app-0", "--snapshot", str(snapshot),
                 "--provider-setting", f"instanceTypesFile={catalogue}", "-o", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    doc = json.loads(out.out)
    assert doc["decision"]["action"] == "new-nodeclaim"
    assert doc["decision"]["reservations"] == ["cr-sim"]
    assert "on reserved capacity (reservation cr-sim)" in doc["summary"]
