"""The simulator's view of a pod: parsed once from the API object, then read many times.

:meth:`Pod.from_dict` turns a pod as the Kubernetes API returns it (a dict, camelCase
keys) into plain, hashable, pre-computed fields: canonical resource requests, the
node-selector and node-affinity terms as :class:`Requirements`, tolerations, spread
constraints, pod (anti-)affinity terms and host ports. Nothing downstream looks at the
dict again ("parse once at the edge").
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any, Final, TypeVar, cast

from karpy.apis.pods import (
    controller_reference,
    is_owned_by_daemonset,
    is_terminal,
    is_terminating,
)
from karpy.scheduling import resources as res
from karpy.scheduling.devices import DeviceClaim
from karpy.scheduling.requirements import Requirements
from karpy.scheduling.selectors import LabelMatcher, SelectorTerm
from karpy.scheduling.taints import Toleration

__all__ = [
    "AffinityTerm",
    "HostPort",
    "Pod",
    "SpreadConstraint",
    "pod_limits",
    "pod_requests",
    "pod_resources",
]

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
HONOR: Final = "Honor"
IGNORE: Final = "Ignore"

_EMPTY_LABELS: Mapping[str, str] = MappingProxyType({})
# A pod without a nodeSelector selects any node; one shared (immutable) value for all.
_ANY = Requirements()
_NO_TOLERATIONS: frozenset[Toleration] = frozenset()
_NO_LIMITS: Mapping[str, int] = MappingProxyType({})
_NO_VOLUMES: Mapping[str, frozenset[str]] = MappingProxyType({})

# Pods of one workload are alike: equal labels, requests and signatures are stored once
# and shared (they are immutable). Fewer objects make parsing and the garbage
# collector's passes cheaper, and equal signatures compare by identity first. The table
# is bounded: when full it starts again, which only costs sharing.
_SHARED: dict[Hashable, Any] = {}
_SHARED_LIMIT: Final = 1 << 16
_T = TypeVar("_T")


def _same(value: _T) -> _T:
    return value


def _shared(key: Hashable, make: Callable[[], _T]) -> _T:
    found = _SHARED.get(key)
    if found is None:
        if len(_SHARED) >= _SHARED_LIMIT:
            _SHARED.clear()
        found = _SHARED[key] = make()
    return cast(_T, found)


@dataclass(frozen=True, slots=True)
class HostPort:
    """A host port a container binds: unique per node per (ip, port, protocol), where
    the unspecified address ``0.0.0.0`` clashes with every address."""

    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"

    def conflicts(self, other: HostPort) -> bool:
        """Whether the two cannot be bound on the same node."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        unspecified = ("0.0.0.0", "::")
        return self.ip == other.ip or self.ip in unspecified or other.ip in unspecified

    def __str__(self) -> str:
        return f"{self.ip}:{self.port}/{self.protocol}"


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topology spread constraint, with ``matchLabelKeys`` already folded into the
    selector (as the API server does)."""

    topology_key: str
    max_skew: int
    selector: LabelMatcher
    when_unsatisfiable: str = DO_NOT_SCHEDULE
    min_domains: int | None = None
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE
    default: bool = False
    """A default constraint of the pod's scheduler (SCHEDULER_CONFIG), not its own."""

    @property
    def required(self) -> bool:
        """DoNotSchedule (a rule) rather than ScheduleAnyway (a preference)."""
        return self.when_unsatisfiable != SCHEDULE_ANYWAY

    def __str__(self) -> str:
        origin = ", a default constraint of SCHEDULER_CONFIG" if self.default else ""
        return (
            f"topology spread on {self.topology_key} (maxSkew={self.max_skew}, "
            f"{self.when_unsatisfiable}, selector {self.selector}{origin})"
        )


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A pod (anti-)affinity term. ``namespaces`` is the explicit list plus, when no
    list and no selector is given, the pod's own namespace; a ``namespace_selector`` is
    resolved against the cluster's namespaces by the simulator."""

    topology_key: str
    selector: LabelMatcher
    namespaces: frozenset[str]
    namespace_selector: LabelMatcher | None = None
    weight: int = 0

    def __str__(self) -> str:
        return f"{self.selector} on {self.topology_key}"


