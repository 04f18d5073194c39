"""The device allocator: can these ResourceClaims be given devices on this node, and
which? Plus the usage that keeps a device handed to one pod from going to another.

:class:`Allocator` answers for one node's :class:`Inventory` (the devices of its
ResourceSlices, or of the instance type's slice templates for a node not yet made) and
its :class:`Usage` (devices, capacity and shared counters already taken: by claims'
status and by what this solve placed there). It searches depth first with
backtracking, as Karpenter's allocator and the kube-scheduler's structured allocator
do, so constraints that only some choices of devices satisfy are found:

* ``exactly`` requests with ``count`` or ``allocationMode: All``;
* ``firstAvailable``: the first alternative that can be allocated wins;
* ``matchAttribute`` / ``distinctAttribute`` constraints over a claim's requests;
* consumable capacity: a device with ``allowMultipleAllocations`` may go to several
  requests while its capacities last; each takes what it requests of a capacity, and
  the whole of a capacity it does not name (no requestPolicy defaults are modelled);
* partitionable devices: a device consumes counters of its pool's shared counter sets
  and is allocatable only while the budget lasts.

Devices are tried in inventory order (in-cluster slices before templates, as
Karpenter prefers), and the answer of each (request, device) selector check is cached
on the allocator for the solve. Checked against kubernetes-sigs/karpenter v1.14.1
pkg/scheduling/dynamicresources (allocator.go, allocationtracker.go, constraint.go,
consumable_capacity.go, partitionable_devices.go); Karpenter v1.14.1 refuses
``firstAvailable`` and ``distinctAttribute``, which karpy allocates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from karpy.apis.cel import CelError
from karpy.scheduling.devicecel import DeviceSelector
from karpy.scheduling.devices import (
    ALLOCATION_RESULTS_MAX_SIZE,
    Device,
    DeviceClaim,
    DeviceClass,
    DeviceConstraint,
    DeviceID,
    DeviceRequest,
    ResourceSliceTemplate,
)

__all__ = ["Allocation", "Allocator", "Inventory", "Usage"]

CounterKey = tuple[str, str, str, str]
"""(driver, pool, counter set, counter)."""


@dataclass(frozen=True)
class Inventory:
    """The devices one node has (or will have) and its pools' shared counter budgets."""

    devices: tuple[Device, ...] = ()
    counters: Mapping[CounterKey, Fraction] = field(default_factory=dict)

    @classmethod
    def of(cls, slices: Iterable[ResourceSliceTemplate]) -> Inventory:
        """The inventory of ``slices`` (in order: put in-cluster slices first)."""
        devices: list[Device] = []
        counters: dict[CounterKey, Fraction] = {}
        for s in slices:
            devices.extend(s.devices)
            for set_name, values in s.shared_counters.items():
                for counter, amount in values.items():
                    counters[(s.driver, s.pool, set_name, counter)] = amount
        return cls(tuple(devices), counters)


@dataclass
class Usage:
    """What is taken on one node: devices held whole, capacity consumed of shareable
    devices, shared counters drawn; and which claims are allocated there."""

    exclusive: set[DeviceID] = field(default_factory=set)
    consumed: dict[DeviceID, dict[str, Fraction]] = field(default_factory=dict)
    counters: dict[CounterKey, Fraction] = field(default_factory=dict)
    claims: set[str] = field(default_factory=set)

    def copy(self) -> Usage:
        return Usage(set(self.exclusive), {k: dict(v) for k, v in self.consumed.items()},
                     dict(self.counters), set(self.claims))

    def take(self, device: Device, amounts: Mapping[str, Fraction]) -> None:
        """Mark ``device`` (with ``amounts`` of its capacity, if shareable) as taken."""
        if device.allow_multiple_allocations:
            used = self.consumed.setdefault(device.id, {})
            for name, amount in amounts.items():
                used[name] = used.get(name, Fraction(0)) + amount
        else:
            self.exclusive.add(device.id)
        for set_name, values in device.consumes_counters.items():
            for counter, amount in values.items():
                key = (device.id.driver, device.id.pool, set_name, counter)
                self.counters[key] = self.counters.get(key, Fraction(0)) + amount

    def release(self, device: Device, amounts: Mapping[str, Fraction]) -> None:
        """Undo :meth:`take` (the search backtracks this way instead of copying)."""
        if device.allow_multiple_allocations:
            used = self.consumed[device.id]
            for name, amount in amounts.items():
                used[name] -= amount
            if not any(used.values()):
                del self.consumed[device.id]
        else:
            self.exclusive.discard(device.id)
        for set_name, values in device.consumes_counters.items():
            for counter, amount in values.items():
                key = (device.id.driver, device.id.pool, set_name, counter)
                self.counters[key] -= amount

    def commit(self, allocation: Allocation) -> None:
        """Record ``allocation``: its devices are no longer free."""
        for pick in allocation.picks:
            self.take(pick.device, pick.consumed)
        self.claims.update(allocation.claims)

    def holding(self, claims: Iterable[DeviceClaim], inventory: Inventory) -> None:
        """Record what ``claims`` already hold (their status) of ``inventory``'s devices."""
        by_id = {d.id: d for d in inventory.devices}
        for claim in claims:
            for device_id, amounts in claim.allocated:
                device = by_id.get(device_id)
                if device is not None:
                    self.take(device, amounts or device.capacity)


