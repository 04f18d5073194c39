"""Manager on the local control plane: leader election, owner watches, probes, metrics."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from karpy.runtime import (
    Client,
    Kind,
    LeaderElectionConfig,
    Manager,
    Request,
    Result,
    errors,
    kinds,
)
from karpy.runtime.testing import eventually

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/configmap-labeler/labeler.py"


class Recording:
    """A reconciler that records every request it is called with."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.seen = asyncio.Event()

    async def reconcile(self, request: Request) -> Result:
        self.requests.append(request)
        self.seen.set()
        return Result()


def _manager(client: Client, namespace: str, identity: str, **election: Any) -> Manager:
    return Manager(
        client,
        namespace=namespace,
        leader_election=LeaderElectionConfig(
            name="rt-test", namespace=namespace, identity=identity, **election
        ),
        metrics_bind_address="0",
        health_probe_bind_address="127.0.0.1:0",
        graceful_shutdown_timeout=10,
    )


@contextlib.asynccontextmanager
async def running(manager: Manager) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(manager.run(), name="manager-under-test")
    try:
        yield task
    finally:
        manager.stop()
        done, _ = await asyncio.wait({task}, timeout=30)
        assert done, "the manager did not stop within 30 s"
        if not task.cancelled() and task.exception() is not None:
            assert isinstance(task.exception(), errors.LeaderElectionLost)


async def _wait_for(event: asyncio.Event, within: float) -> None:
    await asyncio.wait_for(event.wait(), within)


async def test_only_the_leader_runs_controllers_and_a_standby_takes_over(
    rt_client: Client, namespace: str
) -> None:
    await rt_client.create(kinds.CONFIG_MAP, {"metadata": {"name": "x", "namespace": namespace}})
    first, second = Recording(), Recording()
    m1 = _manager(rt_client, namespace, "first")
    m1.controller("rec").for_(kinds.CONFIG_MAP).complete(first)
    m2 = _manager(rt_client, namespace, "second")
    m2.controller("rec").for_(kinds.CONFIG_MAP).complete(second)

    async with running(m1):
        await _wait_for(m1.elector.elected, 30)  # type: ignore[union-attr]
        async with running(m2) as t2:
            await _wait_for(first.seen, 10)
            await m2.cache.wait_for_sync(30)  # the standby's cache is warm...
            await asyncio.sleep(2 * 2.4)  # ...over two retry periods it never leads
            assert not m2.is_leader and second.requests == []
            assert m1.is_leader

            stopped_at = time.monotonic()
            m1.stop()  # graceful: the lease is released
            await _wait_for(second.seen, 20)
            takeover = time.monotonic() - stopped_at
            assert m2.is_leader and not t2.done()
            assert takeover < 20
            assert Request(namespace, "x") in second.requests
    lease = await rt_client.get(kinds.LEASE, "rt-test", namespace=namespace)
    assert lease["spec"]["holderIdentity"] == ""  # released by the last leader, too
    assert lease["spec"]["leaseTransitions"] >= 1


async def test_a_crashed_leader_is_replaced_within_20s(rt_client: Client, namespace: str) -> None:
    await rt_client.create(kinds.CONFIG_MAP, {"metadata": {"name": "x", "namespace": namespace}})
    first, second = Recording(), Recording()
    m1 = _manager(rt_client, namespace, "crashing", release_on_cancel=False)
    m1.controller("rec").for_(kinds.CONFIG_MAP).complete(first)
    m2 = _manager(rt_client, namespace, "standby")
    m2.controller("rec").for_(kinds.CONFIG_MAP).complete(second)
    async with running(m1) as t1:
        await _wait_for(first.seen, 30)
        async with running(m2):
            await m2.cache.wait_for_sync(30)
            t1.cancel()  # dies without releasing: the standby must wait the lease out
            crashed_at = time.monotonic()
            with contextlib.suppress(asyncio.CancelledError):
                await t1
            await _wait_for(second.seen, 25)
            assert time.monotonic() - crashed_at < 20


async def test_losing_the_lease_stops_the_controllers(rt_client: Client, namespace: str) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    class Busy:
        async def reconcile(self, request: Request) -> Result:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return Result()

    await rt_client.create(kinds.CONFIG_MAP, {"metadata": {"name": "x", "namespace": namespace}})
    manager = _manager(
        rt_client, namespace, "victim", lease_duration=4, renew_deadline=2, retry_period=0.5
    )
    manager.graceful_shutdown_timeout = 1
    manager.controller("busy").for_(kinds.CONFIG_MAP).complete(Busy(), drain_timeout=0.5)
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(started.wait(), 30)
    # Someone else grabs the lease (as another candidate would after a partition).
    lease = await rt_client.get(kinds.LEASE, "rt-test", namespace=namespace)
    lease["spec"].update(holderIdentity="usurper", leaseDurationSeconds=3600)
    await rt_client.update(kinds.LEASE, lease)
    with pytest.raises(errors.LeaderElectionLost):
        await asyncio.wait_for(task, 30)
    assert cancelled.is_set() and not manager.is_leader


