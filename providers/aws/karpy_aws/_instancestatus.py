"""The ``interruption.instancestatus`` controller: EC2's instance status checks and
scheduled events, polled with DescribeInstanceStatus (Karpenter AWS's
pkg/providers/instancestatus and pkg/controllers/interruption/instancestatus_controller.go).

Every minute, three DescribeInstanceStatus queries (EC2 ANDs filters of different names,
so one query per condition): instances whose *instance* status check is impaired, those
whose *system* status check is impaired, and those with a scheduled ``instance-reboot``,
``system-reboot``, ``system-maintenance``, ``instance-retirement`` or ``instance-stop``
event. A failed check counts once it has been failing for two minutes
(:data:`UNHEALTHY_THRESHOLD`); a scheduled event counts at once (the host is going
away). EBS status checks are ignored, as in Karpenter (a volume's failure may be a
pod's volume, not the node's).

Each (instance, category) is acted on through the interruption controller's handler
(:class:`karpy_aws._interruption_handler.InterruptionHandler`), with the category's kind as the
message kind (``instance_status``, ``system_status``, ``event_status``): an
``InstanceUnhealthy`` event on the NodeClaim and its Node, and the NodeClaim deleted
so that termination drains the node and provisioning replaces it. A failed instance or
system check first sets ``karpenter.sh/nodeclaim-termination-timestamp`` to now, so
termination does not wait for a graceful drain a broken instance cannot do. Instances
without a NodeClaim of this cluster are left alone. Log line ``detected unhealthy
instance owned by cluster`` and the counter
``karpenter_interruption_instance_status_unhealthy_total{category}`` once per
(instance, category) while it stays reported, as Karpenter's.

A DescribeInstanceStatus refused for want of permission (``UnauthorizedOperation``)
logs Karpenter's error once and turns the checks off until karpy restarts; other
errors are retried by the manager's backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from botocore.exceptions import ClientError
from opentelemetry.metrics import Meter

from karpy.runtime import Client, EventRecorder, Result
from karpy_aws._interruption_handler import InterruptionHandler, InterruptionParts
from karpy_aws._interruption_messages import EVENT_STATUS, INSTANCE_STATUS, SYSTEM_STATUS

__all__ = [
    "INSTANCE_STATUS_INTERVAL",
    "UNHEALTHY_THRESHOLD",
    "HealthStatus",
    "InstanceStatusController",
    "health_status",
    "unhealthy_instances",
]

log = logging.getLogger("karpy.aws.interruption")

INSTANCE_STATUS_INTERVAL: Final = 60.0
"""Seconds between polls (Karpenter's InstanceStatusInterval)."""
UNHEALTHY_THRESHOLD: Final = timedelta(seconds=120)
"""How long a status check must have been failing to count (Karpenter's)."""

#: category (as Karpenter names it, the metric's label) -> interruption message kind
CATEGORIES: Final = {
    "InstanceStatus": INSTANCE_STATUS,
    "SystemStatus": SYSTEM_STATUS,
    "EventStatus": EVENT_STATUS,
}
EVENT_CODES: Final = (
    "instance-reboot",
    "system-reboot",
    "system-maintenance",
    "instance-retirement",
    "instance-stop",
)
_QUERIES: Final = (
    [{"Name": "instance-status.status", "Values": ["impaired"]}],
    [{"Name": "system-status.status", "Values": ["impaired"]}],
    [{"Name": "event.code", "Values": list(EVENT_CODES)}],
)


@dataclass(frozen=True, slots=True)
class HealthStatus:
    """An instance that counts as unhealthy, and in which categories."""

    instance_id: str
    categories: frozenset[str]


def _failed_since(check: Mapping[str, Any] | None, now: datetime) -> bool:
    """Whether some detail of a status check has been failing for the threshold."""
    for detail in (check or {}).get("Details") or ():
        if detail.get("Status") != "failed":
            continue
        since = detail.get("ImpairedSince")
        # a failure of unknown start counts: EC2 always gives one for a failed check
        if not isinstance(since, datetime) or now - since >= UNHEALTHY_THRESHOLD:
            return True
    return False


def health_status(status: Mapping[str, Any], now: datetime) -> HealthStatus | None:
    """The categories in which one DescribeInstanceStatus entry counts as unhealthy
    (None when none does)."""
    categories = set()
    if _failed_since(status.get("InstanceStatus"), now):
        categories.add("InstanceStatus")
    if _failed_since(status.get("SystemStatus"), now):
        categories.add("SystemStatus")
    if any(e.get("Code") in EVENT_CODES for e in status.get("Events") or ()):
        categories.add("EventStatus")
    if not categories:
        return None
    return HealthStatus(str(status["InstanceId"]), frozenset(categories))


async def unhealthy_instances(ec2: Any, *, now: datetime) -> list[HealthStatus]:
    """Every instance of the account that counts as unhealthy (see the module doc)."""
    seen: dict[str, Mapping[str, Any]] = {}
    for filters in _QUERIES:
        paginator = ec2.get_paginator("describe_instance_status")
        async for page in paginator.paginate(Filters=filters):
            for status in page.get("InstanceStatuses") or ():
                seen.setdefault(str(status["InstanceId"]), status)
    found = (health_status(s, now) for s in seen.values())
    return [h for h in found if h is not None]


class InstanceStatusController:
    """Polls DescribeInstanceStatus and replaces unhealthy instances' NodeClaims (see
    the module doc). A singleton: ``reconcile()`` is one poll."""

    name = "interruption.instancestatus"

    def __init__(
        self,
        provider: InterruptionParts,
        client: Client,
        recorder: EventRecorder | None = None,
        *,
        meter: Meter | None = None,
    ) -> None:
        self._provider = provider
        self._handler = InterruptionHandler(provider, client, recorder)
        self._seen: set[tuple[str, str]] = set()
        self._disabled = False
        self._unhealthy = None
        if meter is not None:
            self._unhealthy = meter.create_counter(
                "karpenter_interruption_instance_status_unhealthy_total",
                description="Count of unique unhealthy instance statuses detected from EC2 "
                "DescribeInstanceStatus. Broken down by status check category.",
            )

    async def reconcile(self) -> Result:
        """One poll: act on every unhealthy instance that has a NodeClaim."""
        if self._disabled:
            return Result(requeue_after=INSTANCE_STATUS_INTERVAL)
        try:
            statuses = await unhealthy_instances(self._provider.clients.ec2, now=datetime.now(UTC))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "UnauthorizedOperation":
                raise
            log.error(
                "ec2:DescribeInstanceStatus permission is not allowed, update the IAM policy "
                "and restart the Karpenter deployment to enable instance status health checks",
                extra={"error": str(exc)},
            )
            self._disabled = True
            return Result(requeue_after=INSTANCE_STATUS_INTERVAL)
        current: set[tuple[str, str]] = set()
        for status in statuses:
            await self._handle(status, current)
        # an instance no longer reported counts again if it becomes unhealthy again
        self._seen &= current
        return Result(requeue_after=INSTANCE_STATUS_INTERVAL)

    async def _handle(self, status: HealthStatus, current: set[tuple[str, str]]) -> None:
        for category in sorted(status.categories):
            found = await self._handler.act(CATEGORIES[category], [status.instance_id])
            if found:
                self._record(status.instance_id, category, current)

    def _record(self, instance_id: str, category: str, current: set[tuple[str, str]]) -> None:
        key = (instance_id, category)
        current.add(key)
        if key in self._seen:
            return
        self._seen.add(key)
        log.info(
            "detected unhealthy instance owned by cluster",
            extra={"instanceID": instance_id, "category": category},
        )
        if self._unhealthy is not None:
            self._unhealthy.add(1, {"category": category})