@dataclass(frozen=True)
class Pick:
    """One device given to one request of one claim."""

    claim: str
    request: str
    device: Device
    consumed: Mapping[str, Fraction]


@dataclass(frozen=True)
class Allocation:
    """The devices chosen for a set of claims on one node."""

    picks: tuple[Pick, ...] = ()
    claims: frozenset[str] = frozenset()


class Allocator:
    """Allocates claims on one node at a time (see the module docstring)."""

    def __init__(self, classes: Mapping[str, DeviceClass]) -> None:
        self.classes = classes
        self._selectors: dict[str, DeviceSelector] = {}
        # Keyed by the request's class and selectors (values) and the device itself
        # (hashed by identity, held by the key so its id cannot be reused).
        self._matches: dict[tuple[str, tuple[str, ...], Device], bool] = {}

    def check(self, claims: Sequence[DeviceClaim]) -> str | None:
        """Why ``claims`` can never be allocated anywhere (a missing DeviceClass, a
        selector that does not compile), or None."""
        for claim in claims:
            for request in claim.requests:
                for r in request.first_available or (request,):
                    reason = self._request_reason(claim, r)
                    if reason is not None:
                        return reason
        return None

    def _request_reason(self, claim: DeviceClaim, r: DeviceRequest) -> str | None:
        if r.device_class not in self.classes:
            return (f"claim {claim.key} request {r.name}: DeviceClass "
                    f"{r.device_class!r} not found")
        for expression in (*self.classes[r.device_class].selectors, *r.selectors):
            try:
                self._selector(expression)
            except CelError as exc:
                return f"claim {claim.key} request {r.name}: {exc}"
        return None

    def _selector(self, expression: str) -> DeviceSelector:
        selector = self._selectors.get(expression)
        if selector is None:
            selector = self._selectors[expression] = DeviceSelector(expression)
        return selector

    def _matches_request(self, r: DeviceRequest, device: Device) -> bool:
        key = (r.device_class, r.selectors, device)
        hit = self._matches.get(key)
        if hit is None:
            variable = device.variable()
            hit = all(self._selector(e).matches(variable)
                      for e in (*self.classes[r.device_class].selectors, *r.selectors))
            self._matches[key] = hit
        return hit

    def allocate(
        self, claims: Sequence[DeviceClaim], inventory: Inventory, usage: Usage,
        *, explain: bool = True,
    ) -> Allocation | str:
        """Devices for every claim not yet allocated in ``claims`` from ``inventory``
        given ``usage``, or the reason there are none (a short one unless
        ``explain``). ``usage`` is left as it was: :meth:`Usage.commit` the answer when
        the pod is placed."""
        todo = [c for c in claims if not c.allocated and c.key not in usage.claims]
        reason = self.check(todo)
        if reason is not None:
            return reason
        search = _Search(self, inventory, usage)
        picks: list[Pick] = []
        failed: DeviceClaim | None = None
        for claim in todo:
            if not search.claim(claim, picks):
                failed = claim
                break
        chosen = tuple(picks)
        search.undo(picks, 0)  # leave ``usage`` as it came
        if failed is not None:
            return search.shortfall(failed) if explain else "cannot allocate all claims"
        return Allocation(chosen, frozenset(c.key for c in todo))


