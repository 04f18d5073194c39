"""nodeclaim.expiration: a NodeClaim is deleted at creation + expireAfter, whatever the
budgets, and counted as karpenter_nodeclaims_disrupted_total{reason="expired"}."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Logs, Metrics
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodeclaim_factories import nodeclaim_manifest

from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.nodeclaim.expiration import Expiration
from karpy.runtime import Request, Result, kinds
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.kinds import NODE_CLAIM

REQUEST = Request("", "default-a")


def nodeclaim(expire_after: str | None = "1h") -> dict[str, Any]:
    claim = nodeclaim_manifest("default-a", labels={"karpenter.sh/capacity-type": "spot"},
                               finalizer=True)
    if expire_after is not None:
        claim["spec"]["expireAfter"] = expire_after
    claim["status"] = {"nodeName": "node-a"}
    return claim


def pod(name: str, node: str, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", **extra.pop("meta", {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": extra.pop("phase", "Running")}}


async def add_pods(kube: FakeClient) -> None:
    """One pod that needs a new home on node-a, and three that do not count."""
    ds = {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d",
                               "uid": "u"}]}
    for p in (pod("web", "node-a"), pod("logs", "node-a", meta=ds),
              pod("done", "node-a", phase="Succeeded"), pod("elsewhere", "node-b")):
        await kube.create(kinds.POD, p)


def expiration(kube: FakeClient, metrics: Metrics, clock: FakeClock) -> Expiration:
    return Expiration(client=kube, cloud_provider=FakeCloudProvider(),  # type: ignore[arg-type]
                      metrics=metrics.instruments, clock=clock)


def deleting(kube: FakeClient) -> bool:
    return bool(kube.peek(NODE_CLAIM, "default-a")["metadata"].get("deletionTimestamp"))


async def test_an_expired_nodeclaim_is_deleted_logged_and_counted(
    kube: FakeClient, metrics: Metrics, clock: FakeClock, logs: Logs
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim("1h"))
    await add_pods(kube)
    controller = expiration(kube, metrics, clock)
    await clock.step(1800)
    assert await controller.reconcile(REQUEST) == Result(requeue_after=1800.0)
    assert not deleting(kube)
    await clock.step(1800)
    assert await controller.reconcile(REQUEST) == Result()
    assert deleting(kube)
    assert metrics.value("karpenter_nodeclaims_disrupted_total", reason="expired",
                         nodepool="default", capacity_type="spot", consolidation_policy="",
                         termination_mode="graceful") == 1
    assert metrics.value("karpenter_pods_disruption_initiated_total", reason="expired",
                         nodepool="default") == 1
    [line] = logs.messages("deleting expired nodeclaim")
    assert line["NodeClaim"] == {"name": "default-a"}
    assert line["Node"] == {"name": "node-a"}


async def test_an_expire_after_go_cannot_hold_is_logged_and_never_expires(
    kube: FakeClient, metrics: Metrics, clock: FakeClock, logs: Logs
) -> None:
    # Only a NodeClaim written by hand carries one (NodePools refuse it); it once turned
    # into an OverflowError on every reconcile of this NodeClaim.
    await kube.create(NODE_CLAIM, nodeclaim("99999999h"))
    controller = expiration(kube, metrics, clock)
    await clock.step(10**9)
    assert await controller.reconcile(REQUEST) == Result()
    assert not deleting(kube)
    [line] = logs.messages("ignoring expireAfter")
    assert "'99999999h' is too long a duration" in line["error"]


async def test_an_expiry_is_counted_once_even_when_the_cache_lags(
    kube: FakeClient, metrics: Metrics, clock: FakeClock
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim("1m"))
    controller = expiration(kube, metrics, clock)
    await clock.step(61)
    await controller.reconcile(REQUEST)
    kube.peek(NODE_CLAIM, "default-a")["metadata"].pop("deletionTimestamp")  # stale read
    await controller.reconcile(REQUEST)
    assert metrics.value("karpenter_nodeclaims_disrupted_total", reason="expired") == 1
    assert [(c.kind, c.name) for c in kube.calls if c.verb == "delete"] == [
        (NODE_CLAIM, "default-a")]


async def test_never_and_other_providers_nodeclaims_do_not_expire(
    kube: FakeClient, metrics: Metrics, clock: FakeClock
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim("Never"))
    foreign = nodeclaim("1s")
    foreign["metadata"]["name"] = "foreign"
    foreign["spec"]["nodeClassRef"]["kind"] = "OtherNodeClass"
    await kube.create(NODE_CLAIM, foreign)
    controller = expiration(kube, metrics, clock)
    await clock.step(10 * 365 * 86400)
    assert await controller.reconcile(REQUEST) == Result()
    assert await controller.reconcile(Request("", "foreign")) == Result()
    assert await controller.reconcile(Request("", "missing")) == Result()
    assert [c for c in kube.calls if c.verb == "delete"] == []


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 10_000), st.integers(0, 20_000))
async def test_deleted_exactly_when_expire_after_has_passed(expire: int, elapsed: int) -> None:
    clock = FakeClock()
    kube = FakeClient(clock=clock)
    metrics = Metrics()
    await kube.create(NODE_CLAIM, nodeclaim(f"{expire}s"))
    await clock.step(elapsed)
    result = await expiration(kube, metrics, clock).reconcile(REQUEST)
    assert deleting(kube) is (elapsed >= expire)
    if elapsed < expire:
        assert result.requeue_after == pytest.approx(expire - elapsed)


async def test_a_nodeclaim_that_never_expires_is_not_parsed(
    kube: FakeClient, metrics: Metrics, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from karpy.apis import NodeClaim

    await kube.create(NODE_CLAIM, nodeclaim("Never"))
    parsed: list[str] = []
    real = NodeClaim.from_dict
    monkeypatch.setattr(NodeClaim, "from_dict", lambda data: (parsed.append("x"), real(data))[1])
    assert await expiration(kube, metrics, clock).reconcile(REQUEST) == Result()
    assert parsed == []


async def test_an_expiry_bounded_by_a_termination_grace_period_is_counted_as_eventual(
    kube: FakeClient, metrics: Metrics, clock: FakeClock
) -> None:
    claim = nodeclaim("1m")
    claim["spec"]["terminationGracePeriod"] = "30m"
    await kube.create(NODE_CLAIM, claim)
    controller = expiration(kube, metrics, clock)
    await clock.step(61)
    await controller.reconcile(REQUEST)
    assert metrics.value("karpenter_nodeclaims_disrupted_total", reason="expired",
                         termination_mode="eventual") == 1
    assert metrics.value("karpenter_nodeclaims_disrupted_total", reason="expired",
                         termination_mode="graceful") == 0
