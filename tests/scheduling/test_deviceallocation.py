"""The device allocator (karpy.scheduling.deviceallocation), ported from Karpenter
v1.14.1 pkg/scheduling/dynamicresources/allocator_test.go: each test names its upstream
case ("Describe / It"). Cases karpy adds (firstAvailable, distinctAttribute, which
v1.14.1 refuses) say so."""

from __future__ import annotations

from fractions import Fraction

from karpy.scheduling.deviceallocation import Allocation, Allocator, Inventory, Usage
from karpy.scheduling.devices import (
    Device,
    DeviceClaim,
    DeviceClass,
    DeviceConstraint,
    DeviceID,
    DeviceRequest,
    ResourceSliceTemplate,
)

DRIVER = "gpu.example.com"
CLASSES = {
    "gpu": DeviceClass("gpu", (f'device.driver == "{DRIVER}"',)),
    "a100": DeviceClass("a100", (f'device.attributes["{DRIVER}"].model == "A100"',)),
}


def gpus(n: int, pool: str = "node-a", model: str = "A100", **extra: object) -> tuple[Device, ...]:
    return tuple(
        Device(DeviceID(DRIVER, pool, f"gpu-{i}"),
               attributes={"model": model, "index": i, **extra})
        for i in range(n)
    )


def claim(name: str, *requests: DeviceRequest, namespace: str = "default",
          constraints: tuple[DeviceConstraint, ...] = ()) -> DeviceClaim:
    return DeviceClaim(namespace, name, requests, constraints)


def req(name: str = "gpu", count: int = 1, cls: str = "gpu", **kw: object) -> DeviceRequest:
    return DeviceRequest(name, cls, count=count, **kw)  # type: ignore[arg-type]


def allocated(answer: Allocation | str) -> list[str]:
    assert isinstance(answer, Allocation), answer
    return [str(p.device.id.name) for p in answer.picks]


def test_empty_claims_return_immediately() -> None:
    """Empty claims / should return immediately with no claims."""
    assert Allocator(CLASSES).allocate([], Inventory(), Usage()) == Allocation()


def test_allocate_a_single_device() -> None:
    """Single IT, in-cluster devices / should allocate a single device."""
    answer = Allocator(CLASSES).allocate([claim("c", req())], Inventory(gpus(2)), Usage())
    assert allocated(answer) == ["gpu-0"]


def test_allocate_multiple_devices_for_one_request() -> None:
    """Single IT, in-cluster devices / should allocate multiple devices for a single request."""
    answer = Allocator(CLASSES).allocate([claim("c", req(count=3))], Inventory(gpus(4)), Usage())
    assert allocated(answer) == ["gpu-0", "gpu-1", "gpu-2"]


def test_fail_when_not_enough_devices() -> None:
    """Single IT, in-cluster devices / should fail when not enough devices are available."""
    answer = Allocator(CLASSES).allocate([claim("c", req(count=3))], Inventory(gpus(2)), Usage())
    assert isinstance(answer, str)
    assert "claim default/c" in answer and "wants 3" in answer and "2 match" in answer


def test_multiple_requests_and_their_total() -> None:
    """Single IT, in-cluster devices / should handle multiple requests in a single claim;
    should fail when multiple requests exceed total devices."""
    alloc = Allocator(CLASSES)
    two = claim("c", req("a"), req("b"))
    assert allocated(alloc.allocate([two], Inventory(gpus(2)), Usage())) == ["gpu-0", "gpu-1"]
    three = claim("c", req("a", 2), req("b"))
    assert isinstance(alloc.allocate([three], Inventory(gpus(2)), Usage()), str)


def test_multiple_claims_and_namespaces() -> None:
    """Single IT, in-cluster devices / should handle multiple claims; should distinguish
    claims with the same name in different namespaces."""
    answer = Allocator(CLASSES).allocate(
        [claim("c", req()), claim("c", req(), namespace="other")], Inventory(gpus(2)), Usage())
    assert isinstance(answer, Allocation)
    assert answer.claims == {"default/c", "other/c"}
    assert allocated(answer) == ["gpu-0", "gpu-1"]


def test_skip_already_allocated_devices() -> None:
    """Single IT, in-cluster devices / should skip already-allocated devices; should
    allocate remaining devices when some are already allocated."""
    devices = gpus(3)
    held = DeviceClaim("default", "old", (req(),), allocated=((devices[0].id, {}),))
    usage = Usage()
    usage.holding([held], Inventory(devices))
    alloc = Allocator(CLASSES)
    assert allocated(alloc.allocate([claim("c", req(count=2))], Inventory(devices), usage)) == [
        "gpu-1", "gpu-2"]
    assert isinstance(alloc.allocate([claim("c", req(count=3))], Inventory(devices), usage), str)


