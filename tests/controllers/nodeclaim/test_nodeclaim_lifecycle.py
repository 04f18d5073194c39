"""The nodeclaim.lifecycle parent: finalizer first, one write per reconcile, condition
Events, reading its own writes, and which Node events wake which NodeClaims."""

from __future__ import annotations

from nodeclaim_factories import node_manifest, nodeclaim_manifest

from karpy.apis.annotations import FINALIZER_TERMINATION
from karpy.apis.v1.nodeclaim import NodeClaimCondition
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.nodeclaim import LifecycleController
from karpy.controllers.nodeclaim._mergepatch import merge_patch
from karpy.controllers.nodeclaim.conditionevents import condition_transitions
from karpy.runtime import Request
from karpy.runtime.kinds import NODE
from karpy.runtime.testing import Call, FakeClient, FakeClock
from karpy.state.kinds import NODE_CLAIM

NAME = "default-abcde"
REQUEST = Request("", NAME)


def patches(kube: FakeClient) -> list[Call]:
    """The patches the fake received, in order (the controllers write by merge patch)."""
    return [c for c in kube.calls if c.verb == "patch"]


async def test_the_finalizer_is_added_with_a_lock_before_launching(
    kube: FakeClient, lifecycle: LifecycleController
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))
    await lifecycle.reconcile(REQUEST)
    first = patches(kube)[0]
    assert first.body["metadata"]["finalizers"] == [FINALIZER_TERMINATION]
    assert first.body["metadata"]["resourceVersion"]  # optimistic lock on the list


async def test_one_reconcile_writes_metadata_and_status_once_each(
    kube: FakeClient, lifecycle: LifecycleController
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME, finalizer=True))
    await lifecycle.reconcile(REQUEST)
    writes = [(c.kind, c.subresource) for c in patches(kube)]
    assert writes == [(NODE_CLAIM, ""), (NODE_CLAIM, "status")]
    metadata_patch = patches(kube)[0].body
    assert set(metadata_patch) == {"metadata"}
    assert set(metadata_patch["metadata"]) == {"labels"}  # only what changed


async def test_nothing_is_written_when_nothing_changed(
    kube: FakeClient, lifecycle: LifecycleController
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME, finalizer=True))
    await lifecycle.reconcile(REQUEST)
    await lifecycle.reconcile(REQUEST)  # waiting for the Node: a poll, no write
    before = len(patches(kube))
    await lifecycle.reconcile(REQUEST)
    assert len(patches(kube)) == before


async def test_every_condition_transition_records_karpenters_event(
    kube: FakeClient, lifecycle: LifecycleController, provider: FakeCloudProvider, events
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))
    await lifecycle.reconcile(REQUEST)
    pid = kube.peek(NODE_CLAIM, NAME)["status"]["providerID"]
    await kube.create(NODE, node_manifest("node-1", pid))
    await lifecycle.reconcile(REQUEST)

    messages = await events.messages(NAME)
    assert messages == [
        "Status condition transitioned, Type: Launched, Status: Unknown -> True, "
        "Reason: Launched",
        "Status condition transitioned, Type: Registered, Status: Unknown -> True, "
        "Reason: Registered",
        "Status condition transitioned, Type: Initialized, Status: Unknown -> True, "
        "Reason: Initialized",
        "Status condition transitioned, Type: Ready, Status: Unknown -> True, "
        "Reason: Ready",
    ]
    all_events = await events.all()
    assert [e["reason"] for e in all_events] == ["Launched", "Registered", "Initialized", "Ready"]
    assert {e["type"] for e in all_events} == {"Normal"}
    assert all(e["involvedObject"]["kind"] == "NodeClaim" for e in all_events)


