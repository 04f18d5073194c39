"""Registration: adopt the Node whose providerID is the NodeClaim's.

Karpenter's ``lifecycle/registration.go``: once a Node with the NodeClaim's providerID
exists, the NodeClaim's labels, annotations and taints (``spec.taints`` and
``spec.startupTaints``, unless the Node is labelled ``karpenter.sh/do-not-sync-taints``),
the ``karpenter.sh/termination`` finalizer and an owner reference to the NodeClaim are
written onto it; the ``karpenter.sh/unregistered:NoExecute`` taint that kept pods off
the half-made node is removed and ``karpenter.sh/registered=true`` set, in one patch
guarded by the Node's resourceVersion. The NodeClaim then records ``status.nodeName``
and Registered=True.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from karpy.apis import NodeClaim
from karpy.apis.annotations import FINALIZER_TERMINATION
from karpy.apis.labels import LABEL_DO_NOT_SYNC_TAINTS, LABEL_NODEPOOL, LABEL_REGISTERED, LABEL_ZONE
from karpy.apis.taints import TAINT_UNREGISTERED, UNREGISTERED_NO_EXECUTE_TAINT
from karpy.apis.v1.nodeclaim import CONDITION_REGISTERED
from karpy.controllers.indexes import Index, nodes_for_provider_id
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodeclaim._mergepatch import merge_patch
from karpy.controllers.nodeclaim.lifecycle._base import Outcome, conditions, log
from karpy.controllers.nodepool.registrationhealth import record_registration
from karpy.runtime import Client, Clock, EventRecorder, errors, thaw
from karpy.runtime.kinds import NODE
from karpy.state.registration_health import RegistrationHealth

__all__ = [
    "REGISTRATION_POLL",
    "Registration",
    "merge_taints",
    "sync_node",
    "taint_matches",
]

REGISTRATION_POLL = 15.0
"""Seconds between looks for the Node while it has not appeared (Node events usually
come first; this only bounds the wait if one is missed)."""

REASON_UNREGISTERED_TAINT_MISSING = "UnregisteredTaintMissing"


def taint_matches(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two taints are the same taint: same key and effect (value ignored), as
    core/v1 ``Taint.MatchTaint``."""
    return bool(a.get("key") == b.get("key") and a.get("effect") == b.get("effect"))