def test_cel_selector_filtering() -> None:
    """CEL selector filtering / should only allocate devices matching the selector; should
    fail when not enough devices match; should filter with request-level selectors."""
    devices = (*gpus(2, model="T4"), *gpus(1, pool="p2"))
    alloc = Allocator(CLASSES)
    inv = Inventory(devices)
    answer = alloc.allocate([claim("c", req(cls="a100"))], inv, Usage())
    assert isinstance(answer, Allocation) and answer.picks[0].device.id.pool == "p2"
    assert isinstance(alloc.allocate([claim("c", req(cls="a100", count=2))], inv, Usage()), str)
    by_index = req(selectors=(f'device.attributes["{DRIVER}"].index == 1',))
    assert allocated(alloc.allocate([claim("c", by_index)], inv, Usage())) == ["gpu-1"]


def test_match_attribute_with_backtracking() -> None:
    """Constraint satisfaction / should satisfy MatchAttribute constraints; should
    backtrack to satisfy constraints; ... with backtracking across requests."""
    devices = (
        Device(DeviceID(DRIVER, "p", "g0"), {"numa": 0}),
        Device(DeviceID(DRIVER, "p", "g1"), {"numa": 1}),
        Device(DeviceID(DRIVER, "p", "g2"), {"numa": 1}),
    )
    same = (DeviceConstraint(f"{DRIVER}/numa"),)
    alloc = Allocator(CLASSES)
    answer = alloc.allocate([claim("c", req(count=2), constraints=same)], Inventory(devices),
                            Usage())
    assert allocated(answer) == ["g1", "g2"]  # g0 first, then backtracked
    across = claim("c", req("a"), req("b"), constraints=(DeviceConstraint(
        f"{DRIVER}/numa", frozenset({"a", "b"})),))
    assert allocated(alloc.allocate([across], Inventory(devices), Usage())) == ["g1", "g2"]
    three = claim("c", req(count=3), constraints=same)
    assert isinstance(alloc.allocate([three], Inventory(devices), Usage()), str)


def test_distinct_attribute_karpy_addition() -> None:
    """karpy addition (Karpenter v1.14.1 refuses distinctAttribute): distinct values."""
    devices = (
        Device(DeviceID(DRIVER, "p", "g0"), {"numa": 0}),
        Device(DeviceID(DRIVER, "p", "g1"), {"numa": 0}),
        Device(DeviceID(DRIVER, "p", "g2"), {"numa": 1}),
    )
    c = claim("c", req(count=2), constraints=(DeviceConstraint(f"{DRIVER}/numa",
                                                                distinct=True),))
    assert allocated(Allocator(CLASSES).allocate([c], Inventory(devices), Usage())) == [
        "g0", "g2"]


def test_prefer_in_cluster_devices_over_templates() -> None:
    """Single IT with templates / should prefer in-cluster devices over templates;
    should allocate from templates when in-cluster devices are insufficient."""
    template = ResourceSliceTemplate(DRIVER, "tmpl", gpus(2, pool="tmpl"))
    in_cluster = ResourceSliceTemplate(DRIVER, "node", gpus(1, pool="node"))
    inv = Inventory.of([in_cluster, template])
    answer = Allocator(CLASSES).allocate([claim("c", req(count=2))], inv, Usage())
    assert isinstance(answer, Allocation)
    assert [p.device.id.pool for p in answer.picks] == ["node", "tmpl"]


def _partitioned(capacity: int) -> ResourceSliceTemplate:
    counters = {"gpu-0-counters": {"memory": Fraction(capacity)}}
    parts = tuple(
        Device(DeviceID(DRIVER, "p", f"gpu-0-part-{i}"), {"model": "A100"},
               consumes_counters={"gpu-0-counters": {"memory": Fraction(20)}})
        for i in range(4)
    )
    return ResourceSliceTemplate(DRIVER, "p", parts, counters)


def test_shared_counters_budget() -> None:
    """SharedCounters — in-cluster / should allocate devices when counter budget is
    sufficient; should reject allocation when counter budget is exhausted; should track
    inflight counter consumption across pods."""
    inv = Inventory.of([_partitioned(40)])
    alloc = Allocator(CLASSES)
    assert len(allocated(alloc.allocate([claim("c", req(count=2))], inv, Usage()))) == 2
    assert isinstance(alloc.allocate([claim("c", req(count=3))], inv, Usage()), str)
    usage = Usage()
    first = alloc.allocate([claim("a", req())], inv, usage)
    assert isinstance(first, Allocation)
    usage.commit(first)
    second = alloc.allocate([claim("b", req())], inv, usage)
    assert isinstance(second, Allocation)
    usage.commit(second)
    assert isinstance(alloc.allocate([claim("c", req())], inv, usage), str)