async def test_an_owned_object_change_enqueues_its_owner(rt_client: Client, namespace: str) -> None:
    owner = await rt_client.create(
        kinds.CONFIG_MAP, {"metadata": {"name": "owner", "namespace": namespace}}
    )
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    await rt_client.create(
        kinds.SECRET,
        {"metadata": {"name": "child", "namespace": namespace, "ownerReferences": [ref]}},
    )
    await rt_client.create(kinds.SECRET, {"metadata": {"name": "orphan", "namespace": namespace}})
    recording = Recording()
    manager = Manager(
        rt_client,
        namespace=namespace,
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="127.0.0.1:0",
    )
    controller = (
        manager.controller("owner").for_(kinds.CONFIG_MAP).owns(kinds.SECRET).complete(recording)
    )
    async with running(manager):
        await _wait_for(recording.seen, 30)
        await _settle(controller.queue)
        recording.requests.clear()
        recording.seen.clear()
        await rt_client.patch(
            kinds.SECRET, "child", {"metadata": {"labels": {"touched": "1"}}}, namespace=namespace
        )
        await _wait_for(recording.seen, 10)
        await _settle(controller.queue)
        assert recording.requests == [Request(namespace, "owner")]
        # The orphan's change must enqueue nothing. Secrets' events arrive in order on one
        # watch, so once a later change of the child has been reconciled, the orphan's
        # event has been handled too: no fixed sleep needed to give it a chance.
        recording.requests.clear()
        recording.seen.clear()
        await rt_client.patch(
            kinds.SECRET, "orphan", {"metadata": {"labels": {"touched": "1"}}}, namespace=namespace
        )
        await rt_client.patch(
            kinds.SECRET, "child", {"metadata": {"labels": {"touched": "2"}}}, namespace=namespace
        )
        await _wait_for(recording.seen, 10)
        await _settle(controller.queue)
        assert recording.requests == [Request(namespace, "owner")]

        # The probes and metrics endpoints answer while it runs.
        await manager.wait_serving()
        async with aiohttp.ClientSession() as http:
            ready = await http.get(f"http://127.0.0.1:{manager.health_port}/readyz")
            assert ready.status == 200
            healthy = await http.get(f"http://127.0.0.1:{manager.health_port}/healthz")
            assert healthy.status == 200
            metrics = await (
                await http.get(f"http://127.0.0.1:{manager.metrics_port}/metrics")
            ).text()
        assert 'controller_runtime_reconcile_total{controller="owner",result="success"}' in metrics
        assert 'workqueue_adds_total{controller="owner",name="owner"}' in metrics
        assert "workqueue_queue_duration_seconds_bucket" in metrics


async def _settle(queue: Any) -> None:
    await eventually(
        lambda: not len(queue) and not queue.processing(), within=30, what="the queue drains"
    )


async def test_a_kind_that_never_syncs_fails_the_manager_with_its_name(
    rt_client: Client, namespace: str
) -> None:
    missing = Kind(group="nowhere.example.com", version="v1", plural="ghosts", kind="Ghost")
    manager = Manager(
        rt_client,
        namespace=namespace,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        cache_sync_timeout=2,
    )
    manager.controller("ghosts").for_(missing).complete(Recording())
    with pytest.raises(errors.CacheSyncTimeout, match=r"ghosts\.nowhere\.example\.com"):
        await asyncio.wait_for(manager.run(), 30)


async def test_sigterm_stops_gracefully_and_releases_the_lease(
    cluster: Any, rt_client: Client, namespace: str
) -> None:
    script = EXAMPLE
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        "--kubeconfig",
        cluster.kubeconfig,
        "--namespace",
        namespace,
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        holder = ""
        for _ in range(300):
            with contextlib.suppress(errors.NotFound):
                lease = await rt_client.get(kinds.LEASE, "configmap-labeler", namespace=namespace)
                holder = lease["spec"].get("holderIdentity") or ""
            if holder:
                break
            await asyncio.sleep(0.1)
        assert holder, "the example never became leader"
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 30)
        assert time.monotonic() - signalled < 30  # within graceful_shutdown_timeout
        assert process.returncode == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    lease = await rt_client.get(kinds.LEASE, "configmap-labeler", namespace=namespace)
    assert lease["spec"]["holderIdentity"] == ""
    assert process.stderr is not None
    logs = [json.loads(line) for line in (await process.stderr.read()).splitlines() if line]
    assert any(line["message"] == "released leader lease" for line in logs)
    assert all({"level", "time", "logger", "message"} <= line.keys() for line in logs)