def merge_taints(
    existing: list[dict[str, Any]], extra: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``existing`` plus each taint of ``extra`` that matches none of them."""
    out = list(existing)
    for taint in extra:
        if not any(taint_matches(taint, t) for t in out):
            out.append(dict(taint))
    return out


_UNREGISTERED = UNREGISTERED_NO_EXECUTE_TAINT.to_dict()


class Registration:
    """The registration step (see the module docstring)."""

    def __init__(
        self,
        *,
        client: Client,
        index: Index,
        recorder: EventRecorder,
        metrics: KarpenterMetrics,
        clock: Clock,
        health: RegistrationHealth | None = None,
    ) -> None:
        self._client = client
        self._index = index
        self._recorder = recorder
        self._metrics = metrics
        self._clock = clock
        self._health = health if health is not None else RegistrationHealth()

    async def reconcile(self, nodeclaim: NodeClaim) -> Outcome:
        """Register the NodeClaim's Node, if it has appeared."""
        conds = conditions(nodeclaim, self._clock)
        registered = conds.get(CONDITION_REGISTERED)
        assert registered is not None  # ConditionSet adds every dependent condition
        if registered.status != "Unknown":
            conds.set(registered.type, registered.status, registered.reason, registered.message)
            return Outcome()
        provider_id = nodeclaim.status.provider_id
        nodes = nodes_for_provider_id(self._index, provider_id)
        if not nodes:
            conds.set_unknown(
                CONDITION_REGISTERED, "NodeNotFound", "Node not registered with cluster"
            )
            return Outcome(requeue_after=REGISTRATION_POLL)
        if len(nodes) > 1:
            conds.set_false(
                CONDITION_REGISTERED, "MultipleNodesFound",
                "Invariant violated, matched multiple nodes",
            )
            return Outcome()
        stored = nodes[0]
        node = thaw(stored)
        node_name = node["metadata"]["name"]
        labels: Mapping[str, str] = node["metadata"].get("labels") or {}
        taints: list[dict[str, Any]] = (node.get("spec") or {}).get("taints") or []
        if LABEL_REGISTERED not in labels and not any(
            taint_matches(t, _UNREGISTERED) for t in taints
        ):
            # Without the taint, pods could land on the node before karpy synced it.
            log.error(
                "node claim registration error",
                extra={
                    "error": "missing taint prevents registration-related race conditions "
                    "on Karpenter-managed nodes",
                    "taint": TAINT_UNREGISTERED,
                    "Node": {"name": node_name},
                },
            )
            self._recorder.warning(
                nodeclaim.to_dict(),
                REASON_UNREGISTERED_TAINT_MISSING,
                f"Missing {TAINT_UNREGISTERED} taint which prevents registration related "
                "race conditions on Karpenter-managed nodes",
                dedupe_values=(str(nodeclaim.metadata.uid or nodeclaim.metadata.name),),
            )
        try:
            await self._patch_node(stored, _registered(nodeclaim, node))
        except errors.Conflict:
            # The Node changed since the cache saw it (kwok or the kubelet writes its
            # status just after it appears). Read it live and try once more: a requeue
            # goes through the controller's 10/s rate limiter, which a thousand nodes
            # registering at once would turn into a queue of minutes.
            try:
                stored = await self._client.get(NODE, node_name, live=True)
                await self._patch_node(stored, _registered(nodeclaim, thaw(stored)))
            except (errors.Conflict, errors.NotFound):
                return Outcome(requeue=True)
        log.info(
            "registered nodeclaim",
            extra={"provider-id": provider_id or "", "Node": {"name": node_name}},
        )
        conds.set_true(CONDITION_REGISTERED)
        nodeclaim.status.node_name = node_name
        await self._record_health(nodeclaim)
        claim_labels = nodeclaim.metadata.labels
        pool = claim_labels.get(LABEL_NODEPOOL, "")
        self._metrics.nodeclaims_registered.add(1, {"nodepool": pool})
        self._metrics.nodes_created.add(
            1, {"nodepool": pool, "zone": claim_labels.get(LABEL_ZONE, "")}
        )
        return Outcome()

    async def _record_health(self, nodeclaim: NodeClaim) -> None:
        """The NodePool's NodeRegistrationHealthy (nodepool.registrationhealth); a failure
        to write it does not hold the NodeClaim back."""
        try:
            await record_registration(self._client, self._health, self._clock, nodeclaim,
                                      registered=True)
        except errors.ClientError as exc:
            log.warning("failed updating nodepool registration health",
                        extra={"error": str(exc)})

    async def _patch_node(self, stored: Mapping[str, Any], node: dict[str, Any]) -> None:
        patch = merge_patch(
            {"metadata": stored.get("metadata") or {}, "spec": stored.get("spec") or {}},
            {"metadata": node["metadata"], "spec": node["spec"]},
        )
        if not patch:
            return
        # Finalizers, owner references and taints are lists, replaced whole by a merge
        # patch: the resourceVersion makes the write fail rather than drop a concurrent edit.
        patch.setdefault("metadata", {})["resourceVersion"] = stored["metadata"].get(
            "resourceVersion"
        )
        await self._client.patch(NODE, node["metadata"]["name"], patch)


def _registered(nodeclaim: NodeClaim, node: dict[str, Any]) -> dict[str, Any]:
    """``node`` as registration leaves it: synced with the NodeClaim, without the
    unregistered taint, labelled registered."""
    sync_node(nodeclaim, node)
    node["spec"]["taints"] = [
        t for t in node["spec"].get("taints") or [] if not taint_matches(t, _UNREGISTERED)
    ]
    node["metadata"]["labels"][LABEL_REGISTERED] = "true"
    return node


def sync_node(nodeclaim: NodeClaim, node: dict[str, Any]) -> None:
    """Write the NodeClaim's finalizer, owner reference, taints, annotations and labels
    onto ``node`` (in memory). The NodeClaim's labels and annotations win."""
    meta = node.setdefault("metadata", {})
    finalizers = meta.setdefault("finalizers", []) or []
    if FINALIZER_TERMINATION not in finalizers:
        meta["finalizers"] = [*finalizers, FINALIZER_TERMINATION]
    owners = meta.get("ownerReferences") or []
    claim_uid = nodeclaim.metadata.uid
    if not any(
        o.get("apiVersion") == nodeclaim.api_version
        and o.get("kind") == nodeclaim.kind
        and o.get("uid") == claim_uid
        for o in owners
    ):
        meta["ownerReferences"] = [
            *owners,
            {
                "apiVersion": nodeclaim.api_version,
                "kind": nodeclaim.kind,
                "name": nodeclaim.metadata.name,
                "uid": claim_uid,
                "blockOwnerDeletion": True,
            },
        ]
    spec = node.setdefault("spec", {})
    labels = meta.get("labels") or {}
    if labels.get(LABEL_DO_NOT_SYNC_TAINTS) != "true":
        taints = spec.get("taints") or []
        taints = merge_taints(taints, (t.to_dict() for t in nodeclaim.spec.taints))
        taints = merge_taints(taints, (t.to_dict() for t in nodeclaim.spec.startup_taints))
        spec["taints"] = taints
    meta["annotations"] = {**(meta.get("annotations") or {}), **nodeclaim.metadata.annotations}
    meta["labels"] = {**labels, **nodeclaim.metadata.labels}
