"""Dynamic Resource Allocation (resource.k8s.io/v1) as plain values: devices, the
ResourceSlice templates a provider promises per instance type, DeviceClasses and the
ResourceClaims pods name. Parsed once from API objects at the edge (the ``from_dict``
functions); the allocator (:mod:`karpy.scheduling.deviceallocation`) works on these.

Checked against kubernetes-sigs/karpenter v1.14.1 (pkg/cloudprovider/dynamicresources.go,
pkg/scheduling/dynamicresources/types.go) and k8s.io/api/resource/v1 v0.34.

Bad input raises :class:`DeviceError` with one line naming the object and the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from karpy.apis.quantity import parse_quantity
from karpy.scheduling.devicecel import Semver, device_variable

__all__ = [
    "ALLOCATION_RESULTS_MAX_SIZE",
    "Device",
    "DeviceClaim",
    "DeviceClass",
    "DeviceConstraint",
    "DeviceError",
    "DeviceID",
    "DeviceRequest",
    "ResourceSliceTemplate",
    "claim_from_dict",
    "class_from_dict",
    "pod_claim_keys",
    "slice_from_dict",
]

ALLOCATION_RESULTS_MAX_SIZE: Final = 32
"""resourcev1.AllocationResultsMaxSize: devices one claim may be allocated."""


class DeviceError(ValueError):
    """A ResourceSlice, DeviceClass or ResourceClaim karpy cannot use; the message names
    the object and the field."""


@dataclass(frozen=True, slots=True, order=True)
class DeviceID:
    """A device's identity: driver, pool and name (unique within the pool)."""

    driver: str
    pool: str
    name: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.name}"


@dataclass(frozen=True, eq=False)
class Device:
    """One device: attributes (``model``, ``gpu.example.com/index``...), capacities,
    whether several claims may share it (consumable capacity), and the shared counters
    it draws from (partitionable devices)."""

    id: DeviceID
    attributes: Mapping[str, object] = field(default_factory=dict)
    capacity: Mapping[str, Fraction] = field(default_factory=dict)
    allow_multiple_allocations: bool = False
    consumes_counters: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)
    """counterSet name -> counter -> amount this device takes from its pool's budget."""
    node_name: str = ""
    """The node whose slice published it; "" for a template (the node not yet made)."""

    def variable(self) -> Mapping[str, Any]:
        """The CEL ``device`` variable (built once)."""
        cached: Mapping[str, Any] | None = self.__dict__.get("_variable")
        if cached is None:
            cached = device_variable(self.id.driver, self.attributes, self.capacity,
                                     self.allow_multiple_allocations)
            object.__setattr__(self, "_variable", cached)
        return cached

    def attribute(self, qualified: str) -> object | None:
        """The value of attribute ``qualified`` (``domain/id``); an unqualified name in
        the slice belongs to the driver's domain."""
        if qualified in self.attributes:
            return self.attributes[qualified]
        domain, _, ident = qualified.rpartition("/")
        if domain == self.id.driver:
            return self.attributes.get(ident)
        return None


@dataclass(frozen=True)
class ResourceSliceTemplate:
    """The devices a provider promises a new node of an instance type will publish
    (Karpenter's cloudprovider.ResourceSliceTemplate): node-local, one driver and pool.
    A template carries devices or shared counters, not both, as Karpenter's."""

    driver: str
    pool: str
    devices: tuple[Device, ...] = ()
    shared_counters: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)


