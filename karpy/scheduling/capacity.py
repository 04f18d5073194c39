"""The capacity one solve places pods on: existing nodes (prepared and grouped),
NodePools prepared as templates, and the NodeClaims planned so far -- and the answer a
candidate gives when a pod does not fit (:class:`Reject`).

These are the mutable working state of :class:`~karpy.scheduling.solver.Solve`; none
of them outlives a solve.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from functools import partial
from typing import Any

from karpy.apis.labels import LABEL_HOSTNAME
from karpy.scheduling.catalog import Catalog, DaemonGroup
from karpy.scheduling.daemons import daemon_runs_on
from karpy.scheduling.freeindex import FreeIndex
from karpy.scheduling.node import ExistingNode
from karpy.scheduling.nodepool import NODES, NodePoolTemplate
from karpy.scheduling.pod import Pod
from karpy.scheduling.requirements import IN, Requirement, Requirements
from karpy.scheduling.signature import Signature
from karpy.scheduling.taints import PREFER_NO_SCHEDULE

__all__ = [
    "PERM",
    "TEMP",
    "Budget",
    "Claim",
    "Node",
    "NodeGroup",
    "Reject",
    "Template",
    "group_nodes",
    "prepare_nodes",
]


class Budget:
    """Limits as one solve spends them: a NodePool's own, or a ClusterLimit's that the
    templates of every pool it covers share. ``reserved`` is what the solve's planned
    NodeClaims may take (the largest capacity their instance types have), ``claims``
    how many it plans."""

    __slots__ = ("claims", "label", "limits", "reserved", "usage")

    def __init__(self, label: str, limits: Mapping[str, int], usage: Mapping[str, int]) -> None:
        #: Who set the limits, as messages name it ("" for the NodePool's own).
        self.label = label
        self.limits = limits
        self.usage = usage
        self.reserved: dict[str, int] = {}
        self.claims = 0

    def nodes_left(self) -> int | None:
        """How many more NodeClaims ``limits.nodes`` allows (None: no node limit)."""
        limit = self.limits.get(NODES)
        if limit is None:
            return None
        return limit - self.usage.get(NODES, 0) - self.claims

    def remaining(self) -> dict[str, int]:
        """What the limits leave of each resource, after usage and the planned claims."""
        usage = self.usage
        return {
            name: amount - usage.get(name, 0) - self.reserved.get(name, 0)
            for name, amount in self.limits.items()
            if name != NODES
        }


class Template:
    """A NodePool prepared for one solve."""

    __slots__ = (
        "budgets",
        "catalog",
        "groups",
        "index",
        "limit_names",
        "limited",
        "pool",
        "prefer_taints",
        "requirements",
        "simple_fit",
        "taints",
    )

    def __init__(
        self,
        index: int,
        pool: NodePoolTemplate,
        catalog: Catalog,
        groups: list[DaemonGroup],
        shared: Mapping[str, Budget] | None = None,
    ) -> None:
        self.index = index
        self.pool = pool
        self.catalog = catalog
        self.groups = groups
        self.requirements = pool.requirements.without(LABEL_HOSTNAME)
        self.taints = pool.taints
        self.prefer_taints = any(t.effect == PREFER_NO_SCHEDULE for t in pool.taints)
        #: The pool's own limits first, then each ClusterLimit covering it (``shared``
        #: holds the solve's one Budget per ClusterLimit, by name).
        self.budgets: list[Budget] = []
        if pool.limits is not None:
            self.budgets.append(Budget("", pool.limits, pool.usage))
        for limit in pool.shared_limits:
            if shared is not None and limit.name in shared:
                self.budgets.append(shared[limit.name])
            else:
                self.budgets.append(Budget(limit.name, limit.limits, limit.usage))
        self.limited = bool(self.budgets)
        self.limit_names = tuple(sorted(
            {name for b in self.budgets for name in b.limits if name != NODES}))
        single = groups[0] if len(groups) == 1 else None
        self.simple_fit = single is not None and not any(single.overhead) and not single.host_ports

    def remaining(self) -> dict[str, int]:
        """What every limit on the NodePool leaves, per resource (the least of its own
        and its ClusterLimits'), after their usage and the planned claims."""
        out: dict[str, int] = {}
        for budget in self.budgets:
            for name, left in budget.remaining().items():
                out[name] = min(left, out.get(name, left))
        return out


class Claim:
    """A NodeClaim being planned."""

    __slots__ = (
        "hostname",
        "index",
        "mask",
        "narrowed",
        "pods",
        "ports",
        "req",
        "reserved",
        "runs",
        "sig_counts",
        "template",
        "total",
        "volume_mask",
    )

    def __init__(self, template: Template, hostname: str, mask: int, size: int) -> None:
        self.template = template
        self.hostname = hostname
        self.req = template.requirements
        self.mask = mask
        self.total = [0] * size
        self.pods: list[Pod] = []
        self.ports: list[Any] = []
        self.sig_counts: dict[Signature, int] = {}
        # (signature, request vector, count) per placement, in the order of ``pods``
        self.runs: list[tuple[Signature, list[int], int]] = []
        self.reserved: dict[str, int] = {}
        self.index = -1
        # set by the improvement stage when it narrowed the requirements (a zone)
        self.narrowed = False
        # the instance types that can attach its pods' volumes (all: -1); its pods with
        # volumes never move, so the improvement stage keeps within it
        self.volume_mask = -1


class Node:
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
        self,
        node: ExistingNode,
        available: list[int],
        req: Requirements,
        ports: list[Any],
        *,
        taints: tuple[Any, ...] | None = None,
    ) -> None:
        self.node = node
        self.available = available
        self.req = req
        self.hostname = node.hostname
        self.taints = node.effective_taints() if taints is None else taints
        self.ports = ports
        self.placed: list[Pod] = []
        self.order = 0
        self.group = 0
        self.slot = 0