class _Search:
    """One depth-first search on ``usage``: it takes and gives back as it goes."""

    def __init__(self, allocator: Allocator, inventory: Inventory, usage: Usage) -> None:
        self.allocator = allocator
        self.inventory = inventory
        self.usage = usage

    def shortfall(self, claim: DeviceClaim) -> str:
        parts = []
        for request in claim.requests:
            for r in request.first_available or (request,):
                matching = sum(1 for d in self.inventory.devices
                               if self.allocator._matches_request(r, d))
                want = "all" if r.all else str(r.count)
                parts.append(f"request {r.name} wants {want} of DeviceClass "
                             f"{r.device_class}, {matching} match")
        return (f"cannot allocate all claims: claim {claim.key}: "
                + "; ".join(parts or ["no requests"]))

    def undo(self, picks: list[Pick], mark: int) -> None:
        """Give back the picks after ``mark``."""
        for pick in picks[mark:]:
            self.usage.release(pick.device, pick.consumed)
        del picks[mark:]

    def claim(self, claim: DeviceClaim, picks: list[Pick]) -> bool:
        """Append devices for ``claim`` to ``picks`` (taken into ``self.usage``); False
        with nothing taken when there are none."""
        mark = len(picks)
        if self._requests(claim, 0, picks) and len(picks) - mark <= ALLOCATION_RESULTS_MAX_SIZE:
            return True
        self.undo(picks, mark)
        return False

    def _requests(self, claim: DeviceClaim, index: int, picks: list[Pick]) -> bool:
        if index == len(claim.requests):
            return True
        request = claim.requests[index]
        for r in request.first_available or (request,):
            mark = len(picks)
            candidates = [d for d in self.inventory.devices
                          if self.allocator._matches_request(r, d)]
            if r.all:
                # Taken one by one: each must fit beside the ones before (shared
                # counters), not just on its own.
                ok = bool(candidates)
                for d in candidates:
                    if not (ok := self._fits(d, r)):
                        break
                    picks.append(self._take(claim, r, d))
                ok = ok and self._constraints_hold(claim, picks) and self._requests(
                    claim, index + 1, picks)
                if ok:
                    return True
            elif self._choose(claim, index, r, candidates, 0, r.count, picks):
                return True
            self.undo(picks, mark)
        return False

    def _choose(self, claim: DeviceClaim, index: int, r: DeviceRequest,
                candidates: list[Device], start: int, left: int, picks: list[Pick]) -> bool:
        if left == 0:
            return self._requests(claim, index + 1, picks)
        for i in range(start, len(candidates) - left + 1):
            device = candidates[i]
            if not self._fits(device, r):
                continue
            mark = len(picks)
            picks.append(self._take(claim, r, device))
            if self._constraints_hold(claim, picks) and self._choose(
                    claim, index, r, candidates, i + 1, left - 1, picks):
                return True
            self.undo(picks, mark)
        return False

    def _consumes(self, device: Device, r: DeviceRequest) -> dict[str, Fraction]:
        if not device.allow_multiple_allocations:
            return dict(device.capacity)
        return {name: r.capacity.get(name, total) for name, total in device.capacity.items()}

    def _fits(self, device: Device, r: DeviceRequest) -> bool:
        usage = self.usage
        if device.id in usage.exclusive:
            return False
        for name, amount in r.capacity.items():
            if device.capacity.get(name, Fraction(0)) < amount:
                return False
        if device.allow_multiple_allocations:
            used = usage.consumed.get(device.id, {})
            for name, amount in self._consumes(device, r).items():
                if used.get(name, Fraction(0)) + amount > device.capacity[name]:
                    return False
        elif device.id in usage.consumed:
            return False  # shared by someone already: cannot be held whole
        budget = self.inventory.counters
        for set_name, values in device.consumes_counters.items():
            for counter, amount in values.items():
                key = (device.id.driver, device.id.pool, set_name, counter)
                if key not in budget:
                    return False  # a counter its pool does not declare: unusable
                if usage.counters.get(key, Fraction(0)) + amount > budget[key]:
                    return False
        return True

    def _take(self, claim: DeviceClaim, r: DeviceRequest, device: Device) -> Pick:
        consumed = self._consumes(device, r)
        self.usage.take(device, consumed)
        return Pick(claim.key, r.name, device, consumed)

    def _constraints_hold(self, claim: DeviceClaim, picks: Sequence[Pick]) -> bool:
        return all(_holds(c, claim, picks) for c in claim.constraints)


def _request_of(pick: Pick) -> str:
    # A firstAvailable subrequest "gpu/small" answers for its request "gpu".
    return pick.request.split("/", 1)[0]


def _holds(constraint: DeviceConstraint, claim: DeviceClaim, picks: Sequence[Pick]) -> bool:
    values = []
    for pick in picks:
        if pick.claim != claim.key:
            continue
        if constraint.requests and _request_of(pick) not in constraint.requests \
                and pick.request not in constraint.requests:
            continue
        value = pick.device.attribute(constraint.attribute)
        if value is None:
            return False
        values.append(value)
    if constraint.distinct:
        return len(values) == len(set(values))
    return len(set(values)) <= 1