async def test_a_stale_cached_nodeclaim_is_not_acted_on(
    kube: FakeClient, lifecycle: LifecycleController, provider: FakeCloudProvider, logs
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME, finalizer=True))
    stale = await kube.get(NODE_CLAIM, NAME)
    await lifecycle.reconcile(REQUEST)
    pid = kube.peek(NODE_CLAIM, NAME)["status"]["providerID"]
    await kube.create(NODE, node_manifest("node-1", pid))
    real_get = kube.get

    async def cache_lags(kind, name, **kw):
        return stale if kind == NODE_CLAIM else await real_get(kind, name, **kw)

    kube.get = cache_lags  # type: ignore[method-assign]
    result = await lifecycle.reconcile(REQUEST)
    kube.get = real_get  # type: ignore[method-assign]

    assert 0 < result.requeue_after <= 1.0
    assert len(provider.create_calls) == 1
    assert logs.messages("registered nodeclaim") == []
    await lifecycle.reconcile(REQUEST)  # the fresh copy arrives
    assert len(logs.messages("registered nodeclaim")) == 1


async def test_node_events_wake_the_nodeclaim_with_its_provider_id_until_initialized(
    kube: FakeClient, lifecycle: LifecycleController
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))
    await lifecycle.reconcile(REQUEST)
    pid = kube.peek(NODE_CLAIM, NAME)["status"]["providerID"]
    node = node_manifest("node-1", pid)
    assert list(lifecycle.nodeclaims_for_node(node)) == [REQUEST]
    assert list(lifecycle.nodeclaims_for_node(node_manifest("other", "fake://other"))) == []
    assert list(lifecycle.nodeclaims_for_node({"metadata": {"name": "x"}, "spec": {}})) == []
    await kube.create(NODE, node)
    await lifecycle.reconcile(REQUEST)
    assert list(lifecycle.nodeclaims_for_node(node)) == []  # initialized: heartbeats ignored


def test_merge_patch_sends_only_changes_and_nulls_removals() -> None:
    before = {"a": 1, "m": {"x": "1", "y": "2"}, "l": [1, 2], "gone": True}
    after = {"a": 1, "m": {"x": "1", "y": "3", "z": "4"}, "l": [1, 2, 3]}
    assert merge_patch(before, after) == {"m": {"y": "3", "z": "4"}, "l": [1, 2, 3], "gone": None}
    assert merge_patch(after, after) == {}


def test_a_condition_first_seen_counts_as_unknown(clock: FakeClock) -> None:
    def cond(type_: str, status: str) -> NodeClaimCondition:
        return NodeClaimCondition(type=type_, status=status, reason=type_,
                                  last_transition_time=clock.now())

    [t] = condition_transitions([], [cond("Launched", "True"), cond("Ready", "Unknown")])
    assert t.event_message == (
        "Status condition transitioned, Type: Launched, Status: Unknown -> True, Reason: Launched"
    )
    assert condition_transitions([cond("Ready", "True")], [cond("Ready", "True")]) == []


async def test_a_settled_nodeclaim_is_left_without_parsing_and_a_new_generation_is_not(
    kube: FakeClient, lifecycle: LifecycleController, monkeypatch
) -> None:
    from karpy.apis import NodeClaim
    from karpy.controllers.nodeclaim.lifecycle.controller import settled

    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))
    await lifecycle.reconcile(REQUEST)
    pid = kube.peek(NODE_CLAIM, NAME)["status"]["providerID"]
    await kube.create(NODE, node_manifest("node-1", pid))
    await lifecycle.reconcile(REQUEST)
    stored = kube.peek(NODE_CLAIM, NAME)
    assert settled(stored)

    parsed: list[str] = []
    real = NodeClaim.from_dict
    monkeypatch.setattr(NodeClaim, "from_dict", lambda data: (parsed.append("x"), real(data))[1])
    writes = len(patches(kube))
    await lifecycle.reconcile(REQUEST)
    assert parsed == [] and len(patches(kube)) == writes

    # A spec change (a new generation) needs the conditions re-stamped; a deletion
    # belongs to termination but the lifecycle forgets its launch: neither is settled.
    import copy

    newer = copy.deepcopy(dict(stored))
    newer["metadata"] = {**stored["metadata"], "generation": stored["metadata"]["generation"] + 1}
    assert not settled(newer)
    deleting = copy.deepcopy(dict(stored))
    deleting["metadata"] = {**stored["metadata"], "deletionTimestamp": "2024-01-01T00:00:00Z"}
    assert not settled(deleting)
    without_finalizer = copy.deepcopy(dict(stored))
    without_finalizer["metadata"] = {**stored["metadata"], "finalizers": []}
    assert not settled(without_finalizer)
