"""The registration and initialization steps of nodeclaim.lifecycle."""

from __future__ import annotations

from nodeclaim_factories import node_manifest, nodeclaim_manifest

from karpy.apis.annotations import FINALIZER_TERMINATION
from karpy.controllers.nodeclaim import LifecycleController
from karpy.runtime import Request
from karpy.runtime.kinds import NODE
from karpy.runtime.testing import FakeClient
from karpy.state.kinds import NODE_CLAIM

NAME = "default-abcde"
REQUEST = Request("", NAME)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
STARTUP_TAINT = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}


def condition(obj: dict, type_: str) -> dict:
    return next(c for c in obj["status"]["conditions"] if c["type"] == type_)


async def launch(kube: FakeClient, lifecycle: LifecycleController, **manifest) -> str:
    """Create and launch the NodeClaim; return its providerID."""
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME, **manifest))
    await lifecycle.reconcile(REQUEST)
    return str(kube.peek(NODE_CLAIM, NAME)["status"]["providerID"])


async def test_without_a_node_registered_waits_and_polls(
    kube: FakeClient, lifecycle: LifecycleController
) -> None:
    await launch(kube, lifecycle)
    result = await lifecycle.reconcile(REQUEST)
    registered = condition(kube.peek(NODE_CLAIM, NAME), "Registered")
    assert (registered["status"], registered["reason"]) == ("Unknown", "NodeNotFound")
    assert registered["message"] == "Node not registered with cluster"
    assert 0 < result.requeue_after <= 15


async def test_registration_syncs_the_nodeclaim_onto_its_node(
    kube: FakeClient, lifecycle: LifecycleController, logs, metrics
) -> None:
    pid = await launch(
        kube, lifecycle, labels={"team": "a"}, annotations={"example.com/owner": "me"},
        taints=[GPU_TAINT], startup_taints=[STARTUP_TAINT],
    )
    await kube.create(NODE, node_manifest("node-1", pid, ready=False))

    await lifecycle.reconcile(REQUEST)

    node = kube.peek(NODE, "node-1")
    meta = node["metadata"]
    assert meta["labels"]["karpenter.sh/registered"] == "true"
    assert meta["labels"]["team"] == "a"
    assert meta["labels"]["node.kubernetes.io/instance-type"] == "small-instance-type"
    assert meta["labels"]["kubernetes.io/hostname"] == "node-1"  # the kubelet's stays
    assert meta["annotations"]["example.com/owner"] == "me"
    assert meta["finalizers"] == [FINALIZER_TERMINATION]
    [owner] = meta["ownerReferences"]
    claim = kube.peek(NODE_CLAIM, NAME)
    assert owner == {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": NAME,
        "uid": claim["metadata"]["uid"], "blockOwnerDeletion": True,
    }
    taint_keys = [t["key"] for t in node["spec"]["taints"]]
    assert taint_keys == ["nvidia.com/gpu", "example.com/agent-not-ready"]
    assert claim["status"]["nodeName"] == "node-1"
    assert condition(claim, "Registered")["status"] == "True"
    # not Ready yet, so not initialized
    initialized = condition(claim, "Initialized")
    assert (initialized["status"], initialized["reason"]) == ("Unknown", "NodeNotReady")

    [line] = logs.messages("registered nodeclaim")
    assert line["NodeClaim"] == {"name": NAME}
    assert line["provider-id"] == pid
    assert line["Node"] == {"name": "node-1"}
    assert metrics.value("karpenter_nodeclaims_registered_total", nodepool="default") == 1
    assert metrics.value("karpenter_nodes_created_total", nodepool="default") == 1


async def test_the_node_patch_is_guarded_by_its_resource_version(
    kube: FakeClient, lifecycle: LifecycleController
) -> None:
    pid = await launch(kube, lifecycle)
    await kube.create(NODE, node_manifest("node-1", pid))
    cached = await kube.get(NODE, "node-1")  # what the cache still holds ...
    await kube.patch(NODE, "node-1", {"metadata": {"labels": {"someone": "else"}}})  # ... then
    real_by_index = kube.by_index
    kube.by_index = (  # type: ignore[method-assign]
        lambda kind, index, value: [cached] if kind == NODE else real_by_index(kind, index, value)
    )

    result = await lifecycle.reconcile(REQUEST)

    # conflict: read the Node live and try again; the concurrent edit is kept
    labels = kube.peek(NODE, "node-1")["metadata"]["labels"]
    assert labels["someone"] == "else"
    assert labels["karpenter.sh/registered"] == "true"
    assert not result.requeue


