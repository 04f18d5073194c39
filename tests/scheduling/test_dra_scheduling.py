"""The simulator with DRA pods (karpy.scheduling.devicetracker wired into the solver):
devices decide which instance types a NodeClaim may become and which nodes a pod may go
to. Cases follow Karpenter v1.14.1's scheduling suite ("Dynamic Resource Allocation
(DRA)") and allocator_test.go's "Multi-IT allocation"; each names its upstream case."""

from __future__ import annotations

from dataclasses import replace

from karpy.scheduling import ExistingNode, Pod, Simulator
from karpy.scheduling.deviceallocation import Inventory
from karpy.scheduling.devices import (
    Device,
    DeviceClaim,
    DeviceClass,
    DeviceID,
    DeviceRequest,
    ResourceSliceTemplate,
)
from karpy.scheduling.devicetracker import DeviceInputs
from tests.scheduling.scheduling_support import itype, nodepool, pod

DRIVER = "gpu.example.com"
INPUTS = DeviceInputs(classes={"gpu": DeviceClass("gpu", (f'device.driver == "{DRIVER}"',))})


def gpu_type(name: str, gpus: int, price: float) -> object:
    devices = tuple(Device(DeviceID(DRIVER, "gpus", f"gpu-{i}"), {"model": "A100"})
                    for i in range(gpus))
    return replace(itype(name, 8, 32, price=price),
                   resource_slice_templates=(ResourceSliceTemplate(DRIVER, "gpus", devices),))


def dra_pod(name: str, gpus: int) -> Pod:
    claim = DeviceClaim("default", f"{name}-claim", (DeviceRequest("gpu", "gpu", count=gpus),))
    return replace(pod(name, cpu="100m"), device_claims=(claim,))


def simulator() -> Simulator:
    return Simulator([nodepool(types=[
        itype("cpu-only", 8, 32, price=0.5),  # cheapest, no devices
        gpu_type("one-gpu", 1, 1.0),
        gpu_type("four-gpu", 4, 3.0),
    ])])  # type: ignore[list-item]


def test_pod_with_two_gpus_gets_a_type_that_offers_them() -> None:
    """Multi-IT allocation / should prune instance types that cannot satisfy requests."""
    results = simulator().solve([dra_pod("p", 2)], devices=INPUTS)
    assert not results.errors
    (plan,) = results.new_nodeclaims
    assert [it.name for it in plan.instance_types] == ["four-gpu"]


def test_four_one_gpu_pods_share_one_four_gpu_node() -> None:
    """Tracker: devices handed to one pod are not handed to another, and pods pack
    onto one node while its type has devices left (acceptance: 4 pods, one node)."""
    results = simulator().solve([dra_pod(f"p{i}", 1) for i in range(4)], devices=INPUTS)
    assert not results.errors
    sizes = sorted(len(p.pods) for p in results.new_nodeclaims)
    assert sum(sizes) == 4
    # every plan's types can hold all of its pods' devices
    for plan in results.new_nodeclaims:
        gpus = {it.name: len(it.resource_slice_templates[0].devices)
                for it in plan.instance_types if it.resource_slice_templates}
        assert set(gpus) == {it.name for it in plan.instance_types}
        assert all(n >= len(plan.pods) for n in gpus.values())
    assert sizes == [4]
    assert [it.name for it in results.new_nodeclaims[0].instance_types] == ["four-gpu"]


def test_five_one_gpu_pods_need_two_nodes() -> None:
    """SharedCounters/templates analogue: should allow template allocation on a
    different NC after exhausting the budget on the first."""
    results = simulator().solve([dra_pod(f"p{i}", 1) for i in range(5)], devices=INPUTS)
    assert not results.errors
    assert sum(len(p.pods) for p in results.new_nodeclaims) == 5
    assert len(results.new_nodeclaims) == 2


def test_unsatisfiable_claim_gets_an_error_and_no_node() -> None:
    """Multi-IT allocation / should fail when no instance type can satisfy."""
    results = simulator().solve([dra_pod("p", 8)], devices=INPUTS)
    assert not results.new_nodeclaims
    (error,) = results.errors
    assert "cannot allocate all claims" in error.reason and "wants 8" in error.reason


def test_missing_device_class_names_it() -> None:
    """request_test.go / DeviceClass not found."""
    results = simulator().solve([dra_pod("p", 1)], devices=DeviceInputs())
    assert not results.new_nodeclaims
    assert "DeviceClass 'gpu' not found" in results.errors[0].reason


def test_existing_node_devices_used_before_new_capacity() -> None:
    """Single IT, in-cluster devices: a node's ResourceSlices are allocated from, and
    devices an allocated claim holds are not."""
    devices = tuple(Device(DeviceID(DRIVER, "n1", f"g{i}"), node_name="n1") for i in range(2))
    node = ExistingNode(name="n1", labels={"kubernetes.io/hostname": "n1"},
                        allocatable={"cpu": 8000, "memory": 32 << 30, "pods": 110})
    held = DeviceClaim("default", "old", (DeviceRequest("gpu", "gpu"),),
                       allocated=((devices[0].id, {}),), node="n1")
    inputs = replace(INPUTS, nodes={"n1": Inventory(devices)}, allocated=(held,))
    results = simulator().solve([dra_pod("a", 1), dra_pod("b", 1)], nodes=[node],
                                devices=inputs)
    assert not results.errors
    on_node = [p.key for plan in results.existing_nodes for p in plan.pods]
    assert len(on_node) == 1
    assert sum(len(p.pods) for p in results.new_nodeclaims) == 1


def test_pods_without_claims_are_unaffected() -> None:
    """The claim-less path: no tracker, the cheapest type as before."""
    results = simulator().solve([pod("p", cpu="100m")], devices=INPUTS)
    assert results.new_nodeclaims[0].instance_types[0].name == "cpu-only"


def test_dra_pods_are_not_packed_with_claim_less_twins() -> None:
    """A DRA pod identical to claim-less pods but for its claim is still checked for
    devices (it must not ride in their run of interchangeable pods)."""
    twins = [pod(f"plain{i}", cpu="100m") for i in range(3)]
    results = simulator().solve([*twins, dra_pod("gpu", 2)], devices=INPUTS)
    assert not results.errors
    (with_gpu,) = [p for p in results.new_nodeclaims if any(q.name == "gpu" for q in p.pods)]
    assert {it.name for it in with_gpu.instance_types} == {"four-gpu"}
