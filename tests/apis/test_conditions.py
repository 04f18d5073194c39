"""The status-condition helper keeps Ready in step and reports transitions the way
Karpenter's events word them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpy.apis.v1 import (
    CONDITION_DRIFTED,
    CONDITION_INITIALIZED,
    CONDITION_LAUNCHED,
    CONDITION_REGISTERED,
    NodeClaim,
)

CREATED = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.t = CREATED + timedelta(minutes=1)

    def now(self) -> datetime:
        return self.t

    def step(self, seconds: int = 10) -> None:
        self.t += timedelta(seconds=seconds)


def nodeclaim(generation: int = 1, **meta: Any) -> NodeClaim:
    return NodeClaim.model_validate(
        {
            "metadata": {
                "name": "default-x",
                "generation": generation,
                "creationTimestamp": CREATED.isoformat(),
                **meta,
            },
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                "requirements": [],
            },
        }
    )


def test_new_nodeclaim_starts_with_ready_and_dependents_unknown() -> None:
    claim = nodeclaim()
    conditions = claim.status_conditions(now=FakeClock().now)
    types = [c.type for c in claim.status.conditions]
    assert set(types) == {"Ready", CONDITION_LAUNCHED, CONDITION_REGISTERED, CONDITION_INITIALIZED}
    assert types[-1] == "Ready"  # root last
    assert all(c.status == "Unknown" for c in conditions.list())
    assert all(c.last_transition_time == CREATED for c in conditions.list())
    assert conditions.get(CONDITION_LAUNCHED).reason == "AwaitingReconciliation"  # type: ignore[union-attr]


def test_set_true_reports_the_transition_in_karpenters_words() -> None:
    clock = FakeClock()
    claim = nodeclaim()
    conditions = claim.status_conditions(now=clock.now)
    change = conditions.set_true(CONDITION_LAUNCHED)
    assert change
    (event,) = change.events
    assert event.event_message == (
        "Status condition transitioned, Type: Launched, Status: Unknown -> True, Reason: Launched"
    )
    launched = conditions.get(CONDITION_LAUNCHED)
    assert launched is not None
    assert launched.last_transition_time == clock.now()
    assert launched.observed_generation == 1


def test_setting_the_same_status_again_is_not_a_change() -> None:
    clock = FakeClock()
    conditions = nodeclaim().status_conditions(now=clock.now)
    conditions.set_true(CONDITION_LAUNCHED)
    first = conditions.get(CONDITION_LAUNCHED)
    clock.step()
    assert not conditions.set_true(CONDITION_LAUNCHED)
    assert conditions.get(CONDITION_LAUNCHED) == first


def test_a_new_message_modifies_without_transitioning() -> None:
    clock = FakeClock()
    conditions = nodeclaim().status_conditions(now=clock.now)
    conditions.set_false(CONDITION_LAUNCHED, "LaunchFailed", "no capacity")
    before = conditions.get(CONDITION_LAUNCHED)
    assert before is not None
    clock.step()
    change = conditions.set_false(CONDITION_LAUNCHED, "LaunchFailed", "still no capacity")
    assert change and not change.transitions
    after = conditions.get(CONDITION_LAUNCHED)
    assert after is not None
    assert after.last_transition_time == before.last_transition_time
    assert after.message == "still no capacity"


def test_ready_follows_the_dependents() -> None:
    clock = FakeClock()
    claim = nodeclaim()
    conditions = claim.status_conditions(now=clock.now)
    conditions.set_true(CONDITION_LAUNCHED)
    conditions.set_true(CONDITION_REGISTERED)
    ready = conditions.root_condition()
    assert (ready.status, ready.reason) == ("Unknown", "ReconcilingDependents")
    assert ready.message == "Initialized=Unknown"
    clock.step()
    change = conditions.set_true(CONDITION_INITIALIZED)
    assert [t.event_message for t in change.events] == [
        "Status condition transitioned, Type: Initialized, Status: Unknown -> True, "
        "Reason: Initialized",
        "Status condition transitioned, Type: Ready, Status: Unknown -> True, Reason: Ready",
    ]
    assert conditions.is_true("Ready")
    change = conditions.set_false(CONDITION_REGISTERED, "NodeGone", "the node was deleted")
    ready = conditions.root_condition()
    assert (ready.status, ready.reason, ready.message) == (
        "False",
        "UnhealthyDependents",
        "Registered=False",
    )
    assert change.events[0].event_message.endswith(", Message: the node was deleted")


def test_other_conditions_can_be_set_and_cleared_without_touching_ready() -> None:
    clock = FakeClock()
    conditions = nodeclaim().status_conditions(now=clock.now)
    change = conditions.set_true(CONDITION_DRIFTED, "NodePoolDrifted")
    assert change.transitions[0].old_status is None
    assert not change.events  # Karpenter only announces changes of conditions it saw before
    assert conditions.root_condition().status == "Unknown"
    assert conditions.clear(CONDITION_DRIFTED)
    assert conditions.get(CONDITION_DRIFTED) is None
    with pytest.raises(ValueError, match="Ready"):
        conditions.clear(CONDITION_LAUNCHED)


def test_conditions_serialize_to_what_the_api_server_stores() -> None:
    clock = FakeClock()
    claim = nodeclaim(generation=3)
    claim.status_conditions(now=clock.now).set_true(CONDITION_LAUNCHED)
    out = claim.to_dict()["status"]["conditions"]
    launched = next(c for c in out if c["type"] == "Launched")
    assert launched == {
        "type": "Launched",
        "status": "True",
        "observedGeneration": 3,
        "lastTransitionTime": "2024-05-01T12:01:00Z",
        "reason": "Launched",
        "message": "",
    }
    assert NodeClaim.model_validate(claim.to_dict()) == claim


def test_a_stale_generation_keeps_ready_unknown() -> None:
    clock = FakeClock()
    claim = nodeclaim(generation=1)
    conditions = claim.status_conditions(now=clock.now)
    for t in (CONDITION_LAUNCHED, CONDITION_REGISTERED, CONDITION_INITIALIZED):
        conditions.set_true(t)
    assert conditions.is_true("Ready")
    claim.metadata.generation = 2
    conditions = claim.status_conditions(now=clock.now)
    conditions.set_true(CONDITION_LAUNCHED)
    ready = conditions.root_condition()
    assert ready.status == "Unknown"
    assert "Registered=True" in ready.message
