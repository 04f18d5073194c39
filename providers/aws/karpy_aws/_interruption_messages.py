"""Parsing the EventBridge messages Karpenter's interruption queue receives (pure).

The queue gets, through EventBridge rules (see docs/providers/aws.md):

=============================================  ===========  =========================
detail-type (source)                           kind         what karpy does
=============================================  ===========  =========================
EC2 Spot Instance Interruption Warning (ec2)   spot_interrupted   delete the NodeClaim,
                                                                  mark the offering
EC2 Instance Rebalance Recommendation (ec2)    rebalance_recommendation  event only
EC2 Instance State-change Notification (ec2)   instance_stopped /  delete the NodeClaim
  state stopping, stopped / shutting-down,     instance_terminated
  terminated
AWS Health Event (health), EC2 scheduledChange scheduled_change   delete the NodeClaim
EC2 Capacity Reservation Instance              capacity_reservation_interrupted  delete
  Interruption Warning (ec2)                                      the NodeClaim, mark its
                                                                  reservation full
anything else                                  no_op        nothing
=============================================  ===========  =========================

A body that is not JSON (including JSON nested deeper than Python's recursion limit,
which json.loads refuses with RecursionError — a body of 256 KiB can nest 128 Ki
levels), or a known detail-type missing its instance IDs, raises
:class:`MalformedMessageError` and nothing else; the controller logs it and deletes the
message. Any other exception would leave the message on the queue, to come back after
every visibility timeout for ever.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from karpy.runtime import parse_time

__all__ = [
    "CAPACITY_RESERVATION_INTERRUPTED",
    "EVENT_STATUS",
    "INSTANCE_STATUS",
    "INSTANCE_STOPPED",
    "INSTANCE_TERMINATED",
    "NO_OP",
    "REBALANCE_RECOMMENDATION",
    "SCHEDULED_CHANGE",
    "SPOT_INTERRUPTED",
    "SYSTEM_STATUS",
    "InterruptionMessage",
    "MalformedMessageError",
    "parse_message",
]

SPOT_INTERRUPTED: Final = "spot_interrupted"
REBALANCE_RECOMMENDATION: Final = "rebalance_recommendation"
SCHEDULED_CHANGE: Final = "scheduled_change"
INSTANCE_STOPPED: Final = "instance_stopped"
INSTANCE_TERMINATED: Final = "instance_terminated"
NO_OP: Final = "no_op"
#: an interruptible capacity reservation's owner takes its instances back
CAPACITY_RESERVATION_INTERRUPTED: Final = "capacity_reservation_interrupted"
#: kinds of the DescribeInstanceStatus health checks (karpy_aws._instancestatus)
INSTANCE_STATUS: Final = "instance_status"
SYSTEM_STATUS: Final = "system_status"
EVENT_STATUS: Final = "event_status"


class MalformedMessageError(ValueError):
    """A queue message karpy cannot read; the text says what is wrong with it."""


@dataclass(frozen=True, slots=True)
class InterruptionMessage:
    """One parsed message: its kind, the instances it is about, and when it was sent."""

    kind: str
    instance_ids: tuple[str, ...]
    time: datetime | None
    id: str = ""
    detail_type: str = ""


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _instance(detail: dict[str, Any], detail_type: str) -> tuple[str, ...]:
    found = detail.get("instance-id")
    if not isinstance(found, str) or not found.startswith("i-"):
        raise MalformedMessageError(f"{detail_type!r} message has no detail.instance-id")
    return (found,)


def parse_message(body: str) -> InterruptionMessage:
    """Parse an SQS message body; raises MalformedMessageError."""
    if not body:
        return InterruptionMessage(NO_OP, (), None)
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise MalformedMessageError(f"message body is not JSON: {exc}") from exc
    except RecursionError as exc:
        raise MalformedMessageError("message body is JSON nested too deeply to read") from exc
    if not isinstance(data, dict):
        raise MalformedMessageError("message body is not a JSON object")
    # Only strings are read from the envelope: str() of a deeply nested value would
    # recurse as deeply as the parser did.
    detail_type = _text(data.get("detail-type"))
    source = _text(data.get("source"))
    detail = data.get("detail")
    sent = _time(data.get("time"))
    ident = _text(data.get("id"))

    def message(kind: str, ids: tuple[str, ...]) -> InterruptionMessage:
        return InterruptionMessage(kind, ids, sent, ident, detail_type)

    if source not in ("aws.ec2", "aws.health"):
        return message(NO_OP, ())
    if not isinstance(detail, dict):
        raise MalformedMessageError(f"{detail_type!r} message has no detail object")
    if source == "aws.ec2" and detail_type == "EC2 Spot Instance Interruption Warning":
        return message(SPOT_INTERRUPTED, _instance(detail, detail_type))
    if source == "aws.ec2" and detail_type == (
        "EC2 Capacity Reservation Instance Interruption Warning"
    ):
        return message(CAPACITY_RESERVATION_INTERRUPTED, _instance(detail, detail_type))
    if source == "aws.ec2" and detail_type == "EC2 Instance Rebalance Recommendation":
        return message(REBALANCE_RECOMMENDATION, _instance(detail, detail_type))
    if source == "aws.ec2" and detail_type == "EC2 Instance State-change Notification":
        state = _text(detail.get("state"))
        ids = _instance(detail, detail_type)
        if state in ("stopping", "stopped"):
            return message(INSTANCE_STOPPED, ids)
        if state in ("shutting-down", "terminated"):
            return message(INSTANCE_TERMINATED, ids)
        return message(NO_OP, ids)
    if source == "aws.health" and detail_type == "AWS Health Event":
        if detail.get("service") != "EC2" or detail.get("eventTypeCategory") != "scheduledChange":
            return message(NO_OP, ())
        entities = detail.get("affectedEntities")
        if not isinstance(entities, list):
            raise MalformedMessageError("AWS Health Event has no detail.affectedEntities list")
        ids = tuple(
            value
            for e in entities
            if isinstance(e, dict) and (value := _text(e.get("entityValue"))).startswith("i-")
        )
        return message(SCHEDULED_CHANGE, ids)
    return message(NO_OP, ())