def _terms_from_keys(
    keys: Iterable[str] | None, labels: Mapping[str, str], operator: str
) -> list[SelectorTerm]:
    return [
        SelectorTerm(key, operator, frozenset((labels[key],)))
        for key in keys or ()
        if key in labels
    ]


def _affinity_term(
    term: Mapping[str, Any], namespace: str, labels: Mapping[str, str], weight: int = 0
) -> AffinityTerm:
    selector = LabelMatcher.from_dict(term.get("labelSelector"))
    extra = _terms_from_keys(term.get("matchLabelKeys"), labels, "In")
    extra += _terms_from_keys(term.get("mismatchLabelKeys"), labels, "NotIn")
    if extra:
        selector = selector.with_terms(extra)
    namespaces = frozenset(term.get("namespaces") or ())
    raw_ns_selector = term.get("namespaceSelector")
    ns_selector = None if raw_ns_selector is None else LabelMatcher.from_dict(raw_ns_selector)
    if not namespaces and ns_selector is None:
        namespaces = frozenset((namespace,))
    parsed = AffinityTerm(
        topology_key=term.get("topologyKey") or "",
        selector=selector,
        namespaces=namespaces,
        namespace_selector=ns_selector,
        weight=weight,
    )
    return _shared(("term", parsed), partial(_same, parsed))


def _container_amounts(container: Mapping[str, Any]) -> tuple[res.ResourceList, res.ResourceList]:
    """A container's requests and limits, each parsed once."""
    resources = container.get("resources") or {}
    limits = res.parse_resource_list(resources.get("limits"))
    requests = res.parse_resource_list(resources.get("requests"))
    # The API server defaults a missing request to the limit; do the same for pods
    # built by hand so the simulator sees what the kubelet will reserve.
    for name, amount in limits.items():
        requests.setdefault(name, amount)
    return requests, limits


def _combine(
    regular: Iterable[res.ResourceList], init: Iterable[tuple[res.ResourceList, bool]]
) -> res.ResourceList:
    """Per-container amounts combined as kube-scheduler combines them (KEP-753).

    Sidecars (init containers with ``restartPolicy: Always``, flagged True in ``init``)
    run beside the regular containers and add to their sum; each ordinary init
    container needs its own amount plus the sidecars started before it. The pod needs
    the larger of the two.
    """
    total: res.ResourceList = {}
    for own in regular:
        for name, amount in own.items():
            total[name] = total.get(name, 0) + amount
    sidecars: res.ResourceList = {}
    init_peak: res.ResourceList = {}
    for own, sidecar in init:
        if sidecar:
            for name, amount in own.items():
                total[name] = total.get(name, 0) + amount
                sidecars[name] = sidecars.get(name, 0) + amount
            need = dict(sidecars)
        else:
            need = res.add(own, sidecars)
        for name, amount in need.items():
            if amount > init_peak.get(name, 0):
                init_peak[name] = amount
    for name, amount in init_peak.items():
        if amount > total.get(name, 0):
            total[name] = amount
    return total


def _resize_infeasible(status: Mapping[str, Any]) -> bool:
    """The kubelet declared the pod's resize infeasible (its ``PodResizePending``
    condition, the first of that type, says ``Infeasible``)."""
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodResizePending":
            return bool(cond.get("reason") == "Infeasible")
    return False


