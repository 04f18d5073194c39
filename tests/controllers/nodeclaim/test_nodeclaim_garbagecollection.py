"""nodeclaim.garbagecollection: leaked machines and NodeClaims whose machine vanished."""

from __future__ import annotations

from nodeclaim_factories import node_manifest, nodeclaim_manifest

from karpy.apis import NodeClaim
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.nodeclaim import GarbageCollector, LifecycleController
from karpy.controllers.settings import Settings
from karpy.runtime import Request
from karpy.runtime.kinds import NODE
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.kinds import NODE_CLAIM


async def leak(provider: FakeCloudProvider, name: str = "leaked") -> str:
    """A machine launched for a NodeClaim that no longer exists; returns its providerID."""
    machine = await provider.create(NodeClaim.from_dict(nodeclaim_manifest(name)))
    return str(machine.status.provider_id)


async def test_a_leaked_machine_is_deleted_after_the_grace_period(
    kube: FakeClient, provider: FakeCloudProvider, collector: GarbageCollector,
    clock: FakeClock, settings: Settings, logs,
) -> None:
    pid = await leak(provider)
    await kube.create(NODE, node_manifest("leaked-node", pid))

    result = await collector.reconcile()
    assert pid in provider.instances  # too young to tell from a launch in flight
    assert result.requeue_after <= settings.garbage_collection_grace

    clock.advance(settings.garbage_collection_grace)
    await collector.reconcile()

    assert pid not in provider.instances
    assert [nc.status.provider_id for nc in provider.delete_calls] == [pid]
    assert kube.peek(NODE, "leaked-node") is None
    [line] = logs.messages("garbage collected cloudprovider instance")
    assert line["provider-id"] == pid
    assert logs.messages("garbage collected node")[0]["Node"] == {"name": "leaked-node"}


async def test_a_new_leader_collects_a_machine_leaked_before_it_led_at_once(
    kube: FakeClient, provider: FakeCloudProvider, collector: GarbageCollector,
    clock: FakeClock, settings: Settings,
) -> None:
    """A leader killed between the cloud create and the status write leaves a machine no
    NodeClaim carries. The next leader's first round counts it as unclaimed since it was
    created (Karpenter's age rule): otherwise every failover restarts the grace and the
    doubled machine lives as long as leaders keep dying."""
    pid = await leak(provider)
    # the cloud reports when it launched the machine (LaunchTime, timeCreated ...)
    provider.instances[pid].metadata.creation_timestamp = clock.now()
    clock.advance(settings.garbage_collection_grace)  # the old leader died meanwhile
    await collector.reconcile()  # this process's first round
    assert pid not in provider.instances
    # later rounds trust only what they saw unclaimed for the whole grace
    young = await leak(provider, "leaked-later")
    provider.instances[young].metadata.creation_timestamp = clock.now()
    clock.advance(settings.garbage_collection_grace)
    await collector.reconcile()
    assert young in provider.instances


async def test_a_machine_claimed_meanwhile_is_not_deleted(
    kube: FakeClient, provider: FakeCloudProvider, collector: GarbageCollector,
    lifecycle: LifecycleController, clock: FakeClock, settings: Settings,
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest("default-abcde"))
    await lifecycle.reconcile(Request("", "default-abcde"))  # launched, providerID written
    await collector.reconcile()
    clock.advance(settings.garbage_collection_grace * 5)
    await collector.reconcile()
    assert len(provider.instances) == 1
    assert provider.delete_calls == []


async def test_the_live_list_saves_a_machine_the_cache_has_not_seen_claimed(
    kube: FakeClient, provider: FakeCloudProvider, collector: GarbageCollector,
    clock: FakeClock, settings: Settings,
) -> None:
    pid = await leak(provider, "default-abcde")
    await collector.reconcile()
    clock.advance(settings.garbage_collection_grace)
    claim = nodeclaim_manifest("default-abcde")
    claim["status"] = {"providerID": pid}
    await kube.create(NODE_CLAIM, claim)
    real_list = kube.list
    live_lists = 0

    async def cache_lags(kind, *, live=False, **kw):
        nonlocal live_lists
        live_lists += live
        found = await real_list(kind, live=live, **kw)
        return found if live or kind != NODE_CLAIM else []

    kube.list = cache_lags  # type: ignore[method-assign]
    await collector.reconcile()
    assert provider.delete_calls == []
    assert live_lists == 1


