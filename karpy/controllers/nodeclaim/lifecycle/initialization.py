"""Initialization: the registered Node is ready for the pods it was launched for.

Karpenter's ``lifecycle/initialization.go``: Initialized turns True (and with it Ready)
once the Node's Ready condition is True, none of the NodeClaim's startup taints and
none of the taints a node carries while it starts (not-ready, unreachable, uninitialized,
karpenter.sh/unregistered, readiness.k8s.io/*) remain, and every resource the NodeClaim
requested shows a non-zero allocatable (extended resources appear only once their device
plugin registers). The Node is labelled ``karpenter.sh/initialized=true``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from karpy.apis import NodeClaim
from karpy.apis.annotations import ANNOTATION_REQUESTED_DRA_DRIVERS
from karpy.apis.conditions import condition_is_true
from karpy.apis.labels import LABEL_INITIALIZED, LABEL_NODEPOOL
from karpy.apis.taints import UNREGISTERED_NO_EXECUTE_TAINT
from karpy.apis.v1.nodeclaim import CONDITION_INITIALIZED, CONDITION_REGISTERED
from karpy.controllers.indexes import Index, nodes_for_provider_id
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodeclaim.lifecycle._base import Outcome, conditions, log
from karpy.controllers.nodeclaim.lifecycle.registration import taint_matches
from karpy.runtime import Client, Clock
from karpy.runtime.kinds import NODE
from karpy.scheduling.resources import parse_quantity

__all__ = [
    "INITIALIZATION_POLL",
    "KNOWN_EPHEMERAL_TAINTS",
    "Initialization",
    "ephemeral_taint",
    "format_taint",
    "startup_taint",
    "unregistered_resource",
]

INITIALIZATION_POLL = 15.0
"""Seconds between looks at a registered Node that is not initialized yet (a backstop
for missed Node events)."""

#: Taints a node carries while it starts and that go away by themselves.
KNOWN_EPHEMERAL_TAINTS: tuple[Mapping[str, str], ...] = (
    {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
    {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true",
     "effect": "NoSchedule"},
    UNREGISTERED_NO_EXECUTE_TAINT.to_dict(),
)
#: Taint key prefixes of the same kind (the Node Readiness Controller's).
KNOWN_EPHEMERAL_TAINT_PREFIXES = ("readiness.k8s.io/",)


def format_taint(taint: Mapping[str, Any]) -> str:
    """``key=value:effect`` (``key:effect`` without a value), as kubectl prints taints."""
    value = taint.get("value")
    head = f"{taint.get('key')}={value}" if value else str(taint.get("key"))
    return f"{head}:{taint.get('effect')}"


def _taints(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


def startup_taint(node: Mapping[str, Any], nodeclaim: NodeClaim) -> Mapping[str, Any] | None:
    """A startup taint of the NodeClaim still on the Node, if any."""
    wanted = [t.to_dict() for t in nodeclaim.spec.startup_taints]
    return next((t for t in _taints(node) if any(taint_matches(w, t) for w in wanted)), None)


def ephemeral_taint(node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A known start-up taint still on the Node, if any."""
    for taint in _taints(node):
        if any(taint_matches(known, taint) for known in KNOWN_EPHEMERAL_TAINTS):
            return taint
        if str(taint.get("key", "")).startswith(KNOWN_EPHEMERAL_TAINT_PREFIXES):
            return taint
    return None


def unregistered_resource(node: Mapping[str, Any], nodeclaim: NodeClaim) -> str | None:
    """A resource the NodeClaim requested that the Node's allocatable does not show yet.

    The kubelet reports an extended resource as zero until its device plugin registers,
    so zero counts as missing.
    """
    allocatable: Mapping[str, Any] = (node.get("status") or {}).get("allocatable") or {}
    for name, quantity in nodeclaim.spec.resources.requests.items():
        if parse_quantity(quantity) == 0:
            continue
        if parse_quantity(allocatable.get(name, 0)) == 0:
            return name
    return None