def _effective(
    amounts: tuple[res.ResourceList, res.ResourceList],
    container_status: Mapping[str, Any] | None,
    infeasible: bool,
) -> tuple[res.ResourceList, res.ResourceList]:
    """A container's requests and limits as kube-scheduler counts them with in-place
    resize (component-helpers' determineEffectiveRequests/-Limits): while a resize is
    under way the larger of what the spec asks, what runs (``status.resources``) and
    what the kubelet allocated; once the resize is infeasible, only what runs and what
    is allocated. The spec alone when the status reports no resources."""
    running = (container_status or {}).get("resources")
    if running is None:
        return amounts
    actuated = res.parse_resource_list(running.get("requests"))
    allocated = res.parse_resource_list((container_status or {}).get("allocatedResources"))
    actuated_limits = res.parse_resource_list(running.get("limits"))
    if infeasible:
        return res.maximum(actuated, allocated), actuated_limits
    return res.maximum(amounts[0], actuated, allocated), res.maximum(amounts[1], actuated_limits)


def pod_resources(
    spec: Mapping[str, Any], status: Mapping[str, Any] | None = None
) -> tuple[res.ResourceList, res.ResourceList]:
    """:func:`pod_requests` and :func:`pod_limits` of one pod, its containers parsed once.

    With ``status`` (a bound pod's), a container that reports its resources counts as
    kube-scheduler counts it under in-place pod resize (InPlacePodVerticalScaling, on by
    default since Kubernetes 1.33): see :func:`_effective`. Karpenter counts the spec
    only, so a node whose pods are shrinking looks emptier to it than to the scheduler.
    Pod-level resources are counted from the spec (their in-place resize is alpha)."""
    statuses: dict[str, Mapping[str, Any]] = {}
    infeasible = False
    if status:
        for cs in (*(status.get("containerStatuses") or ()),
                   *(status.get("initContainerStatuses") or ())):
            if cs.get("resources") is not None:
                statuses[str(cs.get("name"))] = cs
        infeasible = bool(statuses) and _resize_infeasible(status)
    regular = [
        _effective(_container_amounts(c), statuses.get(c.get("name")), infeasible)
        if statuses else _container_amounts(c)
        for c in spec.get("containers") or ()
    ]
    init = []
    for c in spec.get("initContainers") or ():
        sidecar = c.get("restartPolicy") == "Always"
        amounts = _container_amounts(c)
        if sidecar and statuses:  # only a sidecar's running resources count
            amounts = _effective(amounts, statuses.get(c.get("name")), infeasible)
        init.append((amounts, sidecar))
    requests = _combine((r for r, _ in regular), ((a[0], s) for a, s in init))
    limits = _combine((lim for _, lim in regular), ((a[1], s) for a, s in init))
    pod_level = spec.get("resources") or {}
    overhead = res.parse_resource_list(spec.get("overhead"))
    if pod_level.get("requests"):
        requests.update(res.parse_resource_list(pod_level["requests"]))
    if pod_level.get("limits"):
        limits.update(res.parse_resource_list(pod_level["limits"]))
    for name, amount in overhead.items():
        requests[name] = requests.get(name, 0) + amount
        if name in limits:  # an unlimited resource stays unlimited
            limits[name] += amount
    requests[res.PODS] = requests.get(res.PODS, 0) + 1
    return ({n: a for n, a in requests.items() if a}, {n: a for n, a in limits.items() if a})


def resize_view(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What an in-place resize of ``pod`` changes, for comparison: its containers'
    resources in the spec and the status (running and allocated), and the resize's
    pending reason. Equal views count the same requests (:func:`pod_resources`)."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    return (
        tuple(c.get("resources") for c in spec.get("containers") or ()),
        tuple(c.get("resources") for c in spec.get("initContainers") or ()),
        tuple((cs.get("name"), cs.get("resources"), cs.get("allocatedResources"))
              for cs in (*(status.get("containerStatuses") or ()),
                         *(status.get("initContainerStatuses") or ()))),
        _resize_infeasible(status),
    )


