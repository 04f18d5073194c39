"""One machine as the cluster model sees it: a Node and/or its NodeClaim, and its pods.

A NodeClaim exists before its Node (in flight), a Node may exist without a NodeClaim
(not managed by karpy), and for a while both exist; :class:`StateNode` joins the two
by provider ID and answers questions that need both (is it initialized, what capacity
does it bring, which labels and taints will pods see). Derived values are computed
once when an object changes, not on every read.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from karpy.apis.conditions import condition_is_true
from karpy.apis.labels import LABEL_INITIALIZED, LABEL_NODEPOOL
from karpy.runtime import Object
from karpy.scheduling import ExistingNode, NodeTaint, Pod
from karpy.scheduling import resources as res
from karpy.scheduling.node import nodeclaim_labels
from karpy.scheduling.taints import EPHEMERAL_TAINTS

__all__ = ["NodePods", "StateNode"]

_EMPTY_LIST: Mapping[str, int] = MappingProxyType({})
_EMPTY_LABELS: Mapping[str, str] = MappingProxyType({})


#: Taint key prefixes of the taints Kubernetes (node conditions, cordoning, the cloud
#: node controller, readiness gates) and karpy (registration, disruption) add and remove
#: themselves: never "undeclared".
_MANAGED_TAINT_PREFIXES = (
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "readiness.k8s.io/",
    "karpenter.sh/",
)


def _undeclared(node: Object, claim: Object) -> tuple[NodeTaint, ...]:
    spec = claim.get("spec") or {}
    declared = [
        NodeTaint.from_dict(t)
        for t in (*(spec.get("taints") or ()), *(spec.get("startupTaints") or ()))
    ]
    found = []
    for raw in (node.get("spec") or {}).get("taints") or ():
        taint = NodeTaint.from_dict(raw)
        if taint.key.startswith(_MANAGED_TAINT_PREFIXES) or taint in EPHEMERAL_TAINTS:
            continue
        if not any(taint.matches(d) for d in declared):
            found.append(taint)
    return tuple(found)


class NodePods:
    """The pods bound to one node name, with their requests and limits summed as they
    come and go."""

    __slots__ = ("daemon_limits", "daemon_requests", "daemonsets", "limits", "movable", "pods",
                 "requests")

    def __init__(self) -> None:
        self.pods: dict[str, Pod] = {}
        self.requests: res.ResourceList = {}
        """Sum of the bound, non-terminal pods' requests (DaemonSet pods included)."""
        self.daemon_requests: res.ResourceList = {}
        """The DaemonSet pods' share of ``requests``."""
        self.limits: res.ResourceList = {}
        """Sum of the same pods' limits (Karpenter's StateNode.PodLimits)."""
        self.daemon_limits: res.ResourceList = {}
        """The DaemonSet pods' share of ``limits``."""
        self.daemonsets: dict[str, str] = {}
        """Pod key to its DaemonSet's ``namespace/name``, for the DaemonSet pods."""
        self.movable: set[str] = set()
        """Keys of the pods that would need a new home if the node went away."""

    def add(self, key: str, pod: Pod, *, movable: bool, daemonset: str = "") -> None:
        """Count ``pod`` (replacing an earlier version of it)."""
        self.remove(key)
        self.pods[key] = pod
        _accumulate(self.requests, pod.requests, 1)
        _accumulate(self.limits, pod.limits, 1)
        if daemonset:
            self.daemonsets[key] = daemonset
            _accumulate(self.daemon_requests, pod.requests, 1)
            _accumulate(self.daemon_limits, pod.limits, 1)
        if movable:
            self.movable.add(key)

    def set_movable(self, key: str, movable: bool) -> None:
        """Update whether the pod under ``key`` would need a new home."""
        if movable:
            self.movable.add(key)
        else:
            self.movable.discard(key)

    def remove(self, key: str) -> Pod | None:
        """Stop counting the pod under ``key``; return it if it was counted."""
        pod = self.pods.pop(key, None)
        if pod is not None:
            _accumulate(self.requests, pod.requests, -1)
            _accumulate(self.limits, pod.limits, -1)
            if self.daemonsets.pop(key, None) is not None:
                _accumulate(self.daemon_requests, pod.requests, -1)
                _accumulate(self.daemon_limits, pod.limits, -1)
            self.movable.discard(key)
        return pod

    def __len__(self) -> int:
        return len(self.pods)


def _accumulate(total: res.ResourceList, delta: Mapping[str, int], sign: int) -> None:
    for name, amount in delta.items():
        value = total.get(name, 0) + sign * amount
        if value:
            total[name] = value
        else:
            total.pop(name, None)


_NO_PODS = NodePods()