async def test_a_node_that_keeps_changing_is_left_for_a_rate_limited_retry(
    kube: FakeClient, lifecycle: LifecycleController, monkeypatch
) -> None:
    pid = await launch(kube, lifecycle)
    await kube.create(NODE, node_manifest("node-1", pid))
    patch = kube.patch
    writes = iter(range(1_000_000))

    async def racing(kind, name, body, **kw):  # someone writes the Node before each patch
        if kind == NODE:
            await patch(NODE, name, {"metadata": {"annotations": {"n": str(next(writes))}}})
        return await patch(kind, name, body, **kw)

    monkeypatch.setattr(kube, "patch", racing)

    result = await lifecycle.reconcile(REQUEST)

    assert result.requeue  # two conflicts in a row: back off through the rate limiter
    assert "karpenter.sh/registered" not in kube.peek(NODE, "node-1")["metadata"]["labels"]
    assert condition(kube.peek(NODE_CLAIM, NAME), "Registered")["status"] == "Unknown"


async def test_do_not_sync_taints_leaves_the_node_taints_alone(
    kube: FakeClient, lifecycle: LifecycleController
) -> None:
    pid = await launch(kube, lifecycle, taints=[GPU_TAINT])
    await kube.create(
        NODE, node_manifest("node-1", pid, labels={"karpenter.sh/do-not-sync-taints": "true"})
    )
    await lifecycle.reconcile(REQUEST)
    node = kube.peek(NODE, "node-1")
    assert node["spec"]["taints"] == []  # the unregistered taint went, nothing was added
    assert node["metadata"]["labels"]["karpenter.sh/registered"] == "true"


async def test_a_node_without_the_unregistered_taint_is_reported(
    kube: FakeClient, lifecycle: LifecycleController, events, logs
) -> None:
    pid = await launch(kube, lifecycle)
    await kube.create(NODE, node_manifest("node-1", pid, unregistered_taint=False))
    await lifecycle.reconcile(REQUEST)
    assert "UnregisteredTaintMissing" in await events.reasons(NAME)
    [line] = logs.messages("node claim registration error")
    assert line["taint"] == "karpenter.sh/unregistered"
    assert condition(kube.peek(NODE_CLAIM, NAME), "Registered")["status"] == "True"


async def test_two_nodes_with_one_provider_id_fail_registration(
    kube: FakeClient, lifecycle: LifecycleController
) -> None:
    pid = await launch(kube, lifecycle)
    await kube.create(NODE, node_manifest("node-1", pid))
    await kube.create(NODE, node_manifest("node-2", pid))
    await lifecycle.reconcile(REQUEST)
    registered = condition(kube.peek(NODE_CLAIM, NAME), "Registered")
    assert (registered["status"], registered["reason"]) == ("False", "MultipleNodesFound")
    assert condition(kube.peek(NODE_CLAIM, NAME), "Ready")["status"] == "False"


async def test_initialization_waits_for_ready_startup_taints_and_resources(
    kube: FakeClient, lifecycle: LifecycleController, logs, metrics
) -> None:
    pid = await launch(
        kube, lifecycle, requests={"cpu": "1", "nvidia.com/gpu": "1"},
        startup_taints=[STARTUP_TAINT],
    )
    await kube.create(NODE, node_manifest(
        "node-1", pid, ready=False,
        taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}],
    ))

    def initialized() -> dict:
        return condition(kube.peek(NODE_CLAIM, NAME), "Initialized")

    await lifecycle.reconcile(REQUEST)
    assert initialized()["reason"] == "NodeNotReady"

    node = kube.peek(NODE, "node-1")
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    await lifecycle.reconcile(REQUEST)
    assert initialized()["reason"] == "StartupTaintsExist"
    assert initialized()["message"] == (
        'StartupTaint "example.com/agent-not-ready:NoSchedule" still exists'
    )

    node["spec"]["taints"] = [t for t in node["spec"]["taints"] if t != STARTUP_TAINT]
    await lifecycle.reconcile(REQUEST)
    assert initialized()["reason"] == "KnownEphemeralTaintsExist"

    node["spec"]["taints"] = []
    await lifecycle.reconcile(REQUEST)
    assert initialized()["reason"] == "ResourceNotRegistered"
    assert initialized()["message"] == 'Resource "nvidia.com/gpu" was requested but not registered'
    assert logs.messages("initialized nodeclaim") == []

    node["status"]["allocatable"]["nvidia.com/gpu"] = "2"
    await lifecycle.reconcile(REQUEST)

    claim = kube.peek(NODE_CLAIM, NAME)
    assert initialized()["status"] == "True"
    ready = condition(claim, "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Ready")
    assert kube.peek(NODE, "node-1")["metadata"]["labels"]["karpenter.sh/initialized"] == "true"
    [line] = logs.messages("initialized nodeclaim")
    assert line["NodeClaim"] == {"name": NAME}
    assert line["provider-id"] == pid
    assert line["Node"] == {"name": "node-1"}
    assert line["allocatable"]["nvidia.com/gpu"] == "2"
    assert metrics.value("karpenter_nodeclaims_initialized_total", nodepool="default") == 1