@dataclass(frozen=True)
class DeviceClass:
    """A DeviceClass: its name and CEL selectors (every one must match)."""

    name: str
    selectors: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceRequest:
    """One request of a claim (``exactly`` or one of ``firstAvailable``'s subrequests)."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    count: int = 1
    all: bool = False
    """allocationMode All: every matching device on the node."""
    capacity: Mapping[str, Fraction] = field(default_factory=dict)
    first_available: tuple[DeviceRequest, ...] = ()
    """Alternatives in order of preference; when set, the fields above are unused."""


@dataclass(frozen=True)
class DeviceConstraint:
    """``matchAttribute`` (every chosen device has the same value) or, with
    ``distinct``, ``distinctAttribute``; over ``requests`` (empty: all of them)."""

    attribute: str
    requests: frozenset[str] = frozenset()
    distinct: bool = False


@dataclass(frozen=True)
class DeviceClaim:
    """A ResourceClaim as the allocator needs it; ``allocated`` lists the devices its
    status already holds and ``node`` the node they are on (then nothing is left to do
    but to run the pod there)."""

    namespace: str
    name: str
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    allocated: tuple[tuple[DeviceID, Mapping[str, Fraction]], ...] = ()
    node: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


# -- parsing -------------------------------------------------------------------------------


def _quantities(obj: Mapping[str, Any] | None, what: str) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, value in (obj or {}).items():
        # A device's capacity is {value: q}; counters are {value: q} too; a request's
        # capacity is the bare quantity.
        raw = value.get("value") if isinstance(value, Mapping) else value
        try:
            out[name] = parse_quantity(raw if raw is not None else "")
        except ValueError as exc:
            raise DeviceError(f"{what}.{name}: {exc}") from exc
    return out


def _attribute(value: Mapping[str, Any], what: str) -> object:
    for kind in ("bool", "int", "string"):
        if kind in value:
            return value[kind]
    if "version" in value:
        return Semver(value["version"])
    raise DeviceError(f"{what}: expected one of bool, int, string, version")


def _device(obj: Mapping[str, Any], driver: str, pool: str, node: str, what: str) -> Device:
    name = obj.get("name")
    if not name:
        raise DeviceError(f"{what}.name: a device needs a name")
    where = f"{what}[{name}]"
    consumes: dict[str, dict[str, Fraction]] = {}
    for use in obj.get("consumesCounters") or []:
        consumes[use.get("counterSet", "")] = _quantities(use.get("counters"),
                                                           f"{where}.consumesCounters")
    return Device(
        id=DeviceID(driver, pool, name),
        attributes={k: _attribute(v, f"{where}.attributes.{k}")
                    for k, v in (obj.get("attributes") or {}).items()},
        capacity=_quantities(obj.get("capacity"), f"{where}.capacity"),
        allow_multiple_allocations=bool(obj.get("allowMultipleAllocations")),
        consumes_counters=consumes,
        node_name=node,
    )


def _counter_sets(items: Iterable[Mapping[str, Any]], what: str) -> dict[str, dict[str, Fraction]]:
    return {c.get("name", ""): _quantities(c.get("counters"), f"{what}[{c.get('name')}]")
            for c in items}


def slice_from_dict(obj: Mapping[str, Any]) -> ResourceSliceTemplate:
    """A ResourceSlice as a template of its node (``spec.nodeName``; "" when it serves
    several nodes, which the allocator does not place on a node it simulates)."""
    spec = obj.get("spec") or {}
    name = (obj.get("metadata") or {}).get("name", "")
    what = f"ResourceSlice {name} spec"
    driver = spec.get("driver") or ""
    pool = (spec.get("pool") or {}).get("name") or ""
    if not driver or not pool:
        raise DeviceError(f"{what}.driver and spec.pool.name: both are required")
    node = spec.get("nodeName") or ""
    return ResourceSliceTemplate(
        driver=driver,
        pool=pool,
        devices=tuple(_device(d, driver, pool, node, f"{what}.devices")
                      for d in spec.get("devices") or []),
        shared_counters=_counter_sets(spec.get("sharedCounters") or [], f"{what}.sharedCounters"),
    )


def _selectors(items: Iterable[Mapping[str, Any]], what: str) -> tuple[str, ...]:
    out = []
    for i, s in enumerate(items):
        expression = (s.get("cel") or {}).get("expression")
        if expression is None:
            raise DeviceError(f"{what}[{i}]: only CEL selectors are supported")
        out.append(expression)
    return tuple(out)


def class_from_dict(obj: Mapping[str, Any]) -> DeviceClass:
    """A DeviceClass from its API object."""
    name = (obj.get("metadata") or {}).get("name", "")
    spec = obj.get("spec") or {}
    return DeviceClass(name, _selectors(spec.get("selectors") or [],
                                        f"DeviceClass {name} spec.selectors"))


def _exact(obj: Mapping[str, Any], name: str, what: str) -> DeviceRequest:
    mode = obj.get("allocationMode") or "ExactCount"
    if mode not in ("ExactCount", "All"):
        raise DeviceError(f"{what}.allocationMode: {mode!r} is neither ExactCount nor All")
    count = int(obj.get("count", 1)) if mode == "ExactCount" else 0
    if mode == "ExactCount" and not 1 <= count <= ALLOCATION_RESULTS_MAX_SIZE:
        raise DeviceError(f"{what}.count: {count} is outside 1..{ALLOCATION_RESULTS_MAX_SIZE}")
    if not obj.get("deviceClassName"):
        raise DeviceError(f"{what}.deviceClassName: required")
    return DeviceRequest(
        name=name,
        device_class=obj["deviceClassName"],
        selectors=_selectors(obj.get("selectors") or [], f"{what}.selectors"),
        count=count,
        all=mode == "All",
        capacity=_quantities((obj.get("capacity") or {}).get("requests"),
                             f"{what}.capacity.requests"),
    )


def claim_spec(spec: Mapping[str, Any], namespace: str, name: str, what: str) -> DeviceClaim:
    """A claim from a ResourceClaim's (or a template's) ``spec``."""
    devices = spec.get("devices") or {}
    requests = []
    for i, r in enumerate(devices.get("requests") or []):
        rname = r.get("name") or str(i)
        where = f"{what}.devices.requests[{rname}]"
        if r.get("exactly") is not None:
            requests.append(_exact(r["exactly"], rname, f"{where}.exactly"))
        elif r.get("firstAvailable"):
            subs = tuple(_exact(s, f"{rname}/{s.get('name')}",
                                f"{where}.firstAvailable[{s.get('name')}]")
                         for s in r["firstAvailable"])
            requests.append(DeviceRequest(name=rname, device_class="", first_available=subs))
        else:
            raise DeviceError(f"{where}: one of exactly or firstAvailable is required")
    constraints = []
    for c in devices.get("constraints") or []:
        reqs = frozenset(c.get("requests") or [])
        if c.get("matchAttribute"):
            constraints.append(DeviceConstraint(c["matchAttribute"], reqs))
        elif c.get("distinctAttribute"):
            constraints.append(DeviceConstraint(c["distinctAttribute"], reqs, distinct=True))
        else:
            raise DeviceError(f"{what}.devices.constraints: matchAttribute or "
                              "distinctAttribute is required")
    # devices.config is opaque driver configuration: it changes nothing about which
    # devices fit, so the allocator has no use for it (as Karpenter's).
    return DeviceClaim(namespace, name, tuple(requests), tuple(constraints))


def claim_from_dict(obj: Mapping[str, Any]) -> DeviceClaim:
    """A ResourceClaim, its status's allocation included."""
    meta = obj.get("metadata") or {}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    what = f"ResourceClaim {namespace}/{name} spec"
    claim = claim_spec(obj.get("spec") or {}, namespace, name, what)
    allocation = (obj.get("status") or {}).get("allocation")
    if not allocation:
        return claim
    allocated = tuple(
        (DeviceID(r.get("driver", ""), r.get("pool", ""), r.get("device", "")),
         _quantities(r.get("consumedCapacity"), f"ResourceClaim {namespace}/{name} status"))
        for r in (allocation.get("devices") or {}).get("results") or []
    )
    return DeviceClaim(namespace, name, claim.requests, claim.constraints, allocated,
                       _selected_node(allocation.get("nodeSelector")))


