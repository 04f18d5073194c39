"""The cluster model's DRA index (karpy.state.devices): ResourceSlices become node
inventories, allocated claims hold their devices, pods' claims resolve as Karpenter's
resourceClaimName does (dra_internal_test.go "resourceClaimName")."""

from __future__ import annotations

from typing import Any

from karpy.scheduling import Pod
from karpy.state.devices import DeviceIndex

SLICE = {"metadata": {"name": "n1-gpu"}, "spec": {
    "driver": "gpu.example.com",
    "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}, "nodeName": "n1",
    "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}


def claim(name: str, allocated: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu"}}]}}}
    if allocated:
        obj["status"] = {"allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                     "pool": "n1", "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}
    return obj


def pod_obj(refs: list[dict[str, str]], statuses: list[dict[str, str]] | None = None
            ) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c"}], "resourceClaims": refs},
            "status": {"resourceClaimStatuses": statuses or []}}


def test_slices_and_allocated_claims_become_inputs() -> None:
    index = DeviceIndex()
    index.update_slice(SLICE)
    index.update_claim(claim("held", allocated=True))
    inputs = index.inputs()
    assert [d.id.name for d in inputs.nodes["n1"].devices] == ["gpu-0", "gpu-1"]
    (held,) = inputs.allocated
    assert held.node == "n1" and held.allocated[0][0].name == "gpu-0"
    assert index.has_slices("n1") and not index.has_slices("n2")
    index.delete_slice(SLICE)
    assert index.inputs().nodes == {}


def test_direct_claim_name_resolves() -> None:
    """resourceClaimName / should use a direct ResourceClaimName."""
    index = DeviceIndex()
    index.update_claim(claim("claim-a"))
    obj = pod_obj([{"name": "ref", "resourceClaimName": "claim-a"}])
    resolved = index.resolve(obj, Pod.from_dict(obj))
    assert not isinstance(resolved, str)
    assert [c.key for c in resolved.device_claims] == ["default/claim-a"]


def test_template_claim_resolves_through_pod_status_or_waits() -> None:
    """resourceClaimName / should resolve a template's generated name from pod status;
    should skip when no matching status entry exists (the pod waits)."""
    index = DeviceIndex()
    index.update_claim(claim("generated-a"))
    refs = [{"name": "ref", "resourceClaimTemplateName": "tmpl"}]
    made = pod_obj(refs, [{"name": "ref", "resourceClaimName": "generated-a"}])
    resolved = index.resolve(made, Pod.from_dict(made))
    assert not isinstance(resolved, str)
    assert [c.key for c in resolved.device_claims] == ["default/generated-a"]
    waiting = pod_obj(refs)
    assert index.resolve(waiting, Pod.from_dict(waiting)) == (
        "waiting for the ResourceClaim of template tmpl to be created")


def test_unparseable_claim_names_its_field() -> None:
    index = DeviceIndex()
    bad = claim("bad")
    bad["spec"]["devices"]["requests"][0] = {"name": "gpu"}
    index.update_claim(bad)
    obj = pod_obj([{"name": "ref", "resourceClaimName": "bad"}])
    assert index.resolve(obj, Pod.from_dict(obj)) == (
        "ResourceClaim default/bad spec.devices.requests[gpu]: one of exactly or "
        "firstAvailable is required")


def _slice(name: str, *, generation: int, count: int, owner: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    spec: dict[str, Any] = {"driver": "gpu.example.com", "pool": {
        "name": "n1", "generation": generation, "resourceSliceCount": count}, "devices": []}
    if owner:
        meta["ownerReferences"] = [{"kind": "Node", "name": "n1", "apiVersion": "v1",
                                    "uid": "u"}]
    else:
        spec["nodeName"] = "n1"
    return {"metadata": meta, "spec": spec}


def test_a_driver_counts_once_its_pool_is_complete_at_its_latest_generation() -> None:
    """Karpenter v1.14.1 completePoolDrivers: the slices seen at a pool's highest
    generation must be as many as they declare; a newer generation starts over."""
    index = DeviceIndex()
    index.update_slice(_slice("a", generation=1, count=2))
    assert index.drivers_on("n1") == frozenset()  # 1 of 2
    index.update_slice(_slice("b", generation=1, count=2, owner=True))  # a Node owner
    assert index.drivers_on("n1") == {"gpu.example.com"}
    index.update_slice(_slice("c", generation=2, count=2))
    assert index.drivers_on("n1") == frozenset()  # generation 2: 1 of 2
    index.delete_slice(_slice("c", generation=2, count=2))
    assert index.drivers_on("n1") == {"gpu.example.com"}