async def test_launch_register_and_initialize_in_one_reconcile(
    kube: FakeClient, lifecycle: LifecycleController, provider, logs
) -> None:
    """A provider whose Node exists when create returns (kwok's) goes all the way."""
    real_create = provider.create

    async def create_with_node(nodeclaim):
        launched = await real_create(nodeclaim)
        await kube.create(NODE, node_manifest("node-1", launched.status.provider_id))
        return launched

    provider.create = create_with_node
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))

    await lifecycle.reconcile(REQUEST)

    claim = kube.peek(NODE_CLAIM, NAME)
    assert all(c["status"] == "True" for c in claim["status"]["conditions"])
    assert [r["message"] for r in logs.records if r["message"].endswith(" nodeclaim")] == [
        "launched nodeclaim", "registered nodeclaim", "initialized nodeclaim",
    ]


async def test_a_node_changed_since_the_cache_saw_it_registers_in_the_same_reconcile(
    kube: FakeClient, lifecycle: LifecycleController, monkeypatch
) -> None:
    pid = await launch(kube, lifecycle)
    await kube.create(NODE, node_manifest("node-1", pid, ready=False))
    stale = kube.peek(NODE, "node-1")
    # kwok writes the Node's status just after it appears; the cache still has the old one
    await kube.patch_status(NODE, "node-1", {"status": {"phase": "Running"}})
    by_index = kube.by_index
    monkeypatch.setattr(kube, "by_index", lambda kind, index, value: (
        [stale] if kind == NODE else by_index(kind, index, value)))

    result = await lifecycle.reconcile(REQUEST)

    assert condition(kube.peek(NODE_CLAIM, NAME), "Registered")["status"] == "True"
    node = kube.peek(NODE, "node-1")
    assert node["metadata"]["labels"]["karpenter.sh/registered"] == "true"
    assert not any(t["key"] == "karpenter.sh/unregistered" for t in node["spec"]["taints"])
    assert node["status"]["phase"] == "Running"  # the concurrent write was not lost
    assert not result.requeue  # no trip through the rate limiter


async def test_initialization_waits_for_requested_dra_drivers(
    kube: FakeClient, provider, recorder, unavailable, settings, metrics, clock
) -> None:
    """Karpenter v1.14.1 initialization (d): with IGNORE_DRA_REQUESTS off, each driver of
    karpenter.sh/requested-dra-drivers must have published the node's ResourceSlices."""
    from karpy.state.devices import DeviceIndex

    slices = DeviceIndex()
    lifecycle = LifecycleController(
        client=kube, index=kube, cloud_provider=provider, recorder=recorder,
        unavailable_offerings=unavailable, settings=settings, metrics=metrics.instruments,
        clock=clock, dra_drivers_on=slices.drivers_on,
    )
    pid = await launch(kube, lifecycle,
                       annotations={"karpenter.sh/requested-dra-drivers": "gpu.example.com"})
    await kube.create(NODE, node_manifest("node-1", pid))
    await lifecycle.reconcile(REQUEST)
    initialized = condition(kube.peek(NODE_CLAIM, NAME), "Initialized")
    assert (initialized["status"], initialized["reason"], initialized["message"]) == (
        "Unknown", "DRADriverPoolsNotPublished",
        'DRA driver "gpu.example.com" has not published a complete resource pool')
    slices.update_slice({"metadata": {"name": "node-1-gpu"}, "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "node-1", "devices": [{"name": "gpu-0"}]}})
    await lifecycle.reconcile(REQUEST)
    assert condition(kube.peek(NODE_CLAIM, NAME), "Initialized")["status"] == "True"
