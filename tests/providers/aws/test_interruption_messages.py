"""Parsing interruption-queue messages: every kind Karpenter acts on, and bad input
that must raise MalformedMessageError (never anything else)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from karpy_aws._interruption_messages import (
    INSTANCE_STOPPED,
    INSTANCE_TERMINATED,
    NO_OP,
    REBALANCE_RECOMMENDATION,
    SCHEDULED_CHANGE,
    SPOT_INTERRUPTED,
    MalformedMessageError,
    parse_message,
)

KINDS = {
    INSTANCE_STOPPED,
    INSTANCE_TERMINATED,
    NO_OP,
    REBALANCE_RECOMMENDATION,
    SCHEDULED_CHANGE,
    SPOT_INTERRUPTED,
}


def event(detail_type: str, detail: Any, source: str = "aws.ec2") -> str:
    return json.dumps(
        {
            "version": "0",
            "id": "7c5a1d33-1111-2222-3333-444455556666",
            "detail-type": detail_type,
            "source": source,
            "account": "123456789012",
            "time": "2026-11-23T19:00:00Z",
            "region": "us-east-1",
            "resources": [],
            "detail": detail,
        }
    )


@pytest.mark.parametrize(
    ("body", "kind", "ids"),
    [
        (
            event(
                "EC2 Spot Instance Interruption Warning",
                {"instance-id": "i-0abc", "instance-action": "terminate"},
            ),
            SPOT_INTERRUPTED,
            ("i-0abc",),
        ),
        (
            event("EC2 Instance Rebalance Recommendation", {"instance-id": "i-0abc"}),
            REBALANCE_RECOMMENDATION,
            ("i-0abc",),
        ),
        (
            event(
                "EC2 Instance State-change Notification",
                {"instance-id": "i-1", "state": "stopping"},
            ),
            INSTANCE_STOPPED,
            ("i-1",),
        ),
        (
            event(
                "EC2 Instance State-change Notification",
                {"instance-id": "i-1", "state": "terminated"},
            ),
            INSTANCE_TERMINATED,
            ("i-1",),
        ),
        (
            event(
                "EC2 Instance State-change Notification", {"instance-id": "i-1", "state": "running"}
            ),
            NO_OP,
            ("i-1",),
        ),
        (
            event(
                "AWS Health Event",
                {
                    "service": "EC2",
                    "eventTypeCategory": "scheduledChange",
                    "affectedEntities": [{"entityValue": "i-1"}, {"entityValue": "i-2"}],
                },
                source="aws.health",
            ),
            SCHEDULED_CHANGE,
            ("i-1", "i-2"),
        ),
        (
            event(
                "AWS Health Event",
                {"service": "EC2", "eventTypeCategory": "issue"},
                source="aws.health",
            ),
            NO_OP,
            (),
        ),
        (event("Something Else", {}, source="aws.s3"), NO_OP, ()),
        ("", NO_OP, ()),
    ],
)
def test_kinds(body: str, kind: str, ids: tuple[str, ...]) -> None:
    parsed = parse_message(body)
    assert (parsed.kind, parsed.instance_ids) == (kind, ids)


def test_time_is_read() -> None:
    parsed = parse_message(event("EC2 Spot Instance Interruption Warning", {"instance-id": "i-1"}))
    assert parsed.time is not None
    assert parsed.time.isoformat() == "2026-11-23T19:00:00+00:00"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (event("EC2 Spot Instance Interruption Warning", {}), "no detail.instance-id"),
        (event("EC2 Spot Instance Interruption Warning", "text"), "no detail object"),
        (
            event(
                "AWS Health Event",
                {"service": "EC2", "eventTypeCategory": "scheduledChange"},
                source="aws.health",
            ),
            "affectedEntities",
        ),
    ],
)
def test_malformed_messages_say_what_is_wrong(body: str, needle: str) -> None:
    with pytest.raises(MalformedMessageError, match=needle):
        parse_message(body)


DEEP = 40_000  # far past the recursion limit; each body below fits in SQS's 256 KiB


@pytest.mark.parametrize(
    "body",
    [
        "[" * DEEP + "]" * DEEP,
        '{"a":' * DEEP + "1" + "}" * DEEP,
        # Deep values inside an otherwise valid spot warning: the envelope's fields too.
        '{"source": "aws.ec2", "detail-type": ' + "[" * DEEP + "]" * DEEP + "}",
        '{"source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning", '
        '"detail": {"instance-id": ' + "[" * DEEP + "]" * DEEP + "}}",
    ],
    ids=["array", "object", "in-detail-type", "in-instance-id"],
)
def test_deeply_nested_bodies_are_malformed_not_a_crash(body: str) -> None:
    """json.loads raises RecursionError (not a ValueError) past Python's recursion
    limit; that must come out as MalformedMessageError, so the controller deletes the
    message instead of seeing it every visibility timeout for ever."""
    assert len(body.encode()) <= 256 * 1024
    with pytest.raises(MalformedMessageError, match="nested too deeply"):
        parse_message(body)


@given(st.text())
def test_any_text_parses_or_is_malformed(body: str) -> None:
    try:
        parsed = parse_message(body)
    except MalformedMessageError:
        return
    assert parsed.kind == NO_OP


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(
    detail_type=st.sampled_from(
        [
            "EC2 Spot Instance Interruption Warning",
            "EC2 Instance Rebalance Recommendation",
            "EC2 Instance State-change Notification",
            "AWS Health Event",
        ]
    ),
    source=st.sampled_from(["aws.ec2", "aws.health"]),
    detail=json_values,
)
def test_any_event_shape_parses_or_is_malformed(detail_type: str, source: str, detail: Any) -> None:
    try:
        parsed = parse_message(event(detail_type, detail, source=source))
    except MalformedMessageError:
        return
    assert parsed.kind in KINDS
    assert all(i.startswith("i-") for i in parsed.instance_ids)
