"""KubeClient against the local control plane: verbs, patch types, subresources, CRDs, errors."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from karpy.runtime import Kind, KubeClient, PatchType, errors, kinds

NODE_POOL = Kind(
    group="karpenter.sh", version="v1", plural="nodepools", kind="NodePool", namespaced=False
)


def _node_pool(name: str) -> dict[str, object]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [],
                }
            }
        },
    }


async def test_core_kind_round_trip(rt_client: KubeClient, namespace: str) -> None:
    cm = await rt_client.create(
        kinds.CONFIG_MAP, {"metadata": {"name": "a", "namespace": namespace}, "data": {"k": "1"}}
    )
    assert cm["metadata"]["uid"]
    cm["data"]["k"] = "2"
    updated = await rt_client.update(kinds.CONFIG_MAP, cm)
    assert updated["data"] == {"k": "2"}

    # A stale resourceVersion is a Conflict, not a silent overwrite.
    cm["data"]["k"] = "stale"
    with pytest.raises(errors.Conflict):
        await rt_client.update(kinds.CONFIG_MAP, cm)

    merged = await rt_client.patch(kinds.CONFIG_MAP, "a", {"data": {"m": "x"}}, namespace=namespace)
    assert merged["data"] == {"k": "2", "m": "x"}
    jsonp = await rt_client.patch(
        kinds.CONFIG_MAP,
        "a",
        [{"op": "remove", "path": "/data/m"}],
        namespace=namespace,
        patch_type=PatchType.JSON,
    )
    assert jsonp["data"] == {"k": "2"}
    applied = await rt_client.apply(
        kinds.CONFIG_MAP,
        {"metadata": {"name": "a", "namespace": namespace}, "data": {"owned": "yes"}},
        field_manager="karpy-test",
    )
    assert applied["data"] == {"k": "2", "owned": "yes"}
    managers = {m["manager"] for m in applied["metadata"]["managedFields"]}
    assert "karpy-test" in managers

    listed = await rt_client.list(kinds.CONFIG_MAP, namespace=namespace, label_selector=None)
    assert "a" in {o["metadata"]["name"] for o in listed}
    assert all(o["kind"] == "ConfigMap" for o in listed)

    with pytest.raises(errors.AlreadyExists):
        await rt_client.create(
            kinds.CONFIG_MAP, {"metadata": {"name": "a", "namespace": namespace}}
        )
    await rt_client.delete(kinds.CONFIG_MAP, "a", namespace=namespace)
    with pytest.raises(errors.NotFound):
        await rt_client.get(kinds.CONFIG_MAP, "a", namespace=namespace)
    with pytest.raises(errors.NotFound):
        await rt_client.delete(kinds.CONFIG_MAP, "a", namespace=namespace)


async def test_list_pages_through_everything(rt_client: KubeClient, namespace: str) -> None:
    await asyncio.gather(
        *(
            rt_client.create(
                kinds.CONFIG_MAP,
                {
                    "metadata": {
                        "name": f"p{i}",
                        "namespace": namespace,
                        "labels": {"page": "yes" if i % 2 else "no"},
                    }
                },
            )
            for i in range(12)
        )
    )
    page = await rt_client.list_page(kinds.CONFIG_MAP, namespace=namespace, limit=5)
    assert len(page.items) == 5 and page.continue_token
    odd = await rt_client.list(
        kinds.CONFIG_MAP, namespace=namespace, label_selector={"page": "yes"}
    )
    assert sorted(o["metadata"]["name"] for o in odd) == sorted(f"p{i}" for i in range(1, 12, 2))


async def test_custom_resource_with_status_subresource(rt_client: KubeClient) -> None:
    name = "rt-client-test"
    with contextlib.suppress(errors.NotFound):
        await rt_client.delete(NODE_POOL, name)
    pool = await rt_client.create(NODE_POOL, _node_pool(name))
    try:
        status = await rt_client.patch_status(NODE_POOL, name, {"status": {"nodes": 3}})
        assert status["status"]["nodes"] == 3
        # A write to the main resource does not touch status...
        pool = await rt_client.get(NODE_POOL, name)
        pool["spec"]["weight"] = 7
        pool["status"] = {"nodes": 99}
        written = await rt_client.update(NODE_POOL, pool)
        assert written["spec"]["weight"] == 7 and written["status"]["nodes"] == 3
        # ...and a write to status does not touch spec.
        written["spec"]["weight"] = 50
        written["status"]["nodes"] = 4
        after = await rt_client.update_status(NODE_POOL, written)
        assert after["spec"]["weight"] == 7 and after["status"]["nodes"] == 4
        with pytest.raises(errors.Invalid) as info:
            await rt_client.patch(NODE_POOL, name, {"spec": {"weight": 1000}})
        assert "weight" in str(info.value)
    finally:
        await rt_client.delete(NODE_POOL, name)


async def test_watch_streams_events_and_reports_gone(
    rt_client: KubeClient, namespace: str, cluster: Any, compact_etcd: Callable[[], int]
) -> None:
    page = await rt_client.list_page(kinds.CONFIG_MAP, namespace=namespace)
    stream = rt_client.watch(
        kinds.CONFIG_MAP,
        namespace=namespace,
        resource_version=page.resource_version,
        timeout_seconds=30,
    )
    async with contextlib.aclosing(stream) as events:
        await rt_client.create(
            kinds.CONFIG_MAP, {"metadata": {"name": "w", "namespace": namespace}}
        )
        event = await anext(events)
        assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "w")
        with pytest.raises(TypeError):
            event.object["metadata"]["name"] = "mutated"  # watch objects are read-only
    compact_etcd()  # history before now is gone from etcd...
    await asyncio.to_thread(cluster.restart_apiserver)  # ...and from the watch cache
    too_old = rt_client.watch(
        kinds.CONFIG_MAP, namespace=namespace, resource_version="1", timeout_seconds=30
    )
    async with contextlib.aclosing(too_old) as events:
        with pytest.raises(errors.Gone):
            await anext(events)


async def test_timeouts_and_transport_errors_are_typed(rt_client: KubeClient) -> None:
    with pytest.raises(errors.RequestTimeout):
        await rt_client.list(kinds.CONFIG_MAP, timeout=0.000001)
    dead = KubeClient(rt_client.api_client, timeout=30)  # refused at once; the bound is for load
    dead._host = "https://127.0.0.1:1"
    with pytest.raises(errors.TransportError):
        await dead.get(kinds.NAMESPACE, "default")
    await dead.close()
    closed = rt_client.with_reader(None)
    await closed.close()
    with pytest.raises(errors.TransportError, match="closed"):
        await closed.get(kinds.NAMESPACE, "default")


async def test_create_on_a_subresource_evicts_a_pod(rt_client: KubeClient, namespace: str) -> None:
    # Pods need the namespace's "default" ServiceAccount, which kube-controller-manager
    # creates a moment after the namespace: do not race it.
    service_accounts = Kind(group="", version="v1", plural="serviceaccounts", kind="ServiceAccount")
    with contextlib.suppress(errors.AlreadyExists):
        await rt_client.create(
            service_accounts, {"metadata": {"name": "default", "namespace": namespace}}
        )
    await rt_client.create(
        kinds.POD,
        {
            "metadata": {"name": "victim", "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        },
    )
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "victim", "namespace": namespace},
    }
    await rt_client.create(kinds.POD, eviction, subresource="eviction")
    # Never scheduled, so the eviction deletes it at once (or leaves it terminating).
    try:
        pod = await rt_client.get(kinds.POD, "victim", namespace=namespace)
    except errors.NotFound:
        return
    assert pod["metadata"].get("deletionTimestamp")