class Initialization:
    """The initialization step (see the module docstring)."""

    def __init__(
        self, *, client: Client, index: Index, metrics: KarpenterMetrics, clock: Clock,
        dra_drivers_on: Callable[[str], frozenset[str]] | None = None,
    ) -> None:
        self._dra_drivers_on = dra_drivers_on
        """The drivers with ResourceSlices for a node (None: IGNORE_DRA_REQUESTS)."""
        self._client = client
        self._index = index
        self._metrics = metrics
        self._clock = clock

    async def reconcile(self, nodeclaim: NodeClaim) -> Outcome:
        """Mark the NodeClaim initialized once its Node is (see the module docstring)."""
        conds = conditions(nodeclaim, self._clock)
        initialized = conds.get(CONDITION_INITIALIZED)
        assert initialized is not None  # ConditionSet adds every dependent condition
        if initialized.status != "Unknown":
            conds.set(
                initialized.type, initialized.status, initialized.reason, initialized.message
            )
            return Outcome()
        if not conds.is_true(CONDITION_REGISTERED):
            return Outcome()
        nodes = nodes_for_provider_id(self._index, nodeclaim.status.provider_id)
        if len(nodes) != 1:
            conds.set_unknown(
                CONDITION_INITIALIZED, "NodeNotFound", "Node not registered with cluster"
            )
            return Outcome(requeue_after=INITIALIZATION_POLL)
        node = nodes[0]
        waiting = _waiting_for(node, nodeclaim) or self._waiting_for_drivers(node, nodeclaim)
        if waiting is not None:
            conds.set_unknown(CONDITION_INITIALIZED, *waiting)
            return Outcome(requeue_after=INITIALIZATION_POLL)
        name = node["metadata"]["name"]
        if (node["metadata"].get("labels") or {}).get(LABEL_INITIALIZED) != "true":
            await self._client.patch(
                NODE, name, {"metadata": {"labels": {LABEL_INITIALIZED: "true"}}}
            )
        allocatable = dict((node.get("status") or {}).get("allocatable") or {})
        log.info(
            "initialized nodeclaim",
            extra={
                "provider-id": nodeclaim.status.provider_id or "",
                "Node": {"name": name},
                "allocatable": allocatable,
            },
        )
        conds.set_true(CONDITION_INITIALIZED)
        self._metrics.nodeclaims_initialized.add(
            1, {"nodepool": nodeclaim.metadata.labels.get(LABEL_NODEPOOL, "")}
        )
        return Outcome()


    def _waiting_for_drivers(
        self, node: Mapping[str, Any], nodeclaim: NodeClaim
    ) -> tuple[str, str] | None:
        """Karpenter's draDriverPoolsPublished (v1.14.1): each driver the NodeClaim's
        requested-dra-drivers annotation names must have published a complete resource
        pool for the node (every slice of the pool's latest generation:
        :meth:`karpy.state.devices.DeviceIndex.drivers_on`)."""
        wanted = nodeclaim.metadata.annotations.get(ANNOTATION_REQUESTED_DRA_DRIVERS, "")
        if self._dra_drivers_on is None or not wanted.strip():
            return None
        published = self._dra_drivers_on(node["metadata"]["name"])
        for driver in (d.strip() for d in wanted.split(",")):
            if driver and driver not in published:
                return ("DRADriverPoolsNotPublished",
                        f'DRA driver "{driver}" has not published a complete resource pool')
        return None


def _waiting_for(node: Mapping[str, Any], nodeclaim: NodeClaim) -> tuple[str, str] | None:
    """(reason, message) of what the Node still lacks, or None when it is initialized."""
    if not condition_is_true(node, "Ready"):
        return "NodeNotReady", "Node status is NotReady"
    taint = startup_taint(node, nodeclaim)
    if taint is not None:
        return "StartupTaintsExist", f'StartupTaint "{format_taint(taint)}" still exists'
    taint = ephemeral_taint(node)
    if taint is not None:
        return (
            "KnownEphemeralTaintsExist",
            f'KnownEphemeralTaint "{format_taint(taint)}" still exists',
        )
    resource = unregistered_resource(node, nodeclaim)
    if resource is not None:
        return "ResourceNotRegistered", f'Resource "{resource}" was requested but not registered'
    return None
