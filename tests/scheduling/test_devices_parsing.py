"""resource.k8s.io/v1 objects parsed into the allocator's values
(karpy.scheduling.devices): every field the allocator uses, and one clear line naming
the field for what it cannot use."""

from __future__ import annotations

from fractions import Fraction

import pytest

from karpy.scheduling.devicecel import Semver
from karpy.scheduling.devices import (
    DeviceConstraint,
    DeviceError,
    claim_from_dict,
    class_from_dict,
    slice_from_dict,
)


def test_claim_with_exact_first_available_constraints_and_capacity() -> None:
    claim = claim_from_dict({
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {
            "requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2,
                                            "capacity": {"requests": {"memory": "40Gi"}},
                                            "selectors": [{"cel": {"expression": "true"}}]}},
                {"name": "nic", "exactly": {"deviceClassName": "nic",
                                            "allocationMode": "All"}},
                {"name": "any", "firstAvailable": [
                    {"name": "big", "deviceClassName": "gpu", "count": 4},
                    {"name": "small", "deviceClassName": "gpu"}]},
            ],
            "constraints": [{"requests": ["gpu", "nic"],
                             "matchAttribute": "dra.net/pcieRoot"},
                            {"distinctAttribute": "gpu.example.com/index"}],
        }},
    })
    gpu, nic, alternatives = claim.requests
    assert (gpu.count, gpu.all, gpu.capacity, gpu.selectors) == (
        2, False, {"memory": Fraction(40 * 2**30)}, ("true",))
    assert nic.all
    assert [r.name for r in alternatives.first_available] == ["any/big", "any/small"]
    assert claim.constraints == (
        DeviceConstraint("dra.net/pcieRoot", frozenset({"gpu", "nic"})),
        DeviceConstraint("gpu.example.com/index", distinct=True))


def test_allocated_claim_reads_its_devices_and_node() -> None:
    claim = claim_from_dict({
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "g"}}]}},
        "status": {"allocation": {
            "devices": {"results": [{"request": "g", "driver": "d", "pool": "p",
                                     "device": "x", "consumedCapacity": {"memory": "1Gi"}}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}},
    })
    ((device_id, consumed),) = claim.allocated
    assert (str(device_id), consumed, claim.node) == ("d/p/x", {"memory": Fraction(2**30)}, "n1")


def test_slice_devices_attributes_capacity_and_counters() -> None:
    template = slice_from_dict({"metadata": {"name": "s"}, "spec": {
        "driver": "gpu.example.com", "pool": {"name": "n1"}, "nodeName": "n1",
        "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}],
        "devices": [{"name": "gpu-0-mig", "attributes": {
            "model": {"string": "A100"}, "index": {"int": 0}, "mig": {"bool": True},
            "driverVersion": {"version": "1.2.3"}},
            "capacity": {"memory": {"value": "10Gi"}},
            "allowMultipleAllocations": True,
            "consumesCounters": [{"counterSet": "gpu-0",
                                  "counters": {"memory": {"value": "10Gi"}}}]}]}})
    (device,) = template.devices
    assert device.attributes == {"model": "A100", "index": 0, "mig": True,
                                 "driverVersion": "1.2.3"}
    assert isinstance(device.attributes["driverVersion"], Semver)
    assert device.attribute("gpu.example.com/model") == "A100"
    assert device.allow_multiple_allocations and device.node_name == "n1"
    assert device.consumes_counters == {"gpu-0": {"memory": Fraction(10 * 2**30)}}
    assert template.shared_counters == {"gpu-0": {"memory": Fraction(80 * 2**30)}}


@pytest.mark.parametrize(("obj", "message"), [
    ({"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": [
        {"name": "g", "exactly": {"deviceClassName": "g", "count": 0}}]}}},
     r"ResourceClaim ns/c spec.devices.requests\[g\].exactly.count: 0 is outside 1..32"),
    ({"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": [
        {"name": "g", "exactly": {"deviceClassName": "g", "allocationMode": "Some"}}]}}},
     r"allocationMode: 'Some' is neither ExactCount nor All"),
    ({"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": [
        {"name": "g", "exactly": {}}]}}},
     r"exactly.deviceClassName: required"),
])
def test_bad_claims_name_the_field(obj: dict[str, object], message: str) -> None:
    with pytest.raises(DeviceError, match=message):
        claim_from_dict(obj)


def test_non_cel_selector_is_refused() -> None:
    with pytest.raises(DeviceError, match=r"DeviceClass gpu spec.selectors\[0\]: only CEL"):
        class_from_dict({"metadata": {"name": "gpu"}, "spec": {"selectors": [{"other": {}}]}})