def _selected_node(selector: Mapping[str, Any] | None) -> str:
    """The node an allocation's nodeSelector names (the form the scheduler writes for
    node-local devices: a metadata.name field selector), "" for any other form."""
    for term in (selector or {}).get("nodeSelectorTerms") or []:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("operator") == "In":
                values = f.get("values") or []
                if len(values) == 1:
                    return str(values[0])
    return ""


def pod_claim_keys(pod: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    """Each claim of ``pod``: (namespace/name, template name or "", whether generated).

    A claim from a template is named in ``status.resourceClaimStatuses`` once the
    resourceclaim controller made it; before that, the template stands for it
    (``generated`` False and the name is the template's)."""
    meta = pod.get("metadata") or {}
    namespace = meta.get("namespace", "")
    statuses = {s.get("name"): s.get("resourceClaimName")
                for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    out = []
    for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
        if ref.get("resourceClaimName"):
            out.append((f"{namespace}/{ref['resourceClaimName']}", "", True))
        elif ref.get("resourceClaimTemplateName"):
            made = statuses.get(ref.get("name"))
            if made:
                out.append((f"{namespace}/{made}", ref["resourceClaimTemplateName"], True))
            else:
                out.append((f"{namespace}/{ref['resourceClaimTemplateName']}",
                            ref["resourceClaimTemplateName"], False))
    return out