class StateNode:
    """A Node and/or NodeClaim joined by provider ID (see the module docstring).

    ``node`` and ``nodeclaim`` are the cached API objects (read-only); the cluster
    replaces them through :meth:`set_node` / :meth:`set_nodeclaim`.
    """

    __slots__ = (
        "_allocatable",
        "_capacity",
        "_labels",
        "_startup_taints",
        "_taints",
        "_undeclared_taints",
        "bound",
        "initialized_at",
        "marked",
        "node",
        "nodeclaim",
        "nominated_until",
    )

    def __init__(self) -> None:
        self.node: Object | None = None
        self.nodeclaim: Object | None = None
        self.bound: NodePods = _NO_PODS
        """The pods bound to this node (an empty set until the Node exists)."""
        self.marked = False
        """Marked for deletion by a disruption decision (see :attr:`marked_for_deletion`)."""
        self.nominated_until = 0.0
        """Monotonic time until which pending pods are expected to land here."""
        self.initialized_at: float | None = None
        """Monotonic time at which the model first saw this node initialized."""
        self._labels: Mapping[str, str] = _EMPTY_LABELS
        self._taints: tuple[NodeTaint, ...] = ()
        self._startup_taints: tuple[NodeTaint, ...] = ()
        self._undeclared_taints: tuple[NodeTaint, ...] = ()
        self._capacity: Mapping[str, int] = _EMPTY_LIST
        self._allocatable: Mapping[str, int] = _EMPTY_LIST

    def __repr__(self) -> str:
        return f"StateNode({self.name!r}, provider_id={self.provider_id!r})"

    # -- updates (the cluster's) ---------------------------------------------------------

    def set_node(self, node: Object | None) -> None:
        """Replace the Node (None: it is gone) and recompute what depends on it."""
        self.node = node
        self._refresh()

    def set_nodeclaim(self, nodeclaim: Object | None) -> None:
        """Replace the NodeClaim (None: it is gone) and recompute what depends on it."""
        self.nodeclaim = nodeclaim
        self._refresh()

    def _refresh(self) -> None:
        node, claim = self.node, self.nodeclaim
        initialized = self.initialized
        registered = node is not None and (claim is None or self.registered)
        if registered and node is not None:
            self._labels = node["metadata"].get("labels") or {}
        elif claim is not None:
            # Before launch the NodeClaim's labels lack what its requirements already pin
            # (a single zone, capacity type ...); pods constrained on those keys may still
            # count on this in-flight capacity.
            self._labels = nodeclaim_labels(claim)
        else:
            self._labels = {}
        # Before initialization a node's taints are in flux (startup and not-ready
        # taints come and go); the NodeClaim says what they will be.
        if claim is not None and not (initialized and node is not None):
            spec = claim.get("spec") or {}
            self._taints = tuple(NodeTaint.from_dict(t) for t in spec.get("taints") or ())
            self._startup_taints = tuple(
                NodeTaint.from_dict(t) for t in spec.get("startupTaints") or ()
            )
        elif node is not None:
            self._taints = tuple(
                NodeTaint.from_dict(t) for t in (node.get("spec") or {}).get("taints") or ()
            )
            self._startup_taints = ()
            if claim is not None:
                self._startup_taints = tuple(
                    NodeTaint.from_dict(t)
                    for t in (claim.get("spec") or {}).get("startupTaints") or ()
                )
        self._undeclared_taints = (
            _undeclared(node, claim) if registered and node is not None and claim is not None
            else ()
        )
        # A node reports its full capacity only once initialized (extended resources
        # appear when device plugins start); until then the NodeClaim's estimate holds.
        source = node if node is not None and (initialized or claim is None) else claim
        status = (source or {}).get("status") or {}
        self._capacity = res.parse_resource_list(status.get("capacity"))
        self._allocatable = res.parse_resource_list(status.get("allocatable"))
        if claim is not None and node is None and not status.get("providerID"):
            # Not launched: all that is known is what the NodeClaim asked for (its pods
            # and DaemonSets), which any instance it becomes will hold.
            requests = ((claim.get("spec") or {}).get("resources") or {}).get("requests")
            self._allocatable = res.parse_resource_list(requests)
            self._capacity = self._allocatable

    # -- identity ------------------------------------------------------------------------

    @property
    def provider_id(self) -> str:
        """The cloud's ID of the machine; for an unmanaged node without one, its name."""
        if self.node is not None:
            pid = (self.node.get("spec") or {}).get("providerID")
            if pid:
                return str(pid)
        if self.nodeclaim is not None:
            pid = (self.nodeclaim.get("status") or {}).get("providerID")
            if pid:
                return str(pid)
        return self.node_name

    @property
    def node_name(self) -> str:
        """The Node's name ("" while no Node is known)."""
        if self.node is not None:
            return str(self.node["metadata"]["name"])
        if self.nodeclaim is not None:
            return str((self.nodeclaim.get("status") or {}).get("nodeName") or "")
        return ""

    @property
    def nodeclaim_name(self) -> str:
        """The NodeClaim's name ("" for a node karpy does not manage)."""
        return str(self.nodeclaim["metadata"]["name"]) if self.nodeclaim is not None else ""

    @property
    def name(self) -> str:
        """The Node's name, or the NodeClaim's while there is no Node (how the
        simulator names the node)."""
        return self.node_name or self.nodeclaim_name

    # -- state ---------------------------------------------------------------------------

    @property
    def managed(self) -> bool:
        """Launched by karpy (or Karpenter): has a NodeClaim or a NodePool label."""
        return self.nodeclaim is not None or bool(self.nodepool)

    @property
    def nodepool(self) -> str:
        """The owning NodePool's name ("" when unmanaged)."""
        return str(self._labels.get(LABEL_NODEPOOL, ""))

    @property
    def launched(self) -> bool:
        """The NodeClaim's instance exists (Launched=True), or there is a Node."""
        return self.node is not None or condition_is_true(self.nodeclaim, "Launched")

    @property
    def registered(self) -> bool:
        """The Node joined the cluster (for unmanaged nodes: the Node exists)."""
        if self.nodeclaim is not None:
            return condition_is_true(self.nodeclaim, "Registered")
        return self.node is not None

    @property
    def initialized(self) -> bool:
        """Ready for pods as karpy sees it: the NodeClaim is Initialized; an unmanaged
        node always is."""
        if self.nodeclaim is not None:
            return condition_is_true(self.nodeclaim, "Initialized")
        if self.node is not None:
            labels = self.node["metadata"].get("labels") or {}
            if LABEL_NODEPOOL in labels:
                return labels.get(LABEL_INITIALIZED) == "true"
            return True
        return False

    @property
    def deleting(self) -> bool:
        """The Node or the NodeClaim has a deletionTimestamp."""
        return any(
            obj is not None and bool(obj["metadata"].get("deletionTimestamp"))
            for obj in (self.node, self.nodeclaim)
        )

    @property
    def marked_for_deletion(self) -> bool:
        """Being deleted, or marked for deletion by a disruption decision: its capacity
        is going away and must not be counted on."""
        return self.marked or self.deleting

    @property
    def schedulable(self) -> bool:
        """Not cordoned."""
        return not (self.node is not None and (self.node.get("spec") or {}).get("unschedulable"))

    # -- resources -----------------------------------------------------------------------

    @property
    def labels(self) -> Mapping[str, str]:
        """The labels pods see: the Node's once registered, else the NodeClaim's."""
        return self._labels

    @property
    def taints(self) -> tuple[NodeTaint, ...]:
        """The taints pods must tolerate (before initialization: the NodeClaim's)."""
        return self._taints

    @property
    def undeclared_taints(self) -> tuple[NodeTaint, ...]:
        """Taints the registered Node carries that its NodeClaim did not declare (neither
        ``taints`` nor ``startupTaints``), leaving out those Kubernetes and karpy manage
        themselves (``node.kubernetes.io/``, ``karpenter.sh/`` ...): e.g. a kubelet's
        ``--register-with-taints``. A pod planned onto this NodeClaim that does not
        tolerate one would not land on any NodeClaim planned the same way either."""
        return self._undeclared_taints

    @property
    def capacity(self) -> Mapping[str, int]:
        """Canonical capacity (the NodeClaim's estimate until initialized)."""
        return self._capacity

    @property
    def allocatable(self) -> Mapping[str, int]:
        """Canonical allocatable (the NodeClaim's estimate until initialized)."""
        return self._allocatable

    @property
    def pod_requests(self) -> Mapping[str, int]:
        """The summed requests of the pods bound here."""
        return self.bound.requests

    @property
    def daemonset_requests(self) -> Mapping[str, int]:
        """The summed requests of the DaemonSet pods bound here."""
        return self.bound.daemon_requests

    @property
    def pod_limits(self) -> Mapping[str, int]:
        """The summed limits of the pods bound here (DaemonSet pods included)."""
        return self.bound.limits

    @property
    def daemonset_limits(self) -> Mapping[str, int]:
        """The summed limits of the DaemonSet pods bound here."""
        return self.bound.daemon_limits

    def available(self) -> res.ResourceList:
        """Allocatable minus the bound pods' requests."""
        return res.subtract(self._allocatable, self.bound.requests)

    def usage(self) -> tuple[str, res.ResourceList] | None:
        """What this machine counts against its NodePool's limits: its capacity plus
        one ``nodes``; None when unmanaged, capacity-less or marked for deletion."""
        pool = self.nodepool
        if not pool or not self._capacity or self.marked_for_deletion:
            return None
        usage = dict(self._capacity)
        usage["nodes"] = 1
        return pool, usage

    def to_existing_node(self, extra_pods: tuple[Pod, ...] = ()) -> ExistingNode:
        """The simulator's view: this node with its bound pods plus ``extra_pods``
        (pods nominated to it that have not bound yet)."""
        pods = tuple(self.bound.pods.values())
        if extra_pods:
            pods += extra_pods
        return ExistingNode(
            name=self.name,
            labels=self._labels,
            taints=self._taints,
            allocatable=self._allocatable,
            capacity=self._capacity,
            pods=pods,
            startup_taints=self._startup_taints,
            initialized=self.initialized,
            schedulable=self.schedulable and not self.marked_for_deletion,
            nodepool=self.nodepool,
        )

    def describe(self) -> dict[str, Any]:
        """A small summary for logs."""
        return {"name": self.name, "provider-id": self.provider_id, "nodepool": self.nodepool}