class NodeGroup:
    """Existing nodes that look the same to every pending pod: equal taints and equal
    values for every label key a pending pod selects or spreads on. A signature that
    cannot use one of them (a taint, a requirement) can use none, so it skips the group
    at once; within a group a :class:`FreeIndex` finds the first node with room."""

    __slots__ = ("index", "labels", "members", "req", "taints")

    def __init__(self, members: list[Node], labels: dict[str, str], size: int) -> None:
        self.members = members
        self.labels = labels
        self.req = Requirements.from_labels(labels)
        self.taints = members[0].taints
        self.index = FreeIndex([n.available for n in members], size)


class Reject:
    """A candidate said no: why, and whether it can never say yes to this signature."""

    __slots__ = ("permanent", "reason")

    def __init__(self, reason: str, permanent: bool) -> None:
        self.reason = reason
        self.permanent = permanent


TEMP = Reject("", False)
PERM = Reject("", True)


def prepare_nodes(
    nodes: Sequence[ExistingNode],
    *,
    daemonsets: Sequence[Pod],
    pending_keys: set[str],
    vec: Callable[[Mapping[str, int]], list[int]],
    size: int,
    layout: tuple[str, ...] | None = None,
) -> list[Node]:
    """The schedulable nodes, initialized first, with what is still free on each: bound
    pods (but not the pending ones) and the DaemonSet pods still to come are taken off.

    ``layout`` names the resources ``vec`` maps to; given, each node's usage is kept on
    the node for the next solve with the same layout."""
    ordered = sorted(nodes, key=lambda n: (not n.initialized, n.name))
    out = []
    for node in ordered:
        if not node.schedulable:
            continue
        if layout is not None and pending_keys.isdisjoint(_pod_keys(node)):
            # Per node and resource layout: the same in every solve of a pass.
            base = node.memo(("base", layout), partial(_base, node, frozenset(), vec, size))
        else:
            base = _base(node, pending_keys, vec, size)
        free, daemon_used, ports, labels, taints = base
        if daemonsets:
            daemon_need = [0] * size
            for daemon in daemonsets:
                if daemon_runs_on(daemon, taints, labels):
                    for i, amount in enumerate(vec(daemon.requests)):
                        daemon_need[i] += amount
            available = [
                free[i] - max(daemon_need[i] - daemon_used[i], 0) for i in range(size)
            ]
        else:
            available = list(free)
        out.append(Node(node, available, labels, list(ports), taints=taints))
    return out


_Base = tuple[list[int], list[int], list[Any], Requirements, tuple[Any, ...]]


def _base(
    node: ExistingNode,
    pending_keys: Set[str],
    vec: Callable[[Mapping[str, int]], list[int]],
    size: int,
) -> _Base:
    """What the node offers before DaemonSets are counted: allocatable minus its bound
    pods (not the pending ones), the DaemonSet pods' share of those, their host ports,
    its labels (with the hostname) and the taints that keep pods off it."""
    used, daemon_used, ports = _usage(node, pending_keys, vec, size)
    allocatable = vec(node.allocatable)
    free = [allocatable[i] - used[i] for i in range(size)]
    labels = node.memo("labels+hostname", partial(_with_hostname, node))
    return free, daemon_used, ports, labels, node.effective_taints()


def _with_hostname(node: ExistingNode) -> Requirements:
    return node.requirements.add(Requirement.new(LABEL_HOSTNAME, IN, (node.hostname,)))


def _pod_keys(node: ExistingNode) -> frozenset[str]:
    return node.memo("pod-keys", lambda: frozenset(p.key for p in node.pods))


def _usage(
    node: ExistingNode,
    pending_keys: Set[str],
    vec: Callable[[Mapping[str, int]], list[int]],
    size: int,
) -> tuple[list[int], list[int], list[Any]]:
    """What the node's bound pods (not the pending ones) use, the DaemonSet pods' share
    of it, and their host ports."""
    used = [0] * size
    daemon_used = [0] * size
    ports: list[Any] = []
    for pod in node.pods:
        if pod.terminal or pod.key in pending_keys:
            continue
        pod_vec = vec(pod.requests)
        for i, amount in enumerate(pod_vec):
            used[i] += amount
            if pod.is_daemon:
                daemon_used[i] += amount
        ports.extend(pod.host_ports)
    return used, daemon_used, ports


def group_nodes(
    nodes: list[Node], pods: Sequence[Pod], topology_keys: set[str], size: int
) -> list[NodeGroup]:
    """Group ``nodes`` by the labels ``pods`` look at and by taints (:class:`NodeGroup`),
    numbering each node's order, group and slot."""
    keys: set[str] = set(topology_keys)
    for pod in pods:
        keys.update(pod.node_selector)
        for term in pod.required_node_terms:
            keys.update(term)
        for _, preference in pod.preferred_node_terms:
            keys.update(preference)
        for volume in pod.volume_requirements:
            keys.update(volume)
    keys.discard(LABEL_HOSTNAME)
    relevant = sorted(keys)
    grouped: dict[tuple[Any, ...], list[Node]] = {}
    for order, node in enumerate(nodes):
        node.order = order
        labels = node.node.labels
        key = (tuple((k, labels.get(k)) for k in relevant), node.taints)
        grouped.setdefault(key, []).append(node)
    groups: list[NodeGroup] = []
    for (pairs, _), members in grouped.items():
        for slot, node in enumerate(members):
            node.group = len(groups)
            node.slot = slot
        labels = {k: v for k, v in pairs if v is not None}
        groups.append(NodeGroup(members, labels, size))
    return groups