def test_zero_capacity_counters() -> None:
    """SharedCounters — zero capacity edge cases / should reject allocation when counter
    has zero capacity."""
    assert isinstance(Allocator(CLASSES).allocate(
        [claim("c", req())], Inventory.of([_partitioned(0)]), Usage()), str)


def test_reject_device_whose_pool_has_no_counter() -> None:
    """SharedCounters — templates / should reject template device when its pool has no
    entry in templateRemainingCounters."""
    orphan = Device(DeviceID(DRIVER, "p", "g"), consumes_counters={"x": {"m": Fraction(1)}})
    assert isinstance(Allocator(CLASSES).allocate(
        [claim("c", req())], Inventory((orphan,)), Usage()), str)


def test_all_mode() -> None:
    """Request validation: allocationMode All takes every matching device and fails on a
    node with none (upstream: should enforce all-mode counter budget)."""
    alloc = Allocator(CLASSES)
    every = claim("c", DeviceRequest("gpu", "gpu", all=True))
    assert allocated(alloc.allocate([every], Inventory(gpus(3)), Usage())) == [
        "gpu-0", "gpu-1", "gpu-2"]
    assert isinstance(alloc.allocate([every], Inventory(), Usage()), str)
    usage = Usage()
    usage.commit(alloc.allocate([claim("one", req())], Inventory(gpus(3)), Usage()))  # type: ignore[arg-type]
    assert isinstance(alloc.allocate([every], Inventory(gpus(3)), usage), str)
    assert isinstance(alloc.allocate([every], Inventory.of([_partitioned(40)]), Usage()), str)


def test_consumable_capacity() -> None:
    """consumable_capacity.go: a device with allowMultipleAllocations is shared while its
    capacity lasts; an unnamed capacity is consumed whole."""
    shared = Device(DeviceID(DRIVER, "p", "g"), {"model": "A100"},
                    capacity={"memory": Fraction(80)}, allow_multiple_allocations=True)
    inv = Inventory((shared,))
    alloc = Allocator(CLASSES)
    half = DeviceRequest("gpu", "gpu", capacity={"memory": Fraction(40)})
    usage = Usage()
    for name in ("a", "b"):
        answer = alloc.allocate([claim(name, half)], inv, usage)
        assert isinstance(answer, Allocation)
        assert answer.picks[0].consumed == {"memory": Fraction(40)}
        usage.commit(answer)
    assert isinstance(alloc.allocate([claim("c", half)], inv, usage), str)
    assert isinstance(alloc.allocate([claim("d", req())], inv, Usage()), Allocation)
    whole = Usage()
    whole.commit(alloc.allocate([claim("d", req())], inv, whole))  # type: ignore[arg-type]
    assert isinstance(alloc.allocate([claim("e", half)], inv, whole), str)


def test_first_available_karpy_addition() -> None:
    """karpy addition (Karpenter v1.14.1 refuses firstAvailable; main allocates it): the
    first alternative that fits wins."""
    alternatives = DeviceRequest("gpu", "", first_available=(
        DeviceRequest("gpu/big", "gpu", count=4), DeviceRequest("gpu/small", "gpu", count=2)))
    alloc = Allocator(CLASSES)
    answer = alloc.allocate([claim("c", alternatives)], Inventory(gpus(3)), Usage())
    assert isinstance(answer, Allocation)
    assert [p.request for p in answer.picks] == ["gpu/small", "gpu/small"]
    answer = alloc.allocate([claim("c", alternatives)], Inventory(gpus(4)), Usage())
    assert len(allocated(answer)) == 4


def test_missing_device_class_and_bad_selector() -> None:
    """request_test.go / DeviceClass not found; CEL expression failed to compile."""
    alloc = Allocator(CLASSES)
    answer = alloc.allocate([claim("c", req(cls="nope"))], Inventory(gpus(1)), Usage())
    assert answer == "claim default/c request gpu: DeviceClass 'nope' not found"
    broken = req(selectors=("device.driver ==",))
    answer = alloc.allocate([claim("c", broken)], Inventory(gpus(1)), Usage())
    assert isinstance(answer, str) and "failed to compile" in answer


def test_claim_allocated_once_across_pods() -> None:
    """allocationtracker.go: a claim two pods share is allocated once on the node."""
    alloc = Allocator(CLASSES)
    usage = Usage()
    shared = claim("shared", req(count=2))
    first = alloc.allocate([shared], Inventory(gpus(2)), usage)
    assert isinstance(first, Allocation)
    usage.commit(first)
    assert alloc.allocate([shared], Inventory(gpus(2)), usage) == Allocation()