def pod_requests(spec: Mapping[str, Any]) -> res.ResourceList:
    """What a pod reserves on a node, as kube-scheduler counts it (KEP-753).

    The containers' requests combined (sidecars add, init containers peak), plus
    ``spec.overhead``, plus one ``pods``. Pod-level ``spec.resources.requests`` replace
    the container sums for the resources they name.
    """
    return pod_resources(spec)[0]


def pod_limits(spec: Mapping[str, Any]) -> res.ResourceList:
    """A pod's limits as Kubernetes sums them (the resource helper's PodLimits, which
    Karpenter's karpenter_nodes_total_pod_limits adds up): the containers' limits
    combined like requests, pod-level ``spec.resources.limits`` replacing the resources
    they name, and ``spec.overhead`` added only to resources that have a limit (an
    unlimited resource stays unlimited). No ``pods`` entry.
    """
    return pod_resources(spec)[1]


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    ports: list[HostPort] = []
    containers: Iterable[Mapping[str, Any]] = spec.get("containers") or ()
    init = spec.get("initContainers")
    if init:
        containers = [
            *containers, *(c for c in init if c.get("restartPolicy") == "Always")
        ]
    for container in containers:
        for port in container.get("ports") or ():
            host_port = port.get("hostPort") or 0
            if host_port:
                ports.append(
                    HostPort(
                        port=int(host_port),
                        protocol=port.get("protocol") or "TCP",
                        ip=port.get("hostIP") or "0.0.0.0",
                    )
                )
    return tuple(ports)


def _required_terms(
    block: Mapping[str, Any] | None, namespace: str, labels: Mapping[str, str]
) -> tuple[AffinityTerm, ...]:
    terms = block.get("requiredDuringSchedulingIgnoredDuringExecution") if block else None
    if not terms:
        return ()
    return tuple(_affinity_term(t, namespace, labels) for t in terms)


def _preferred_terms(
    block: Mapping[str, Any] | None, namespace: str, labels: Mapping[str, str]
) -> tuple[AffinityTerm, ...]:
    terms = block.get("preferredDuringSchedulingIgnoredDuringExecution") if block else None
    if not terms:
        return ()
    return tuple(
        _affinity_term(t.get("podAffinityTerm") or {}, namespace, labels, weight)
        for weight, t in _weighted(terms)
    )