async def test_a_nodeclaim_whose_machine_vanished_is_deleted(
    kube: FakeClient, provider: FakeCloudProvider, collector: GarbageCollector,
    lifecycle: LifecycleController, logs, metrics,
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest("default-abcde"))
    await lifecycle.reconcile(Request("", "default-abcde"))
    pid = kube.peek(NODE_CLAIM, "default-abcde")["status"]["providerID"]
    await kube.create(NODE, node_manifest("node-1", pid, ready=False))
    await lifecycle.reconcile(Request("", "default-abcde"))
    provider.instances.clear()  # the machine was terminated behind karpy's back

    await collector.reconcile()

    assert kube.peek(NODE_CLAIM, "default-abcde")["metadata"].get("deletionTimestamp")
    [line] = logs.messages("garbage collecting nodeclaim with no cloudprovider representation")
    assert line["NodeClaim"] == {"name": "default-abcde"}
    assert line["Node"] == {"name": "node-1"}
    assert line["provider-id"] == pid
    assert metrics.value("karpenter_nodeclaims_disrupted_total", reason="garbage_collected") == 1


async def test_a_launched_nodeclaim_not_yet_registered_is_not_collected(
    kube: FakeClient, provider: FakeCloudProvider, collector: GarbageCollector,
    lifecycle: LifecycleController, clock: FakeClock, settings: Settings,
) -> None:
    """EC2 is eventually consistent: an instance RunInstances just returned may be missing
    from DescribeInstances (list and get alike) for a while. Only registered NodeClaims
    are collected, as in Karpenter; the registration timeout handles the rest."""
    await kube.create(NODE_CLAIM, nodeclaim_manifest("default-abcde"))
    await lifecycle.reconcile(Request("", "default-abcde"))  # launched, not registered
    hidden = dict(provider.instances)
    provider.instances.clear()  # not listed (nor found) yet

    for _ in range(3):
        await collector.reconcile()
        clock.advance(settings.garbage_collection_period)

    assert not kube.peek(NODE_CLAIM, "default-abcde")["metadata"].get("deletionTimestamp")
    provider.instances.update(hidden)  # now the cloud shows it: nothing was lost
    await collector.reconcile()
    assert provider.delete_calls == []


async def test_a_ready_node_keeps_its_nodeclaim_even_if_the_cloud_forgot_it(
    kube: FakeClient, provider: FakeCloudProvider, collector: GarbageCollector,
    lifecycle: LifecycleController,
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest("default-abcde"))
    await lifecycle.reconcile(Request("", "default-abcde"))
    pid = kube.peek(NODE_CLAIM, "default-abcde")["status"]["providerID"]
    await kube.create(NODE, node_manifest("node-1", pid, ready=True))
    provider.instances.clear()
    await collector.reconcile()
    assert not kube.peek(NODE_CLAIM, "default-abcde")["metadata"].get("deletionTimestamp")


async def test_a_machine_listed_late_but_found_by_get_keeps_its_nodeclaim(
    kube: FakeClient, provider: FakeCloudProvider, collector: GarbageCollector,
    lifecycle: LifecycleController,
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest("default-abcde"))
    await lifecycle.reconcile(Request("", "default-abcde"))
    pid = kube.peek(NODE_CLAIM, "default-abcde")["status"]["providerID"]
    await kube.create(NODE, node_manifest("node-1", pid, ready=False))
    await lifecycle.reconcile(Request("", "default-abcde"))  # registered: a suspect
    real_list = provider.list

    async def eventually_consistent():
        return []

    provider.list = eventually_consistent  # type: ignore[method-assign]
    await collector.reconcile()
    provider.list = real_list  # type: ignore[method-assign]
    assert not kube.peek(NODE_CLAIM, "default-abcde")["metadata"].get("deletionTimestamp")
    assert provider.get_calls  # it asked before deciding


async def test_only_the_nodeclaims_whose_machine_vanished_are_parsed(
    kube: FakeClient, provider: FakeCloudProvider, collector: GarbageCollector,
    lifecycle: LifecycleController, monkeypatch,
) -> None:
    names = [f"default-{i:05d}" for i in range(12)]
    for number, name in enumerate(names):
        await kube.create(NODE_CLAIM, nodeclaim_manifest(name))
        await lifecycle.reconcile(Request("", name))
        pid = kube.peek(NODE_CLAIM, name)["status"]["providerID"]
        await kube.create(NODE, node_manifest(f"node-{number}", pid, ready=False))
        await lifecycle.reconcile(Request("", name))  # registered
    gone = kube.peek(NODE_CLAIM, names[0])["status"]["providerID"]
    provider.instances.pop(gone)  # one machine terminated behind karpy's back

    parsed: list[str] = []
    real = NodeClaim.from_dict
    monkeypatch.setattr(NodeClaim, "from_dict", lambda data: (
        parsed.append(data["metadata"]["name"]), real(data))[1])
    await collector.reconcile()

    assert parsed == [names[0]]
    assert kube.peek(NODE_CLAIM, names[0])["metadata"].get("deletionTimestamp")
    assert not any(kube.peek(NODE_CLAIM, n)["metadata"].get("deletionTimestamp")
                   for n in names[1:])
