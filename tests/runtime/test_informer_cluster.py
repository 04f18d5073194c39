"""Informers on the local control plane: API server restarts, 410 relists, selectors,
indexes and the shared cache."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from karpy.runtime import (
    Cache,
    Client,
    FuncHandler,
    Informer,
    InformerOptions,
    Object,
    errors,
    kinds,
)
from karpy.runtime.indexes import INDEX_NAMESPACE, index_by_field
from karpy.runtime.testing import eventually


class Recorder:
    """Collects (event, name) pairs from an informer."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def handler(self) -> FuncHandler:
        return FuncHandler(
            add=lambda o: self.events.append(("add", o["metadata"]["name"])),
            update=lambda a, b: self.events.append(("update", b["metadata"]["name"])),
            delete=lambda o: self.events.append(("delete", o["metadata"]["name"])),
        )


async def _cm(client: Client, namespace: str, name: str, **data: str) -> Object:
    return await client.create(
        kinds.CONFIG_MAP, {"metadata": {"name": name, "namespace": namespace}, "data": data}
    )


async def _converged(client: Client, informer: Informer, namespace: str) -> bool:
    live = await client.list(kinds.CONFIG_MAP, namespace=namespace)
    want = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in live}
    have = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store.list()}
    return want == have


async def test_informer_converges_after_apiserver_restart_mid_watch(
    rt_client: Client, namespace: str, cluster: Any
) -> None:
    for i in range(3):
        await _cm(rt_client, namespace, f"c{i}", v="0")
    informer = Informer(rt_client, kinds.CONFIG_MAP, namespace=namespace)
    recorder = Recorder()
    informer.add_handler(recorder.handler())
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(informer.run(), name="informer")
        await informer.wait_for_sync(30)
        assert await _converged(rt_client, informer, namespace)

        await asyncio.to_thread(cluster.restart_apiserver)  # the open watch breaks
        await _cm(rt_client, namespace, "after", v="1")
        await rt_client.delete(kinds.CONFIG_MAP, "c0", namespace=namespace)
        await rt_client.patch(kinds.CONFIG_MAP, "c1", {"data": {"v": "2"}}, namespace=namespace)

        await eventually(
            lambda: _converged(rt_client, informer, namespace), within=60, interval=0.1
        )
        assert informer.store.get(f"{namespace}/c1")["data"] == {"v": "2"}  # type: ignore[index]
        assert ("delete", "c0") in recorder.events
        assert ("add", "after") in recorder.events
        task.cancel()


async def test_forced_410_relists_and_delivers_deletions(
    rt_client: Client, namespace: str, cluster: Any, compact_etcd: Callable[[], int]
) -> None:
    for i in range(4):
        await _cm(rt_client, namespace, f"c{i}", v="0")
    informer = Informer(rt_client, kinds.CONFIG_MAP, namespace=namespace)
    recorder = Recorder()
    informer.add_handler(recorder.handler())

    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(informer.run(), name="informer")
        await informer.wait_for_sync(30)
        task.cancel()
    assert informer.relists == 1
    recorder.events.clear()

    # While the informer is disconnected: changes, then history is compacted away and the
    # API server's watch cache restarts, so the informer cannot resume by watching.
    await rt_client.delete(kinds.CONFIG_MAP, "c0", namespace=namespace)
    await rt_client.delete(kinds.CONFIG_MAP, "c1", namespace=namespace)
    await rt_client.patch(kinds.CONFIG_MAP, "c2", {"data": {"v": "2"}}, namespace=namespace)
    await _cm(rt_client, namespace, "c4", v="0")
    compact_etcd()
    await asyncio.to_thread(cluster.restart_apiserver)
    informer.restart_watch(from_resource_version="1")

    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(informer.run(), name="informer")
        await eventually(
            lambda: _converged(rt_client, informer, namespace), within=60, interval=0.1
        )
        task.cancel()
    assert informer.relists == 2  # the watch got 410 Gone and the informer listed again
    assert sorted(e for e in recorder.events if e[0] == "delete") == [
        ("delete", "c0"),
        ("delete", "c1"),
    ]
    assert ("update", "c2") in recorder.events
    assert ("add", "c4") in recorder.events
    assert ("update", "c3") not in recorder.events  # unchanged objects are not re-announced


async def test_selectors_and_indexes(rt_client: Client, namespace: str) -> None:
    await _cm(rt_client, namespace, "red", color="red")
    await rt_client.create(
        kinds.CONFIG_MAP,
        {
            "metadata": {"name": "blue", "namespace": namespace, "labels": {"team": "a"}},
            "data": {"color": "blue"},
        },
    )
    await rt_client.create(
        kinds.CONFIG_MAP,
        {"metadata": {"name": "green", "namespace": namespace, "labels": {"team": "b"}}},
    )
    cache = Cache(
        rt_client,
        by_kind={kinds.CONFIG_MAP: InformerOptions(namespace=namespace, label_selector="team")},
    )
    informer = cache.informer(kinds.CONFIG_MAP, indexers={"color": index_by_field("data.color")})
    assert cache.informer(kinds.CONFIG_MAP) is informer  # one shared informer per kind
    reader = rt_client.with_reader(cache)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(cache.run(), name="cache")
        await cache.wait_for_sync(30)
        # Server-side label selector: "red" has no team label and is not cached.
        assert {o["metadata"]["name"] for o in informer.store.list()} == {"blue", "green"}
        by_color = cache.by_index(kinds.CONFIG_MAP, "color", "blue")
        assert [o["metadata"]["name"] for o in by_color] == ["blue"]
        assert len(cache.by_index(kinds.CONFIG_MAP, INDEX_NAMESPACE, namespace)) == 2
        # Reads through the cache reader come from memory and are read-only.
        blue = await reader.get(kinds.CONFIG_MAP, "blue", namespace=namespace)
        with pytest.raises(TypeError, match="thaw"):
            blue["data"]["color"] = "x"
        assert [
            o["metadata"]["name"]
            for o in await reader.list(
                kinds.CONFIG_MAP, namespace=namespace, label_selector="team=b"
            )
        ] == ["green"]
        with pytest.raises(errors.NotFound):
            await reader.get(kinds.CONFIG_MAP, "red", namespace=namespace)
        # ...unless asked to go live.
        red = await reader.get(kinds.CONFIG_MAP, "red", namespace=namespace, live=True)
        assert red["data"] == {"color": "red"}
        # managedFields are stripped from cached objects.
        assert "managedFields" not in blue["metadata"]
        task.cancel()


async def test_a_late_handler_gets_the_cached_objects_replayed(
    rt_client: Client, namespace: str
) -> None:
    await _cm(rt_client, namespace, "one")
    informer = Informer(rt_client, kinds.CONFIG_MAP, namespace=namespace)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(informer.run(), name="informer")
        await informer.wait_for_sync(30)
        late = Recorder()
        informer.add_handler(late.handler())
        assert ("add", "one") in late.events
        task.cancel()