def _weighted(terms: Iterable[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    weighted = [(int(t.get("weight") or 0), t) for t in terms]
    # Heaviest first, stable: the order in which preferences are tried and relaxed.
    weighted.sort(key=lambda item: -item[0])
    return weighted


# The controllers kube-scheduler's helper.DefaultSelector reads a selector from.
_SELECTOR_OWNERS = frozenset({
    ("v1", "ReplicationController"), ("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet"),
})


def _controller(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    ref = controller_reference(pod)
    if ref is None or (ref.get("apiVersion"), ref.get("kind")) not in _SELECTOR_OWNERS:
        return None
    return str(ref["kind"]), str(ref.get("name") or "")


@dataclass(frozen=True, slots=True, eq=False)
class Pod:
    """A pod as the simulator needs it. Build with :meth:`from_dict`.

    ``volume_requirements`` are alternatives (any one will do) for where the pod's
    volumes can be mounted: a bound PersistentVolume's node affinity or a StorageClass's
    ``allowedTopologies``, resolved by the caller (see :mod:`karpy.scheduling.volumes`).

    A bound pod that is ``terminal`` (Succeeded or Failed) holds nothing on its node; one
    that is ``terminating`` (has a deletionTimestamp) still holds its requests and its
    required anti-affinity still repels until it is gone, but it no longer counts in
    topology spread domains — as Karpenter's cluster state and IgnoredForTopology.
    """

    name: str
    namespace: str = "default"
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    requests: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({res.PODS: 1}))
    limits: Mapping[str, int] = field(default_factory=lambda: _NO_LIMITS)
    node_selector: Requirements = field(default_factory=Requirements)
    required_node_terms: tuple[Requirements, ...] = ()
    preferred_node_terms: tuple[tuple[int, Requirements], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    pod_affinity: tuple[AffinityTerm, ...] = ()
    preferred_pod_affinity: tuple[AffinityTerm, ...] = ()
    pod_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_pod_anti_affinity: tuple[AffinityTerm, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    volume_requirements: tuple[Requirements, ...] = ()
    node_name: str = ""
    is_daemon: bool = False
    terminal: bool = False
    terminating: bool = False
    device_claims: tuple[DeviceClaim, ...] = ()
    """The ResourceClaims the pod names, resolved (Dynamic Resource Allocation); set
    by the caller that holds the claims (:func:`dataclasses.replace`)."""
    volumes: Mapping[str, frozenset[str]] = field(default_factory=lambda: _NO_VOLUMES)
    """The persistent volumes the pod attaches, per CSI driver (``namespace/claim``
    IDs), for volume attachment limits; set by the caller that resolves the claims
    (:func:`dataclasses.replace`), empty for a pod without any."""
    scheduler_name: str = ""
    """``spec.schedulerName`` ("" for the default scheduler): whose default spread
    constraints apply to it (:mod:`karpy.scheduling.defaultspread`)."""
    controller: tuple[str, str] | None = None
    """(kind, name) of its controlling ReplicationController, ReplicaSet or StatefulSet,
    the owners whose selector kube-scheduler folds into a default spread selector;
    None for any other pod."""
    raw: Mapping[str, Any] | None = field(default=None, repr=False)
    key: str = field(init=False, repr=False)
    signature: tuple[Any, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")
        label_items = frozenset(self.labels.items())
        labels, label_items = _shared(("labels", label_items), lambda: (
            MappingProxyType(dict(self.labels)), label_items))
        object.__setattr__(self, "labels", labels)
        request_items = frozenset(self.requests.items())
        object.__setattr__(self, "requests", _shared(
            ("requests", request_items), lambda: MappingProxyType(dict(self.requests))))
        if self.volumes:
            object.__setattr__(self, "volumes", MappingProxyType(dict(self.volumes)))
        if self.limits:
            limit_items = frozenset(self.limits.items())
            object.__setattr__(self, "limits", _shared(
                ("limits", limit_items), lambda: MappingProxyType(dict(self.limits))))
        # Everything that decides where the pod may go, except its requests: pods with
        # equal signatures are interchangeable for the simulator, which schedules them
        # as one group. Labels and namespace count because other pods select on them.
        signature = (
            self.namespace,
            label_items,
            self.node_selector,
            self.required_node_terms,
            self.preferred_node_terms,
            frozenset(self.tolerations) if self.tolerations else _NO_TOLERATIONS,
            self.spread_constraints,
            self.pod_affinity,
            self.preferred_pod_affinity,
            self.pod_anti_affinity,
            self.preferred_pod_anti_affinity,
            self.host_ports,
            self.volume_requirements,
            # DRA pods are placed one by one with their devices: never in one run with
            # claim-less pods (their claims themselves are checked per pod).
            bool(self.device_claims),
            # Likewise pods with attachable volumes, counted per pod and node.
            bool(self.volumes),
        )
        object.__setattr__(self, "signature", _shared(("signature", signature),
                                                      partial(_same, signature)))

    @classmethod
    def from_dict(
        cls,
        pod: Mapping[str, Any],
        *,
        volume_requirements: Sequence[Requirements] = (),
        keep_raw: bool = True,
    ) -> Pod:
        """Parse a Kubernetes pod (as a dict with the API's camelCase keys)."""
        metadata = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        namespace = metadata.get("namespace") or "default"
        labels: Mapping[str, str] = metadata.get("labels") or {}
        # Most pods have few of the optional fields: each block is skipped when absent
        # (parsing is paid per pod as it arrives, so the common case is kept short).
        affinity = spec.get("affinity")
        required: Iterable[Mapping[str, Any]] = ()
        preferred: Iterable[Mapping[str, Any]] = ()
        pod_affinity: Mapping[str, Any] | None = None
        pod_anti: Mapping[str, Any] | None = None
        if affinity:
            node_affinity = affinity.get("nodeAffinity") or {}
            required = (
                node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
            ).get("nodeSelectorTerms") or ()
            preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
            pod_affinity = affinity.get("podAffinity")
            pod_anti = affinity.get("podAntiAffinity")

        spreads = []
        for tsc in spec.get("topologySpreadConstraints") or ():
            selector = LabelMatcher.from_dict(tsc.get("labelSelector"))
            extra = _terms_from_keys(tsc.get("matchLabelKeys"), labels, "In")
            if extra:
                selector = selector.with_terms(extra)
            constraint = SpreadConstraint(
                topology_key=tsc["topologyKey"],
                max_skew=int(tsc.get("maxSkew") or 1),
                selector=selector,
                when_unsatisfiable=tsc.get("whenUnsatisfiable") or DO_NOT_SCHEDULE,
                min_domains=tsc.get("minDomains"),
                node_affinity_policy=tsc.get("nodeAffinityPolicy") or HONOR,
                node_taints_policy=tsc.get("nodeTaintsPolicy") or IGNORE,
            )
            spreads.append(_shared(("spread", constraint), partial(_same, constraint)))
        node_selector = spec.get("nodeSelector")
        tolerations = spec.get("tolerations")
        requests, limits = pod_resources(spec, pod.get("status"))
        return cls(
            name=metadata.get("name") or "",
            namespace=namespace,
            uid=metadata.get("uid") or "",
            labels=labels,
            requests=requests,
            limits=limits,
            node_selector=Requirements.from_labels(node_selector) if node_selector else _ANY,
            required_node_terms=tuple(
                Requirements.from_node_selector(t.get("matchExpressions")) for t in required
            )
            if required
            else (),
            preferred_node_terms=tuple(
                (
                    weight,
                    Requirements.from_node_selector(
                        (t.get("preference") or {}).get("matchExpressions")
                    ),
                )
                for weight, t in _weighted(preferred)
            )
            if preferred
            else (),
            tolerations=tuple(Toleration.from_dict(t) for t in tolerations) if tolerations else (),
            spread_constraints=tuple(spreads),
            pod_affinity=_required_terms(pod_affinity, namespace, labels),
            preferred_pod_affinity=_preferred_terms(pod_affinity, namespace, labels),
            pod_anti_affinity=_required_terms(pod_anti, namespace, labels),
            preferred_pod_anti_affinity=_preferred_terms(pod_anti, namespace, labels),
            host_ports=_host_ports(spec),
            volume_requirements=tuple(volume_requirements),
            node_name=spec.get("nodeName") or "",
            is_daemon=is_owned_by_daemonset(pod),
            terminal=is_terminal(pod),
            terminating=is_terminating(pod),
            scheduler_name=str(spec.get("schedulerName") or ""),
            controller=_controller(pod),
            raw=pod if keep_raw else None,
        )

    @classmethod
    def from_daemonset_dict(cls, daemonset: Mapping[str, Any]) -> Pod:
        """The pod a DaemonSet would run on every node it selects (its template)."""
        metadata = daemonset.get("metadata") or {}
        template = (daemonset.get("spec") or {}).get("template") or {}
        template_meta = dict(template.get("metadata") or {})
        template_meta.setdefault("name", metadata.get("name") or "")
        template_meta.setdefault("namespace", metadata.get("namespace") or "default")
        template_meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": metadata.get("name")}
        ]
        return cls.from_dict({"metadata": template_meta, "spec": template.get("spec") or {}})

    @property
    def strict_requirements(self) -> Requirements:
        """nodeSelector plus the first required node-affinity term (no preferences)."""
        if self.required_node_terms:
            return self.node_selector.intersect(self.required_node_terms[0])
        return self.node_selector

    def __repr__(self) -> str:
        return f"Pod({self.key})"
