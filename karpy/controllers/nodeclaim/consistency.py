"""``nodeclaim.consistency``: does the Node match what its NodeClaim expected?

Karpenter's ``nodeclaim/consistency`` with its one check, NodeShape: once a NodeClaim
is Initialized (and not being deleted), for every resource its
``spec.resources.requests`` names, the Node's ``status.capacity`` must be at least 90 %
of the NodeClaim's ``status.capacity`` (what the cloud provider said the instance type
has). A smaller node — a provider's catalogue that overstates memory, a kubelet that
reserves more than expected — means pods were packed for a machine that does not
exist. Each issue is logged ("failed consistency check") and recorded as a Warning
Event ``FailedConsistencyCheck`` on the NodeClaim with the issue as message, e.g.
``expected 16Gi of resource memory, but found 12Gi (75.0% of expected)``; the
NodeClaim's ``ConsistentStateFound`` condition turns False (reason
``ConsistencyCheckFailed``) while there are issues and True when there are none.
A NodeClaim is checked at most once every 10 minutes, as in Karpenter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy.apis import NodeClaim
from karpy.apis.conditions import condition_is_true
from karpy.apis.v1 import CONDITION_CONSISTENT_STATE_FOUND, CONDITION_INITIALIZED
from karpy.cloudprovider import CloudProvider
from karpy.controllers.nodeclaim._managed import is_managed_object
from karpy.controllers.nodeclaim._mergepatch import merge_patch
from karpy.controllers.nodeclaim.conditionevents import condition_transitions, record_transitions
from karpy.controllers.nodeclaim.lifecycle._base import conditions, log
from karpy.runtime import (
    Client,
    Clock,
    EventRecorder,
    Request,
    Result,
    errors,
    kinds,
    logging_context,
)
from karpy.scheduling import resources as res
from karpy.state.kinds import NODE_CLAIM

__all__ = ["SCAN_PERIOD", "Consistency", "node_shape_issues"]

SCAN_PERIOD: Final = 600.0
"""Seconds between two checks of one NodeClaim (Karpenter's scanPeriod)."""
_MIN_FRACTION: Final = 0.90


def node_shape_issues(nodeclaim: Mapping[str, Any], node: Mapping[str, Any]) -> list[str]:
    """Karpenter's NodeShape check: one message per requested resource the Node has less
    than 90 % of (none for a deleting or not yet Initialized NodeClaim)."""
    meta = nodeclaim.get("metadata") or {}
    if meta.get("deletionTimestamp") or not condition_is_true(nodeclaim, CONDITION_INITIALIZED):
        return []
    requests = ((nodeclaim.get("spec") or {}).get("resources") or {}).get("requests") or {}
    expected_all = (nodeclaim.get("status") or {}).get("capacity") or {}
    found_all = (node.get("status") or {}).get("capacity") or {}
    issues = []
    for name, requested in requests.items():
        expected = expected_all.get(name)
        if expected is None:
            continue
        try:
            want = res.to_canonical(name, expected)
            if res.to_canonical(name, requested) == 0 or want == 0:
                continue
            found = found_all.get(name)
            have = res.to_canonical(name, found) if found is not None else 0
        except ValueError:
            continue  # not a quantity: nothing to compare
        fraction = have / want
        if fraction < _MIN_FRACTION:
            issues.append(
                f"expected {expected} of resource {name}, but found {found or '0'} "
                f"({fraction * 100:.1f}% of expected)"
            )
    return issues


class Consistency:
    """The ``nodeclaim.consistency`` reconciler (see the module docs)."""

    name = "nodeclaim.consistency"

    def __init__(
        self,
        *,
        client: Client,
        cloud_provider: CloudProvider,
        recorder: EventRecorder,
        clock: Clock,
    ) -> None:
        self._client = client
        self._provider = cloud_provider
        self._recorder = recorder
        self._clock = clock
        self._scanned: dict[str, float] = {}  # uid -> monotonic time of the last check

    async def reconcile(self, request: Request) -> Result:
        """Check the NodeClaim's Node, at most once per scan period."""
        try:
            stored = await self._client.get(NODE_CLAIM, request.name)
        except errors.NotFound:
            return Result()
        if not is_managed_object(stored, self._provider):
            return Result()
        status = stored.get("status") or {}
        node_name = status.get("nodeName")
        if not status.get("providerID") or not node_name:
            return Result()
        uid = str(stored["metadata"].get("uid") or request.name)
        now = self._clock.monotonic()
        self._scanned = {u: t for u, t in self._scanned.items() if now - t < SCAN_PERIOD}
        last = self._scanned.get(uid)
        if last is not None:
            return Result(requeue_after=SCAN_PERIOD - (now - last))
        self._scanned[uid] = now
        try:
            node = await self._client.get(kinds.NODE, str(node_name))
        except errors.NotFound:
            return Result()
        with logging_context(NodeClaim={"name": request.name}, Node={"name": node_name}):
            issues = node_shape_issues(stored, node)
            for issue in issues:
                log.info("failed consistency check", extra={"issue": issue})
                self._recorder.warning(stored, "FailedConsistencyCheck", issue,
                                       dedupe_values=(str(uid), issue))
            return await self._write_condition(stored, issues, uid)

    async def _write_condition(
        self, stored: Mapping[str, Any], issues: list[str], uid: str
    ) -> Result:
        nodeclaim = NodeClaim.from_dict(dict(stored))
        conds = conditions(nodeclaim, self._clock)
        before = nodeclaim.to_dict()
        before_conditions = [c.model_copy() for c in nodeclaim.status.conditions]
        if issues:
            conds.set_false(CONDITION_CONSISTENT_STATE_FOUND, "ConsistencyCheckFailed",
                            "Consistency Check Failed")
        elif not conds.is_true(CONDITION_CONSISTENT_STATE_FOUND):
            conds.set_true(CONDITION_CONSISTENT_STATE_FOUND)
        after = nodeclaim.to_dict()
        patch = merge_patch(before.get("status") or {}, after.get("status") or {})
        if patch:
            try:
                await self._client.patch_status(NODE_CLAIM, stored["metadata"]["name"], {
                    "metadata": {"resourceVersion": stored["metadata"].get("resourceVersion")},
                    "status": patch,
                })
            except errors.NotFound:
                return Result()
            except errors.Conflict:
                self._scanned.pop(uid, None)  # check again at once
                return Result(requeue=True)
            record_transitions(self._recorder, after, condition_transitions(
                before_conditions, nodeclaim.status.conditions))
        return Result(requeue_after=SCAN_PERIOD)
