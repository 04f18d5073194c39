"""The scheduling simulator: where pending pods go, and which NodeClaims to create.

:class:`Simulator` holds what changes rarely (NodePools with their instance types,
DaemonSets, options) and keeps the per-instance-type indexes built from them across
calls; :meth:`Simulator.solve` takes the pods to place and the nodes that exist and
returns :class:`~karpy.scheduling.results.Results`. It is pure and deterministic: no
I/O, no clock, no randomness, and the same input gives the same output.

How a solve works (docs/scheduling.md has the long version):

1. Pods are sorted largest first (CPU, then memory, as Karpenter's queue does) and cut
   into *runs* of interchangeable pods: equal :attr:`Pod.signature` and equal requests.
2. Each run is placed a step at a time. A step tries existing nodes first (first fit),
   then the NodeClaims planned so far (round-robin per signature, which keeps their
   sizes even), then a new NodeClaim from the NodePools in weight order -- a new
   NodeClaim takes as many pods of the run as fit at once.
3. A pod that fits nowhere has its preferences relaxed one at a time
   (:mod:`karpy.scheduling.signature`); pods that still fit nowhere are retried after
   the others, as long as that makes progress, and otherwise get a reason.

What keeps the cost per pod flat as the batch grows: constraints are computed once per
signature, instance types are filtered with cached bitmasks, requirement intersections
are cached by value, topology counts are kept per shared group, and a candidate that
rejects a signature for a reason that can only get worse (a taint, a requirement, a
host port, anti-affinity, no room even for the smallest pod) is dropped from that
signature's list for good instead of being re-checked for every pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from types import MappingProxyType
from typing import Any, Final, Literal

from karpy.apis.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INITIALIZED,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_REGISTERED,
    RESTRICTED_LABELS,
    WELL_KNOWN_LABELS,
)
from karpy.scheduling import resources as res
from karpy.scheduling.catalog import Catalog, DaemonGroup, iter_bits
from karpy.scheduling.daemons import daemon_groups, daemon_runs_on
from karpy.scheduling.freeindex import FreeIndex
from karpy.scheduling.instancetype import InstanceType
from karpy.scheduling.node import ExistingNode
from karpy.scheduling.nodepool import NODES, NodePoolTemplate
from karpy.scheduling.pod import AffinityTerm, HostPort, Pod, SpreadConstraint
from karpy.scheduling.requirements import IN, Requirement, Requirements
from karpy.scheduling.results import ExistingNodePlan, NodeClaimPlan, PodError, Results
from karpy.scheduling.selectors import LabelSelector
from karpy.scheduling.signature import Relaxation, Signature
from karpy.scheduling.taints import PREFER_NO_SCHEDULE, Taint, untolerated
from karpy.scheduling.topology import (
    AFFINITY,
    ANTI_AFFINITY,
    SPREAD,
    UNLIMITED,
    GroupSpec,
    NodeFilter,
    TopologyGroup,
)

__all__ = ["SchedulerOptions", "Simulator", "solve"]

MAX_INSTANCE_TYPES: Final = 600
_SIMULATION_ONLY: Final = frozenset({LABEL_REGISTERED, LABEL_INITIALIZED, LABEL_HOSTNAME})


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    """Knobs that match Karpenter's settings.

    ``preference_policy="Ignore"`` drops preferred affinities and ScheduleAnyway spreads
    up front instead of trying them. ``min_values_policy="BestEffort"`` launches even
    when the compatible instance types cannot satisfy a requirement's ``minValues``.
    ``well_known_labels`` are the labels a NodePool need not define for a pod to ask
    for them (instance types define them); providers add their own.
    """

    preference_policy: Literal["Respect", "Ignore"] = "Respect"
    min_values_policy: Literal["Strict", "BestEffort"] = "Strict"
    max_instance_types: int = MAX_INSTANCE_TYPES
    well_known_labels: frozenset[str] = WELL_KNOWN_LABELS


class _Template:
    """A NodePool prepared for one solve."""

    __slots__ = (
        "catalog",
        "claims",
        "groups",
        "index",
        "limited",
        "pool",
        "prefer_taints",
        "requirements",
        "reserved",
        "simple_fit",
        "taints",
    )

    def __init__(
        self, index: int, pool: NodePoolTemplate, catalog: Catalog, groups: list[DaemonGroup]
    ) -> None:
        self.index = index
        self.pool = pool
        self.catalog = catalog
        self.groups = groups
        self.requirements = pool.requirements.without(LABEL_HOSTNAME)
        self.taints = pool.taints
        self.prefer_taints = any(t.effect == PREFER_NO_SCHEDULE for t in pool.taints)
        self.limited = pool.limits is not None
        self.reserved: dict[str, int] = {}
        self.claims = 0
        single = groups[0] if len(groups) == 1 else None
        self.simple_fit = single is not None and not any(single.overhead) and not single.host_ports

    def remaining(self) -> dict[str, int]:
        limits = self.pool.limits or {}
        usage = self.pool.usage
        return {
            name: amount - usage.get(name, 0) - self.reserved.get(name, 0)
            for name, amount in limits.items()
            if name != NODES
        }


class _Claim:
    """A NodeClaim being planned."""

    __slots__ = (
        "hostname",
        "index",
        "mask",
        "pods",
        "ports",
        "req",
        "reserved",
        "sig_counts",
        "template",
        "total",
    )

    def __init__(self, template: _Template, hostname: str, mask: int, size: int) -> None:
        self.template = template
        self.hostname = hostname
        self.req = template.requirements
        self.mask = mask
        self.total = [0] * size
        self.pods: list[Pod] = []
        self.ports: list[Any] = []
        self.sig_counts: dict[Signature, int] = {}
        self.reserved: dict[str, int] = {}
        self.index = -1


class _Node:
    """An existing node prepared for one solve."""

    __slots__ = (
        "available",
        "group",
        "hostname",
        "node",
        "order",
        "placed",
        "ports",
        "req",
        "slot",
        "taints",
    )

    def __init__(
        self, node: ExistingNode, available: list[int], req: Requirements, ports: list[Any]
    ) -> None:
        self.node = node
        self.available = available
        self.req = req
        self.hostname = node.hostname
        self.taints = node.effective_taints()
        self.ports = ports
        self.placed: list[Pod] = []
        self.order = 0
        self.group = 0
        self.slot = 0


class _NodeGroup:
    """Existing nodes that look the same to every pending pod: equal taints and equal
    values for every label key a pending pod selects or spreads on. A signature that
    cannot use one of them (a taint, a requirement) can use none, so it skips the group
    at once; within a group a :class:`FreeIndex` finds the first node with room."""

    __slots__ = ("index", "labels", "members", "req", "taints")

    def __init__(self, members: list[_Node], labels: dict[str, str], size: int) -> None:
        self.members = members
        self.labels = labels
        self.req = Requirements.from_labels(labels)
        self.taints = members[0].taints
        self.index = FreeIndex([n.available for n in members], size)


class Simulator:
    """Plans where pods go. Build once per set of NodePools, call :meth:`solve` often.

    ``nodepools`` carry their instance types; ``daemonsets`` are the pods DaemonSets
    would run (:meth:`Pod.from_daemonset_dict`).
    """

    def __init__(
        self,
        nodepools: Sequence[NodePoolTemplate],
        *,
        daemonsets: Sequence[Pod] = (),
        options: SchedulerOptions | None = None,
    ) -> None:
        self.options = options or SchedulerOptions()
        self.nodepools = sorted(nodepools, key=lambda p: (-p.weight, p.name))
        self.daemonsets = tuple(daemonsets)
        names: set[str] = {res.CPU, res.MEMORY, res.PODS}
        for pool in self.nodepools:
            for it in pool.instance_types:
                names.update(it.allocatable)
        for daemon in self.daemonsets:
            names.update(daemon.requests)
        self._base_resources = names
        self._catalogs: dict[tuple[str, tuple[str, ...]], Catalog] = {}
        self._universe: dict[str, dict[str, list[tuple[Taint, ...]]]] | None = None

    def catalog(self, pool: NodePoolTemplate, resource_names: tuple[str, ...]) -> Catalog:
        """The (cached) mask index of a NodePool's instance types."""
        key = (pool.name, resource_names)
        catalog = self._catalogs.get(key)
        if catalog is None or catalog.types != list(_by_price(pool.instance_types)):
            catalog = Catalog(
                _by_price(pool.instance_types), resource_names, self.options.well_known_labels
            )
            self._catalogs[key] = catalog
        return catalog

    def universe(self) -> dict[str, dict[str, list[tuple[Taint, ...]]]]:
        """Every domain a NodePool could create per label key, with the taints of the
        pools that offer it (Karpenter's topology domain groups)."""
        if self._universe is None:
            universe: dict[str, dict[str, list[tuple[Taint, ...]]]] = {}
            for pool in self.nodepools:
                seen: set[tuple[str, str]] = set()
                for it in pool.instance_types:
                    reqs = pool.requirements.intersect(it.requirements)
                    for key, requirement in reqs.items():
                        if requirement.complement:
                            continue
                        for value in requirement.values:
                            seen.add((key, value))
                for key, requirement in pool.requirements.items():
                    if not requirement.complement:
                        for value in requirement.values:
                            seen.add((key, value))
                for key, value in seen:
                    universe.setdefault(key, {}).setdefault(value, []).append(pool.taints)
            self._universe = universe
        return self._universe

    def solve(
        self,
        pods: Sequence[Pod],
        *,
        nodes: Sequence[ExistingNode] = (),
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Results:
        """Place ``pods`` on ``nodes`` (existing and in-flight capacity) or new
        NodeClaims. ``namespaces`` maps namespace names to their labels, for affinity
        terms with a ``namespaceSelector``."""
        return _Solve(self, pods, nodes, namespaces or {}).run()


def solve(
    pods: Sequence[Pod],
    *,
    nodepools: Sequence[NodePoolTemplate],
    nodes: Sequence[ExistingNode] = (),
    daemonsets: Sequence[Pod] = (),
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    options: SchedulerOptions | None = None,
) -> Results:
    """One-shot :meth:`Simulator.solve` (builds the instance-type indexes each call)."""
    simulator = Simulator(nodepools, daemonsets=daemonsets, options=options)
    return simulator.solve(pods, nodes=nodes, namespaces=namespaces)


def _by_price(instance_types: Iterable[InstanceType]) -> list[InstanceType]:
    def key(it: InstanceType) -> tuple[float, str]:
        price = it.cheapest_price()
        return (float("inf") if price is None else price, it.name)

    return sorted(instance_types, key=key)


def _exists(key: str) -> Requirement:
    return Requirement(key, True, frozenset())


class _Reject:
    """A candidate said no: why, and whether it can never say yes to this signature."""

    __slots__ = ("permanent", "reason")

    def __init__(self, reason: str, permanent: bool) -> None:
        self.reason = reason
        self.permanent = permanent


_TEMP = _Reject("", False)
_PERM = _Reject("", True)


class _Solve:
    """The state of one :meth:`Simulator.solve` call."""

    def __init__(
        self,
        simulator: Simulator,
        pods: Sequence[Pod],
        nodes: Sequence[ExistingNode],
        namespaces: Mapping[str, Mapping[str, str]],
    ) -> None:
        self.sim = simulator
        options = simulator.options
        self.well_known = options.well_known_labels
        self.prefer = options.preference_policy == "Respect"
        self.strict_min_values = options.min_values_policy == "Strict"
        self.pods = list(pods)
        self.namespaces = namespaces
        names = set(simulator._base_resources)
        for pod in self.pods:
            names.update(pod.requests)
        self.names = tuple(sorted(names))
        self.vector = {name: i for i, name in enumerate(self.names)}
        self.size = len(self.names)
        self.pending_keys = {p.key for p in self.pods}
        self.templates = [self._template(i, pool) for i, pool in enumerate(simulator.nodepools)]
        self.prefer_no_schedule = any(t.prefer_taints for t in self.templates) or any(
            t.effect == PREFER_NO_SCHEDULE for n in nodes for t in n.taints
        )
        self.claims: list[_Claim] = []
        self.hostnames = 0
        self._merge_cache: dict[tuple[Requirements, Requirements], Requirements | str] = {}
        self._node_merge_cache: dict[tuple[Requirements, Requirements], Requirements | str] = {}
        self._narrow_cache: dict[tuple[Requirements, str, tuple[str, ...]], Requirements] = {}
        self._intern: dict[Requirements, Requirements] = {}
        self._plan_cache: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._min_values_cache: dict[tuple[int, Requirements, int], str | None] = {}
        self._sigs: dict[tuple[Any, Relaxation], Signature] = {}
        self._min_vec: dict[Signature, list[int]] = {}
        self._base_min: dict[tuple[Any, ...], list[int]] = {}
        self.groups: dict[GroupSpec, TopologyGroup] = {}
        self.inverse: dict[GroupSpec, TopologyGroup] = {}
        self.topology_keys: set[str] = set()
        self._setup_topology(nodes)
        self.nodes = self._setup_nodes(nodes)
        self.node_groups = self._group_nodes(self.nodes)

    # ------------------------------------------------------------------ setup

    def _template(self, index: int, pool: NodePoolTemplate) -> _Template:
        catalog = self.sim.catalog(pool, self.names)
        groups = daemon_groups(pool, catalog, self.sim.daemonsets, self.vector, self.well_known)
        return _Template(index, pool, catalog, groups)

    def _vec(self, resources: Mapping[str, int]) -> list[int]:
        out = [0] * self.size
        vector = self.vector
        for name, amount in resources.items():
            index = vector.get(name)
            if index is not None:
                out[index] = amount
        return out

    def _namespaces_for(self, term: AffinityTerm) -> frozenset[str]:
        if term.namespace_selector is None:
            return term.namespaces
        selected = {
            name
            for name, labels in self.namespaces.items()
            if term.namespace_selector.matches(labels)
        }
        return frozenset(selected) | term.namespaces

    def _spread_spec(self, pod: Pod, spread: SpreadConstraint) -> GroupSpec:
        if pod.required_node_terms:
            terms = tuple(pod.node_selector.intersect(t) for t in pod.required_node_terms)
        elif pod.node_selector:
            terms = (pod.node_selector,)
        else:
            terms = ()
        node_filter = NodeFilter(
            terms=terms,
            tolerations=frozenset(pod.tolerations),
            affinity_honored=spread.node_affinity_policy != "Ignore",
            taints_honored=spread.node_taints_policy == "Honor",
        )
        return GroupSpec(
            kind=SPREAD,
            key=spread.topology_key,
            namespaces=frozenset((pod.namespace,)),
            selector=spread.selector,
            max_skew=spread.max_skew,
            min_domains=spread.min_domains,
            node_filter=node_filter,
        )

    def _term_spec(self, kind: str, term: AffinityTerm, inverse: bool = False) -> GroupSpec:
        return GroupSpec(
            kind=kind,
            key=term.topology_key,
            namespaces=self._namespaces_for(term),
            selector=term.selector,
            inverse=inverse,
        )

    def _group(self, spec: GroupSpec) -> TopologyGroup:
        registry = self.inverse if spec.inverse else self.groups
        group = registry.get(spec)
        if group is None:
            group = TopologyGroup(spec)
            registry[spec] = group
            self.topology_keys.add(spec.key)
            universe = self.sim.universe().get(spec.key, {})
            node_filter = spec.node_filter
            for domain, taint_sets in universe.items():
                if (
                    node_filter is not None
                    and node_filter.taints_honored
                    and not any(node_filter.tolerates(ts) for ts in taint_sets)
                ):
                    continue
                group.register(domain)
            eligible: dict[str, str] = {}
            for node, node_req, node_domain in self._node_domains(spec.key):
                if node_filter is not None and not node_filter.matches(
                    node.effective_taints(), node_req
                ):
                    continue
                group.register(node_domain)
                eligible[node.name] = node_domain
            if not spec.inverse and eligible:
                for namespace, labels, placements in self._existing_by_labels:
                    if not group.selects(namespace, labels):
                        continue
                    for node_name, count in placements:
                        found = eligible.get(node_name)
                        if found is not None:
                            group.record(found, count)
        return group

    def _node_domains(self, key: str) -> list[tuple[ExistingNode, Requirements, str]]:
        """Existing nodes that have a domain for ``key``, with their label requirements."""
        cached = self._domains_by_key.get(key)
        if cached is None:
            cached = []
            for node, node_req in self._existing_for_domains:
                domain = _node_domain(node, key)
                if domain is not None:
                    cached.append((node, node_req, domain))
            self._domains_by_key[key] = cached
        return cached

    def _setup_topology(self, nodes: Sequence[ExistingNode]) -> None:
        self._existing_for_domains = [(n, Requirements.from_labels(n.labels)) for n in nodes]
        self._domains_by_key: dict[str, list[tuple[ExistingNode, Requirements, str]]] = {}
        # Running pods by (namespace, labels): a group matches each label set once.
        by_labels: dict[tuple[str, frozenset[tuple[str, str]]], dict[str, int]] = {}
        for node in nodes:
            for pod in node.pods:
                if pod.terminal or pod.key in self.pending_keys:
                    continue
                label_key = (pod.namespace, frozenset(pod.labels.items()))
                per_node = by_labels.setdefault(label_key, {})
                per_node[node.name] = per_node.get(node.name, 0) + 1
        self._existing_by_labels = [
            (namespace, MappingProxyType(dict(labels)), list(per_node.items()))
            for (namespace, labels), per_node in by_labels.items()
        ]
        # Groups for every rule a pending pod has (preferences included: they stay in
        # place while relaxed, so counts are complete whichever rules end up applying).
        seen: set[tuple[Any, ...]] = set()
        for pod in self.pods:
            if pod.signature in seen:
                continue
            seen.add(pod.signature)
            for spread in pod.spread_constraints:
                if spread.required or self.prefer:
                    self._group(self._spread_spec(pod, spread))
            affinity = pod.pod_affinity + (pod.preferred_pod_affinity if self.prefer else ())
            for term in affinity:
                self._group(self._term_spec(AFFINITY, term))
            anti = pod.pod_anti_affinity + (pod.preferred_pod_anti_affinity if self.prefer else ())
            for term in anti:
                self._group(self._term_spec(ANTI_AFFINITY, term))
            for term in pod.pod_anti_affinity:
                self._group(self._term_spec(ANTI_AFFINITY, term, inverse=True))
        # Existing pods' required anti-affinity keeps new pods out of their domains.
        for node in nodes:
            for pod in node.pods:
                if pod.terminal or pod.key in self.pending_keys or not pod.pod_anti_affinity:
                    continue
                for term in pod.pod_anti_affinity:
                    group = self._group(self._term_spec(ANTI_AFFINITY, term, inverse=True))
                    domain = _node_domain(node, term.topology_key)
                    if domain is not None:
                        group.record(domain)

    def _setup_nodes(self, nodes: Sequence[ExistingNode]) -> list[_Node]:
        ordered = sorted(nodes, key=lambda n: (not n.initialized, n.name))
        out = []
        for node in ordered:
            if not node.schedulable:
                continue
            used = [0] * self.size
            daemon_used = [0] * self.size
            ports: list[Any] = []
            for pod in node.pods:
                if pod.terminal or pod.key in self.pending_keys:
                    continue
                vec = self._vec(pod.requests)
                for i, amount in enumerate(vec):
                    used[i] += amount
                    if pod.is_daemon:
                        daemon_used[i] += amount
                ports.extend(pod.host_ports)
            labels = Requirements.from_labels(node.labels).add(
                Requirement.new(LABEL_HOSTNAME, IN, (node.hostname,))
            )
            taints = node.effective_taints()
            daemon_need = [0] * self.size
            for daemon in self.sim.daemonsets:
                if daemon_runs_on(daemon, taints, labels):
                    for i, amount in enumerate(self._vec(daemon.requests)):
                        daemon_need[i] += amount
            allocatable = self._vec(node.allocatable)
            available = [
                allocatable[i] - used[i] - max(daemon_need[i] - daemon_used[i], 0)
                for i in range(self.size)
            ]
            out.append(_Node(node, available, labels, ports))
        return out

    def _group_nodes(self, nodes: list[_Node]) -> list[_NodeGroup]:
        keys: set[str] = set(self.topology_keys)
        for pod in self.pods:
            keys.update(pod.node_selector)
            for term in pod.required_node_terms:
                keys.update(term)
            for _, preference in pod.preferred_node_terms:
                keys.update(preference)
            for volume in pod.volume_requirements:
                keys.update(volume)
        keys.discard(LABEL_HOSTNAME)
        relevant = sorted(keys)
        grouped: dict[tuple[Any, ...], list[_Node]] = {}
        for order, node in enumerate(nodes):
            node.order = order
            labels = node.node.labels
            key = (tuple((k, labels.get(k)) for k in relevant), node.taints)
            grouped.setdefault(key, []).append(node)
        groups: list[_NodeGroup] = []
        for (pairs, _), members in grouped.items():
            for slot, node in enumerate(members):
                node.group = len(groups)
                node.slot = slot
            labels = {k: v for k, v in pairs if v is not None}
            groups.append(_NodeGroup(members, labels, self.size))
        return groups

    # ------------------------------------------------------------------ signatures

    def _signature(self, pod: Pod, relaxation: Relaxation) -> Signature:
        key = (pod.signature, relaxation)
        sig = self._sigs.get(key)
        if sig is not None:
            return sig
        sig = Signature(pod, relaxation, self.prefer)
        namespace, labels = pod.namespace, pod.labels
        owned: list[tuple[TopologyGroup, bool]] = []
        for term in sig.affinity:
            group = self.groups[self._term_spec(AFFINITY, term)]
            owned.append((group, group.selects(namespace, labels)))
        for term in sig.anti_affinity:
            group = self.groups[self._term_spec(ANTI_AFFINITY, term)]
            owned.append((group, group.selects(namespace, labels)))
        for spread in sig.spreads:
            group = self.groups[self._spread_spec(pod, spread)]
            owned.append((group, group.selects(namespace, labels)))
        sig.owned = owned
        sig.inverse = [g for g in self.inverse.values() if g.selects(namespace, labels)]
        sig.inverse_owned = [
            self.inverse[self._term_spec(ANTI_AFFINITY, t, inverse=True)]
            for t in pod.pod_anti_affinity
        ]
        sig.counted = [g for g in self.groups.values() if g.selects(namespace, labels)]
        self._sigs[key] = sig
        self._min_vec[sig] = self._base_min[pod.signature]
        return sig

    def _relax(self, sig: Signature) -> Signature | None:
        if sig.relaxed is False:
            step = sig.next_relaxation(self.prefer_no_schedule)
            if step is None:
                sig.relaxed = None
            else:
                relaxation, because = step
                sig.relaxed = self._signature(sig.pod, relaxation)
                sig.relaxed_because = because
        return sig.relaxed if isinstance(sig.relaxed, Signature) else None

    # ------------------------------------------------------------------ requirements

    def _interned(self, reqs: Requirements) -> Requirements:
        return self._intern.setdefault(reqs, reqs)

    def _merge(self, base: Requirements, pod: Requirements) -> Requirements | str:
        key = (base, pod)
        cached = self._merge_cache.get(key)
        if cached is None:
            reason = base.compatible(pod, self.well_known)
            cached = reason if reason is not None else self._interned(base.intersect(pod))
            self._merge_cache[key] = cached
        return cached

    def _merge_node(self, base: Requirements, pod: Requirements) -> Requirements | str:
        key = (base, pod)
        cached = self._node_merge_cache.get(key)
        if cached is None:
            reason = base.compatible(pod)
            cached = reason if reason is not None else self._interned(base.intersect(pod))
            self._node_merge_cache[key] = cached
        return cached

    def _narrow(self, reqs: Requirements, key: str, domains: tuple[str, ...]) -> Requirements:
        cache_key = (reqs, key, domains)
        cached = self._narrow_cache.get(cache_key)
        if cached is None:
            cached = self._interned(reqs.add(Requirement(key, False, frozenset(domains))))
            self._narrow_cache[cache_key] = cached
        return cached

    # ------------------------------------------------------------------ fit

    def _fit(self, template: _Template, need: list[int], sig: Signature) -> int:
        catalog = template.catalog
        if template.simple_fit:
            return catalog.fit_mask(need)
        mask = 0
        for group in template.groups:
            if sig.host_ports and any(
                p.conflicts(q) for p in sig.host_ports for q in group.host_ports
            ):
                continue
            total = [a + b for a, b in zip(need, group.overhead, strict=True)]
            mask |= group.mask & catalog.fit_mask(total)
        return mask

    # ------------------------------------------------------------------ topology

    def _topology(
        self,
        sig: Signature,
        host: str,
        reqs: Requirements,
        catalog: Catalog | None,
        mask: int,
        explain: bool,
    ) -> tuple[Requirements, int] | _Reject:
        """Narrow ``reqs`` by the signature's topology rules for a node with hostname
        ``host``; returns the narrowed requirements and how many pods of the signature
        the rules allow there, or why not. With a ``catalog``, a domain is only chosen
        if some instance type in ``mask`` still fits there."""
        kmax = UNLIMITED
        strict = sig.strict
        spreads: list[tuple[TopologyGroup, bool]] = []
        for group, self_sel in sig.owned:
            spec = group.spec
            kind = spec.kind
            if kind is SPREAD and not group.is_hostname:
                spreads.append((group, self_sel))
                continue
            if group.is_hostname:
                count = group.counts.get(host, 0)
                if kind is SPREAD:
                    if count + self_sel > spec.max_skew:
                        return _Reject(self._why(group, explain), True)
                    if self_sel:
                        kmax = min(kmax, spec.max_skew - count)
                elif kind is AFFINITY:
                    pod_domains = strict.get(LABEL_HOSTNAME)
                    if pod_domains is not None and not pod_domains.has(host):
                        return _Reject(self._why(group, explain), True)
                    if count == 0 and not (
                        self_sel
                        and not group.any_compatible_nonempty(
                            pod_domains or _exists(LABEL_HOSTNAME)
                        )
                    ):
                        return _Reject(self._why(group, explain), False)
                else:
                    if count > 0:
                        return _Reject(self._why(group, explain), True)
                    if self_sel:
                        kmax = 1
                continue
            result = self._domain_rule(group, self_sel, sig, reqs, catalog, mask, explain)
            if isinstance(result, _Reject):
                return result
            reqs, limit = result
            kmax = min(kmax, limit)
        for group in sig.inverse:
            feeds = group in sig.inverse_owned
            if group.is_hostname:
                if group.counts.get(host, 0) > 0:
                    return _Reject(self._why(group, explain, inverse=True), True)
                if feeds:
                    kmax = 1
                continue
            result = self._domain_rule(group, feeds, sig, reqs, catalog, mask, explain)
            if isinstance(result, _Reject):
                return result
            reqs, limit = result
            kmax = min(kmax, limit)
        for group, self_sel in spreads:
            result = self._domain_rule(group, self_sel, sig, reqs, catalog, mask, explain)
            if isinstance(result, _Reject):
                return result
            reqs, limit = result
            kmax = min(kmax, limit)
        return reqs, kmax

    def _domain_rule(
        self,
        group: TopologyGroup,
        self_sel: bool,
        sig: Signature,
        reqs: Requirements,
        catalog: Catalog | None,
        mask: int,
        explain: bool,
    ) -> tuple[Requirements, int] | _Reject:
        key = group.spec.key
        counts = group.counts
        node_req = reqs.get(key)
        if node_req is None:
            candidates = sorted(counts)
        elif not node_req.complement:
            candidates = sorted(d for d in node_req.values if d in counts)
        else:
            candidates = sorted(d for d in counts if node_req.has(d))
        pod_domains = sig.strict.get(key) or _exists(key)
        kind = group.spec.kind
        if kind is SPREAD:
            spec = group.spec
            # nodeAffinityPolicy: Ignore counts every domain, not just the pod's.
            honored = spec.node_filter is None or spec.node_filter.affinity_honored
            lowest = group.min_count(pod_domains if honored else _exists(key))
            valid = sorted(
                (counts[d], d) for d in candidates if counts[d] + self_sel - lowest <= spec.max_skew
            )
            for count, domain in valid:
                narrowed = self._choose(reqs, node_req, key, (domain,), catalog, mask)
                if narrowed is not None:
                    limit = spec.max_skew + lowest - count if self_sel else UNLIMITED
                    return narrowed, limit
            return _Reject(self._why(group, explain, domains=candidates), False)
        if kind is AFFINITY:
            options = tuple(d for d in candidates if counts[d] > 0 and pod_domains.has(d))
            if options:
                narrowed = self._choose(reqs, node_req, key, options, catalog, mask)
                if narrowed is not None:
                    return narrowed, UNLIMITED
                return _Reject(self._why(group, explain, domains=candidates), False)
            if self_sel and not group.any_compatible_nonempty(pod_domains):
                for domain in candidates:
                    if not pod_domains.has(domain):
                        continue
                    narrowed = self._choose(reqs, node_req, key, (domain,), catalog, mask)
                    if narrowed is not None:
                        return narrowed, UNLIMITED
            return _Reject(self._why(group, explain, domains=candidates), False)
        options = tuple(d for d in candidates if counts[d] == 0 and pod_domains.has(d))
        if not options:
            return _Reject(self._why(group, explain, domains=candidates), True)
        if self_sel:
            # The pod will count in this group: commit it to one empty domain, so the
            # others stay free for its peers (Karpenter blocks every domain the
            # NodeClaim could still use, which launches one such pod per batch).
            for domain in options:
                narrowed = self._choose(reqs, node_req, key, (domain,), catalog, mask)
                if narrowed is not None:
                    return narrowed, 1
            return _Reject(self._why(group, explain, domains=candidates), False)
        narrowed = self._choose(reqs, node_req, key, options, catalog, mask)
        if narrowed is None:
            return _Reject(self._why(group, explain, domains=candidates), False)
        return narrowed, UNLIMITED

    def _choose(
        self,
        reqs: Requirements,
        node_req: Requirement | None,
        key: str,
        domains: tuple[str, ...],
        catalog: Catalog | None,
        mask: int,
    ) -> Requirements | None:
        if node_req is not None and not node_req.complement and node_req.values == set(domains):
            return reqs
        narrowed = self._narrow(reqs, key, domains)
        if catalog is not None and not (mask & catalog.compatible_mask(narrowed)):
            return None
        return narrowed

    def _why(
        self,
        group: TopologyGroup,
        explain: bool,
        *,
        inverse: bool = False,
        domains: Sequence[str] = (),
    ) -> str:
        if not explain:
            return ""
        if inverse:
            return (
                f"existing pods' {group.spec.kind} on {group.spec.key} "
                f"(selector {group.spec.selector}) keeps this pod out"
            )
        text = f"unsatisfiable {group.describe()}"
        if domains:
            text += f" for domains [{', '.join(domains[:10])}]"
        return text

    # ------------------------------------------------------------------ recording

    def _record(
        self,
        sig: Signature,
        count: int,
        host: str,
        reqs: Requirements,
        taints: Sequence[Taint],
        claim: bool,
    ) -> None:
        allow = self.well_known if claim else frozenset()
        for group in sig.counted:
            node_filter = group.spec.node_filter
            if node_filter is not None and not node_filter.matches(taints, reqs, allow):
                continue
            if group.is_hostname:
                group.record(host, count)
            elif group.spec.kind is ANTI_AFFINITY:
                self._record_possible(group, reqs, count)
            else:
                requirement = reqs.get(group.spec.key)
                domain = None if requirement is None else requirement.single()
                if domain is not None:
                    group.record(domain, count)
        for group in sig.inverse_owned:
            if group.is_hostname:
                group.record(host, count)
            else:
                self._record_possible(group, reqs, count)

    @staticmethod
    def _record_possible(group: TopologyGroup, reqs: Requirements, count: int) -> None:
        # Anti-affinity must block every domain the pod may still end up in.
        requirement = reqs.get(group.spec.key)
        if requirement is None:
            domains: Iterable[str] = list(group.counts)
        elif requirement.complement:
            domains = [d for d in group.counts if requirement.has(d)]
        else:
            domains = requirement.values
        for domain in domains:
            group.record(domain, count)

    def _record_narrowed(self, claim: _Claim, old: Requirements, new: Requirements) -> None:
        """Count the claim's earlier pods in the domain a key just narrowed down to
        (they could not be counted while the domain was open)."""
        if not claim.sig_counts:
            return
        for key in self.topology_keys:
            after = new.get(key)
            if after is None or after is old.get(key):
                continue
            domain = after.single()
            if domain is None:
                continue
            before = old.get(key)
            if before is not None and before.single() is not None:
                continue
            taints = claim.template.taints
            for sig, count in claim.sig_counts.items():
                for group in sig.counted:
                    if group.spec.key != key or group.spec.kind is ANTI_AFFINITY:
                        continue
                    node_filter = group.spec.node_filter
                    if node_filter is not None and not node_filter.matches(
                        taints, new, self.well_known
                    ):
                        continue
                    group.record(domain, count)

    # ------------------------------------------------------------------ candidates

    def _taint_reason(self, sig: Signature, taints: Sequence[Taint]) -> str | None:
        tolerations = sig.tolerations
        prefer = not sig.relaxation.tolerate_prefer_no_schedule
        taint = untolerated(taints, tolerations, prefer=prefer)
        return None if taint is None else f"did not tolerate taint {taint}"

    def _check_node(
        self, node: _Node, sig: Signature, vec: list[int], want: int
    ) -> tuple[int, Requirements] | _Reject:
        # Room first: it is the cheapest test and the most common "no" on a busy node.
        available = node.available
        room = UNLIMITED
        for i, amount in enumerate(vec):
            if amount > 0:
                fit = available[i] // amount
                if fit < room:
                    room = fit
                    if fit <= 0:
                        break
        if room <= 0:
            minimum = self._min_vec[sig]
            permanent = any(a > 0 and a > available[i] for i, a in enumerate(minimum))
            return _PERM if permanent else _TEMP
        taints = node.taints
        if taints:
            reason = self._taint_reason(sig, taints)
            if reason is not None:
                return _PERM
        if sig.host_ports and _ports_clash(sig.host_ports, node.ports):
            return _PERM
        merged = self._merge_node(node.req, sig.requirements)
        if isinstance(merged, str):
            return _PERM
        alternatives = sig.pod.volume_requirements or (None,)
        permanent = True
        for volume in alternatives:
            reqs = merged
            if volume is not None:
                combined = self._merge_node(merged, volume)
                if isinstance(combined, str):
                    continue
                reqs = combined
            limit = room
            if sig.owned or sig.inverse:
                result = self._topology(sig, node.hostname, reqs, None, 0, False)
                if isinstance(result, _Reject):
                    permanent = permanent and result.permanent
                    continue
                reqs, topology_limit = result
                limit = min(limit, topology_limit)
            if sig.host_ports:
                limit = 1
            return min(limit, want), reqs
        return _PERM if permanent else _TEMP

    def _check_claim(
        self,
        claim: _Claim,
        sig: Signature,
        vec: list[int],
        want: int,
        explain: bool,
    ) -> tuple[int, Requirements, int] | _Reject:
        template = claim.template
        if template.index in sig.tolerates:
            reason = sig.tolerates[template.index]
        else:
            reason = self._taint_reason(sig, template.taints)
            sig.tolerates[template.index] = reason
        if reason is not None:
            return _Reject(reason, True)
        if sig.host_ports and _ports_clash(sig.host_ports, claim.ports):
            return _Reject("a host port the pod needs is already taken on this node", True)
        hostname = sig.hostname
        if hostname is not None and not hostname.has(claim.hostname):
            return _Reject(f"requires {hostname}, which a new node cannot have", True)
        merged = self._merge(claim.req, sig.claim_requirements)
        if isinstance(merged, str):
            return _Reject(f"incompatible requirements, {merged}", True)
        alternatives = sig.pod.volume_requirements
        if not alternatives:
            return self._check_claim_reqs(claim, sig, vec, want, merged, explain)
        last: _Reject = _PERM
        permanent = True
        for volume in alternatives:
            pinned = volume.get(LABEL_HOSTNAME)
            if pinned is not None and not pinned.has(claim.hostname):
                # a local volume on an existing node: no new node can mount it
                last = _Reject(f"its volume can only be mounted on {pinned}", True)
                continue
            combined = self._merge(merged, volume.without(LABEL_HOSTNAME))
            if isinstance(combined, str):
                last = _Reject(f"incompatible volume requirements, {combined}", True)
                continue
            result = self._check_claim_reqs(claim, sig, vec, want, combined, explain)
            if not isinstance(result, _Reject):
                return result
            last = result
            permanent = permanent and result.permanent
        return _Reject(last.reason, permanent)

    def _check_claim_reqs(
        self,
        claim: _Claim,
        sig: Signature,
        vec: list[int],
        want: int,
        reqs: Requirements,
        explain: bool,
    ) -> tuple[int, Requirements, int] | _Reject:
        template = claim.template
        catalog = template.catalog
        compatible = claim.mask & catalog.compatible_mask(reqs)
        if not compatible:
            return _Reject(self._types_reason(claim, reqs, vec, explain), True)
        total = claim.total
        need = [a + b for a, b in zip(total, vec, strict=True)]
        fitting = compatible & self._fit(template, need, sig)
        if not fitting:
            minimum = self._min_vec[sig]
            smallest = [a + b for a, b in zip(total, minimum, strict=True)]
            permanent = not (compatible & self._fit(template, smallest, sig))
            return _Reject(self._types_reason(claim, reqs, vec, explain), permanent)
        limit = UNLIMITED
        if sig.owned or sig.inverse:
            result = self._topology(sig, claim.hostname, reqs, catalog, fitting, explain)
            if isinstance(result, _Reject):
                return result
            narrowed, limit = result
            if narrowed is not reqs:
                reqs = narrowed
                fitting &= catalog.compatible_mask(reqs)
                if not fitting:
                    return _Reject(self._types_reason(claim, reqs, vec, explain), False)
        if sig.host_ports:
            limit = 1
        count = min(want, limit)
        mask = fitting
        if count > 1:
            count, mask = self._most(template, sig, total, vec, count, fitting)
        if self.strict_min_values and reqs.has_min_values():
            reason = self._min_values_reason(catalog, reqs, mask)
            if reason is not None:
                return _Reject(reason, False)
        return count, reqs, mask

    def _min_values_reason(self, catalog: Catalog, reqs: Requirements, mask: int) -> str | None:
        key = (id(catalog), reqs, mask)
        if key not in self._min_values_cache:
            self._min_values_cache[key] = catalog.min_values_reason(reqs, mask)
        return self._min_values_cache[key]

    def _most(
        self,
        template: _Template,
        sig: Signature,
        total: list[int],
        vec: list[int],
        count: int,
        fitting: int,
    ) -> tuple[int, int]:
        """The largest k <= count such that k pods still fit, and the types they fit."""

        def fits(k: int) -> int:
            need = [a + k * b for a, b in zip(total, vec, strict=True)]
            return fitting & self._fit(template, need, sig)

        mask = fits(count)
        if mask:
            return count, mask
        low, high, best = 1, count - 1, fitting
        while low <= high:
            middle = (low + high) // 2
            found = fits(middle)
            if found:
                low, best = middle + 1, found
            else:
                high = middle - 1
        return high if high >= 1 else 1, best

    def _types_reason(
        self, claim: _Claim, reqs: Requirements, vec: list[int], explain: bool
    ) -> str:
        if not explain:
            return ""
        catalog = claim.template.catalog
        base = claim.mask
        by_reqs = base & catalog.requirements_mask(reqs)
        by_offering = base & catalog.offering_mask(reqs)
        need = [a + b for a, b in zip(claim.total, vec, strict=True)]
        by_fit = 0
        for group in claim.template.groups:
            total = [a + b for a, b in zip(need, group.overhead, strict=True)]
            by_fit |= group.mask & catalog.fit_mask(total)
        by_fit &= base
        requests = res.describe(
            {n: need[i] for i, n in enumerate(self.names) if need[i]},
        )
        overhead = max(
            (g for g in claim.template.groups), key=lambda g: sum(g.overhead), default=None
        )
        if overhead is not None and any(overhead.overhead):
            daemon = res.describe(
                {n: overhead.overhead[i] for i, n in enumerate(self.names) if overhead.overhead[i]}
            )
            requests += f" plus daemonset overhead {daemon}"
        failures = []
        if not by_reqs:
            failures.append("met the scheduling requirements")
        if not by_offering:
            failures.append("had an available offering compatible with them")
        if not by_fit:
            failures.append("had enough resources")
        if not failures:
            if not (by_reqs & by_offering):
                failures.append("met the requirements and had a compatible offering")
            elif not (by_reqs & by_fit & by_offering):
                failures.append("met the requirements, had an offering and enough resources")
        hint = ""
        usable = by_reqs & by_offering
        if usable and not (usable & by_fit):
            largest: dict[str, int] = {}
            for i in iter_bits(usable):
                for name, amount in catalog.types[i].allocatable.items():
                    if amount > largest.get(name, 0):
                        largest[name] = amount
            wanted = [n for i, n in enumerate(self.names) if need[i]]
            hint = (
                f"; the largest compatible instance type allocates {res.describe(largest, wanted)}"
            )
        return (
            f"no instance type {' or '.join(failures)} "
            f"(requirements: {reqs.without(*_SIMULATION_ONLY)}; requests: {requests}{hint})"
        )

    # ------------------------------------------------------------------ placing

    def _allowed_domains(self, sig: Signature) -> list[tuple[str, frozenset[str]]]:
        """For the signature's zone-like spread and affinity rules, the domains an
        existing node may be in right now: a cheap filter before the full check."""
        out = []
        for group, self_sel in sig.owned:
            kind = group.spec.kind
            if group.is_hostname or kind is ANTI_AFFINITY:
                continue
            key = group.spec.key
            counts = group.counts
            pod_domains = sig.strict.get(key) or _exists(key)
            if kind is SPREAD:
                spec = group.spec
                honored = spec.node_filter is None or spec.node_filter.affinity_honored
                lowest = group.min_count(pod_domains if honored else _exists(key))
                allowed = frozenset(
                    d for d, c in counts.items() if c + self_sel - lowest <= spec.max_skew
                )
            else:
                allowed = frozenset(d for d, c in counts.items() if c > 0 and pod_domains.has(d))
                if not allowed:
                    if not (self_sel and not group.any_compatible_nonempty(pod_domains)):
                        continue
                    allowed = frozenset(d for d in counts if pod_domains.has(d))
            out.append((key, allowed))
        return out

    def _place_existing(
        self, sig: Signature, vec: list[int], pods: list[Pod], start: int, want: int
    ) -> int:
        """First fit on existing nodes (in their order); the count placed, or 0."""
        domains = self._allowed_domains(sig)
        groups = self.node_groups
        dead_groups = sig.dead_groups
        dead_nodes = sig.dead_nodes
        need = [max(a, 0) for a in vec]
        heap: list[tuple[int, int, int]] = []
        for number, group in enumerate(groups):
            if number in dead_groups:
                continue
            if domains and any(group.labels.get(k) not in allowed for k, allowed in domains):
                continue
            if not self._group_usable(sig, group):
                dead_groups.add(number)
                continue
            slot = group.index.find(need)
            if slot is not None:
                heap.append((group.members[slot].order, number, slot))
        heapify(heap)
        while heap:
            _, number, slot = heappop(heap)
            group = groups[number]
            node = group.members[slot]
            if node.order not in dead_nodes:
                result = self._check_node(node, sig, vec, want)
                if not isinstance(result, _Reject):
                    count, reqs = result
                    self._commit_node(node, sig, vec, pods[start : start + count], reqs)
                    group.index.update(slot, node.available)
                    return count
                if result.permanent:
                    dead_nodes.add(node.order)
            following = group.index.find(need, slot + 1)
            if following is not None:
                heappush(heap, (group.members[following].order, number, following))
        return 0

    def _group_usable(self, sig: Signature, group: _NodeGroup) -> bool:
        if group.taints and self._taint_reason(sig, group.taints) is not None:
            return False
        return not isinstance(
            self._merge_node(group.req, sig.requirements.without(LABEL_HOSTNAME)), str
        )

    def _place(self, sig: Signature, vec: list[int], pods: list[Pod], start: int) -> int | str:
        """Place up to all of ``pods[start:]`` (one run) in one step; the count placed
        (>0), or why none fits anywhere."""
        want = len(pods) - start
        # 1. existing nodes, first fit
        if self.node_groups:
            placed = self._place_existing(sig, vec, pods, start, want)
            if placed:
                return placed
        # 2. planned NodeClaims, round-robin
        claims = sig.claims
        if sig.claims_seen < len(self.claims):
            claims.extend(self.claims[sig.claims_seen :])
            sig.claims_seen = len(self.claims)
        size = len(claims)
        if size:
            cursor = sig.cursor % size
            for offset in range(size):
                position = cursor + offset
                if position >= size:
                    position -= size
                claim = claims[position]
                if claim is None:
                    continue
                outcome = self._check_claim(claim, sig, vec, 1, False)
                if isinstance(outcome, _Reject):
                    if outcome.permanent:
                        claims[position] = None
                        sig.claims_dead += 1
                    continue
                _, reqs, mask = outcome
                self._commit_claim(claim, sig, vec, pods[start : start + 1], reqs, mask)
                sig.cursor = position + 1
                self._compact(sig)
                return 1
            self._compact(sig)
        # 3. a new NodeClaim
        reasons: list[str] = []
        for template in self.templates:
            created = self._new_claim(template, sig, vec, want)
            if isinstance(created, str):
                reasons.append(f'nodepool "{template.pool.name}": {created}')
                continue
            new, count, reqs, mask = created
            self._open(new)
            self._commit_claim(new, sig, vec, pods[start : start + count], reqs, mask)
            return count
        if not self.templates:
            return "no NodePool can launch capacity for this pod"
        return "; ".join(reasons)

    def _compact(self, sig: Signature) -> None:
        claims = sig.claims
        if sig.claims_dead > 32 and sig.claims_dead * 2 > len(claims):
            live = [c for c in claims if c is not None]
            cursor_claim = None
            if claims:
                for offset in range(len(claims)):
                    candidate = claims[(sig.cursor + offset) % len(claims)]
                    if candidate is not None:
                        cursor_claim = candidate
                        break
            sig.claims = live
            sig.claims_dead = 0
            sig.cursor = live.index(cursor_claim) if cursor_claim is not None else 0

    def _new_claim(
        self, template: _Template, sig: Signature, vec: list[int], want: int
    ) -> tuple[_Claim, int, Requirements, int] | str:
        catalog = template.catalog
        mask = catalog.full
        if template.limited:
            limits = template.pool.limits or {}
            if NODES in limits:
                nodes_left = limits[NODES] - template.pool.usage.get(NODES, 0) - template.claims
                if nodes_left <= 0:
                    return "node limit reached (limits.nodes)"
            remaining = template.remaining()
            mask &= catalog.within_mask(remaining)
            if not mask:
                left = res.describe({k: max(v, 0) for k, v in remaining.items()})
                return f"all instance types exceed the NodePool's limits (remaining {left})"
        claim = _Claim(template, f"hostname-placeholder-{self.hostnames + 1:04d}", mask, self.size)
        outcome = self._check_claim(claim, sig, vec, want, True)
        if isinstance(outcome, _Reject):
            reason = outcome.reason or "no room"
            if mask != catalog.full:
                excluded = catalog.full.bit_count() - mask.bit_count()
                left = res.describe({k: max(v, 0) for k, v in template.remaining().items()})
                reason += (
                    f"; {excluded} larger instance types were excluded by the NodePool's "
                    f"limits (remaining {left})"
                )
            return reason
        count, reqs, fit_mask = outcome
        return claim, count, reqs, fit_mask

    def _open(self, claim: _Claim) -> None:
        self.hostnames += 1
        claim.index = len(self.claims)
        self.claims.append(claim)
        claim.template.claims += 1

    def _commit_node(
        self, node: _Node, sig: Signature, vec: list[int], pods: list[Pod], reqs: Requirements
    ) -> None:
        count = len(pods)
        node.placed.extend(pods)
        available = node.available
        for i, amount in enumerate(vec):
            if amount:
                available[i] -= amount * count
        if sig.host_ports:
            node.ports.extend(sig.host_ports)
        self._record(sig, count, node.hostname, reqs, node.taints, claim=False)

    def _commit_claim(
        self,
        claim: _Claim,
        sig: Signature,
        vec: list[int],
        pods: list[Pod],
        reqs: Requirements,
        mask: int,
    ) -> None:
        count = len(pods)
        old = claim.req
        if reqs is not old:
            self._record_narrowed(claim, old, reqs)
            claim.req = reqs
        claim.mask = mask
        total = claim.total
        for i, amount in enumerate(vec):
            if amount:
                total[i] += amount * count
        claim.pods.extend(pods)
        if sig.host_ports:
            claim.ports.extend(sig.host_ports)
        claim.sig_counts[sig] = claim.sig_counts.get(sig, 0) + count
        template = claim.template
        if template.limited:
            names = [n for n in (template.pool.limits or {}) if n != NODES]
            reserved = template.catalog.max_capacity(mask, names)
            for name in names:
                template.reserved[name] = (
                    template.reserved.get(name, 0) - claim.reserved.get(name, 0) + reserved[name]
                )
            claim.reserved = reserved
        self._record(sig, count, claim.hostname, reqs, template.taints, claim=True)

    # ------------------------------------------------------------------ main loop

    def run(self) -> Results:
        pods = self.pods
        if not pods:
            return self._results({})
        ranks: dict[Any, int] = {}
        minimums = self._base_min
        vectors = []
        for pod in pods:
            vec = self._vec(pod.requests)
            vectors.append(vec)
            signature = pod.signature
            if signature not in ranks:
                ranks[signature] = len(ranks)
                minimums[signature] = list(vec)
            else:
                minimum = minimums[signature]
                for i, amount in enumerate(vec):
                    if amount < minimum[i]:
                        minimum[i] = amount
        cpu = self.vector[res.CPU]
        memory = self.vector[res.MEMORY]
        order = sorted(
            range(len(pods)),
            key=lambda i: (
                -vectors[i][cpu],
                -vectors[i][memory],
                ranks[pods[i].signature],
                vectors[i],
                i,
            ),
        )
        runs: list[tuple[Signature, list[int], list[Pod]]] = []
        previous_key: tuple[Any, ...] | None = None
        for i in order:
            pod = pods[i]
            key = (ranks[pod.signature], vectors[i])
            if key == previous_key:
                runs[-1][2].append(pod)
            else:
                runs.append((self._signature(pod, Relaxation()), vectors[i], [pod]))
                previous_key = key
        errors: dict[str, tuple[Pod, str]] = {}
        queue = runs
        while queue:
            failed: list[tuple[Signature, list[int], list[Pod]]] = []
            progress = False
            for base, vec, group in queue:
                placed = self._place_run(base, vec, group, errors)
                if placed:
                    progress = True
                if placed < len(group):
                    failed.append((base, vec, group[placed:]))
            if not progress or not failed:
                break
            queue = failed
        return self._results(errors)

    def _place_run(
        self,
        base: Signature,
        vec: list[int],
        pods: list[Pod],
        errors: dict[str, tuple[Pod, str]],
    ) -> int:
        start = 0
        total = len(pods)
        while start < total:
            sig: Signature | None = base
            reason = ""
            while sig is not None:
                outcome = self._place(sig, vec, pods, start)
                if isinstance(outcome, int):
                    for pod in pods[start : start + outcome]:
                        errors.pop(pod.key, None)
                    start += outcome
                    break
                reason = outcome
                sig = self._relax(sig)
            else:
                for pod in pods[start:]:
                    errors[pod.key] = (pod, reason)
                return start
        return start

    # ------------------------------------------------------------------ results

    def _results(self, errors: Mapping[str, tuple[Pod, str]]) -> Results:
        plans = [self._plan(claim) for claim in self.claims if claim.pods]
        existing = tuple(
            ExistingNodePlan(node=n.node.name, pods=tuple(n.placed)) for n in self.nodes if n.placed
        )
        return Results(
            new_nodeclaims=tuple(p for p in plans if p is not None),
            existing_nodes=existing,
            errors=tuple(PodError(pod, reason) for pod, reason in errors.values()),
        )

    def _plan(self, claim: _Claim) -> NodeClaimPlan | None:
        template = claim.template
        catalog = template.catalog
        reqs = claim.req.without(*_SIMULATION_ONLY)
        pricing = catalog.pricing(reqs)
        # Many NodeClaims end with the same instance types: share the (large) type
        # list and requirement between them.
        cache_key = (template.index, claim.mask, id(pricing), reqs.has_min_values() and reqs)
        cached = self._plan_cache.get(cache_key)
        if cached is None:
            ordered = self._truncate(catalog, catalog.cheapest_first(claim.mask, reqs), reqs)
            types = tuple(catalog.types[i] for i in ordered)
            chosen_mask = claim.mask & pricing.mask
            if len(ordered) < chosen_mask.bit_count():
                chosen_mask = 0
                for i in ordered:
                    chosen_mask |= 1 << i
            type_req = template.pool.requirements.get(LABEL_INSTANCE_TYPE)
            min_values = None if type_req is None else type_req.min_values
            names = frozenset(it.name for it in types)
            capacity_types = sorted(
                ct for ct, m in pricing.capacity_types.items() if m & chosen_mask
            )
            cached = (
                types,
                Requirement(LABEL_INSTANCE_TYPE, False, names, None, None, min_values),
                Requirement.new(LABEL_CAPACITY_TYPE, IN, capacity_types)
                if capacity_types
                else None,
            )
            self._plan_cache[cache_key] = cached
        types, type_requirement, capacity_requirement = cached
        final = reqs.add(type_requirement)
        if capacity_requirement is not None:
            final = final.add(capacity_requirement)
        overhead = None
        for group in template.groups:
            if group.mask & claim.mask:
                overhead = (
                    list(group.overhead)
                    if overhead is None
                    else [min(a, b) for a, b in zip(overhead, group.overhead, strict=True)]
                )
        total = list(claim.total)
        if overhead is not None:
            total = [a + b for a, b in zip(total, overhead, strict=True)]
        requests = {name: total[i] for i, name in enumerate(self.names) if total[i]}
        labels = dict(template.pool.labels)
        for key, requirement in final.items():
            if key in self.well_known or key in RESTRICTED_LABELS or key in _SIMULATION_ONLY:
                continue
            if not requirement.complement and requirement.values:
                labels.setdefault(key, min(requirement.values))
        labels[LABEL_NODEPOOL] = template.pool.name
        return NodeClaimPlan(
            nodepool=template.pool.name,
            pods=tuple(claim.pods),
            requirements=final,
            instance_types=types,
            requests=requests,
            labels=labels,
            taints=template.pool.taints,
            startup_taints=template.pool.startup_taints,
            hostname=claim.hostname,
        )

    def _truncate(self, catalog: Catalog, ordered: list[int], reqs: Requirements) -> list[int]:
        """The cheapest types, at most ``max_instance_types``, keeping ``minValues``:
        types that bring a value a requirement still needs are taken first."""
        limit = self.sim.options.max_instance_types
        if len(ordered) <= limit:
            return ordered
        rank = {index: position for position, index in enumerate(ordered)}
        chosen: set[int] = set()
        for requirement in reqs.values():
            needed = requirement.min_values
            if needed is None:
                continue
            values: set[str] = set()
            for index in ordered:
                if len(values) >= needed:
                    break
                theirs = catalog.types[index].requirements.get(requirement.key)
                if theirs is None or theirs.complement or theirs.values <= values:
                    continue
                values |= theirs.values
                chosen.add(index)
        for index in ordered:
            if len(chosen) >= limit:
                break
            chosen.add(index)
        return sorted(chosen, key=rank.__getitem__)


def _ports_clash(ours: Sequence[HostPort], theirs: Sequence[HostPort]) -> bool:
    return any(p.conflicts(q) for p in ours for q in theirs)


def _node_domain(node: ExistingNode, key: str) -> str | None:
    if key == LABEL_HOSTNAME:
        return node.hostname
    return node.labels.get(key)


def _selector_text(selector: LabelSelector) -> str:  # pragma: no cover - debugging aid
    return str(selector)
