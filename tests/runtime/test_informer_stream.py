"""Informer failure paths that a healthy API server will not produce on demand: a
half-open watch (no bytes, no FIN), an in-stream 410 ERROR event, bookmarks. A stub
HTTP endpoint plays the server's list and watch responses; everything else about
informers is tested on the local control plane (test_informer_cluster.py)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp_serving import serving
from kubernetes_asyncio import client as k8s_client

from karpy.runtime import FuncHandler, Informer, KubeClient, kinds
from karpy.runtime.ratelimit import Backoff
from karpy.runtime.testing import eventually


def _cm(name: str, rv: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}}


class StubServer:
    """Answers lists with ``lists.pop(0)`` and watches with ``watches.pop(0)``: a list of
    events to send, ending with "hang" (stay silent) or "close"."""

    def __init__(self) -> None:
        self.lists: list[tuple[int, list[dict[str, Any]]]] = []
        self.watches: list[list[Any]] = []
        self.watch_rvs: list[str | None] = []
        self.list_calls = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            self.list_calls += 1
            rv, items = self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]
            return web.json_response(
                {"kind": "ConfigMapList", "items": items, "metadata": {"resourceVersion": str(rv)}}
            )
        self.watch_rvs.append(request.query.get("resourceVersion"))
        script = self.watches.pop(0) if self.watches else ["hang"]
        response = web.StreamResponse()
        await response.prepare(request)
        for step in script:
            if step == "hang":
                await asyncio.sleep(3600)
            elif step == "close":
                break
            else:
                await response.write(json.dumps(step).encode() + b"\n")
        return response


@pytest.fixture
async def stub() -> AsyncIterator[tuple[StubServer, KubeClient]]:
    server = StubServer()
    app = web.Application()
    app.router.add_get("/api/v1/configmaps", server.handle)
    async with serving(app) as url:
        configuration = k8s_client.Configuration(host=url)
        client = KubeClient(k8s_client.ApiClient(configuration), timeout=5, owns_api_client=True)
        yield server, client
        await client.close()


def _informer(client: KubeClient) -> Informer:
    return Informer(
        client,
        kinds.CONFIG_MAP,
        inactivity_timeout=0.3,
        backoff=Backoff(initial=0.01, maximum=0.05),
    )


async def test_a_silent_watch_is_abandoned_and_resumed(stub: tuple[StubServer, KubeClient]) -> None:
    server, client = stub
    server.lists = [(10, [_cm("a", 10)])]
    server.watches = [["hang"], [{"type": "ADDED", "object": _cm("b", 11)}, "hang"]]
    informer = _informer(client)
    task = asyncio.create_task(informer.run())
    await eventually(lambda: "ns/b" in informer.store)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    # The watchdog dropped the silent stream; the new watch resumed from the list's RV,
    # without listing again.
    assert server.watch_rvs[:2] == ["10", "10"]
    assert server.list_calls == 1


async def test_an_in_stream_410_relists_and_delivers_deletions(
    stub: tuple[StubServer, KubeClient],
) -> None:
    server, client = stub
    server.lists = [(10, [_cm("a", 5), _cm("b", 6)]), (20, [_cm("b", 6)])]
    server.watches = [
        [
            {
                "type": "ERROR",
                "object": {
                    "kind": "Status",
                    "code": 410,
                    "reason": "Expired",
                    "message": "too old",
                },
            }
        ],
        ["hang"],
    ]
    deleted: list[str] = []
    informer = _informer(client)
    informer.add_handler(FuncHandler(delete=lambda o: deleted.append(o["metadata"]["name"])))
    task = asyncio.create_task(informer.run())
    # Wait for the deletion *and* the watch resumed from the relist (they are separate
    # steps: checking the second right after the first races the informer).
    await eventually(lambda: deleted == ["a"] and server.watch_rvs[-1:] == ["20"])
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert informer.relists == 2
    assert informer.store.key_list() == ["ns/b"]


async def test_bookmarks_advance_the_resume_point(stub: tuple[StubServer, KubeClient]) -> None:
    server, client = stub
    server.lists = [(10, [])]
    server.watches = [
        [{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "50"}}}, "close"],
        ["hang"],
    ]
    informer = _informer(client)
    task = asyncio.create_task(informer.run())
    await eventually(lambda: len(server.watch_rvs) >= 2)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert server.watch_rvs[:2] == ["10", "50"] and len(informer.store) == 0


async def test_a_failing_handler_does_not_stop_the_informer(
    stub: tuple[StubServer, KubeClient],
) -> None:
    server, client = stub
    server.lists = [(10, [_cm("a", 1), _cm("b", 2)])]
    seen: list[str] = []

    def flaky(obj: Any) -> None:
        if obj["metadata"]["name"] == "a":
            raise RuntimeError("handler bug")
        seen.append(obj["metadata"]["name"])

    informer = _informer(client)
    informer.add_handler(FuncHandler(add=flaky))
    task = asyncio.create_task(informer.run())
    await informer.wait_for_sync(5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert seen == ["b"] and len(informer.store) == 2


async def test_a_delivery_a_handler_raised_on_is_delivered_again(
    stub: tuple[StubServer, KubeClient],
) -> None:
    # Without the retry the handler never learns of "a" (until "a" changes), so whatever
    # it feeds (the cluster model) silently lacks it.
    server, client = stub
    server.lists = [(10, [_cm("a", 1), _cm("b", 2)])]
    seen: list[str] = []
    failures = {"a": 2}
    counted: list[tuple[str, str]] = []

    def flaky(obj: Any) -> None:
        name = obj["metadata"]["name"]
        if failures.get(name, 0) > 0:
            failures[name] -= 1
            raise RuntimeError("handler bug")
        seen.append(name)

    informer = Informer(
        client, kinds.CONFIG_MAP, inactivity_timeout=30,
        on_handler_error=lambda kind, method: counted.append((kind, method)),
    )  # fmt: skip
    informer.add_handler(FuncHandler(add=flaky))
    task = asyncio.create_task(informer.run())
    await eventually(lambda: "a" in seen, within=5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert seen == ["b", "a"]
    assert informer.handler_errors == 2 and informer.pending_retries == 0
    assert counted == [(str(kinds.CONFIG_MAP), "on_add")] * 2


async def test_a_newer_event_taken_replaces_the_failed_delivery(
    stub: tuple[StubServer, KubeClient],
) -> None:
    server, client = stub
    server.lists = [(10, [_cm("a", 1)])]
    server.watches = [[{"type": "MODIFIED", "object": _cm("a", 11)}, "hang"]]
    updates: list[str] = []

    def add(obj: Any) -> None:
        raise RuntimeError("handler bug")

    informer = Informer(client, kinds.CONFIG_MAP, inactivity_timeout=30)
    informer.add_handler(
        FuncHandler(add=add, update=lambda o, n: updates.append(n["metadata"]["resourceVersion"]))
    )
    task = asyncio.create_task(informer.run())
    await eventually(lambda: updates == ["11"])
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    # The update was taken: the handler is in step, the stale add is not redelivered.
    assert informer.pending_retries == 0 and informer.handler_errors == 1


async def test_a_failed_delivery_counts_in_the_managers_metric(
    stub: tuple[StubServer, KubeClient],
) -> None:
    from karpy.runtime.telemetry import Metrics

    server, client = stub
    server.lists = [(10, [_cm("a", 1)])]
    metrics = Metrics()
    informer = Informer(client, kinds.CONFIG_MAP, on_handler_error=metrics.informer_handler_error)

    def add(obj: Any) -> None:
        raise RuntimeError("handler bug")

    informer.add_handler(FuncHandler(add=add))
    task = asyncio.create_task(informer.run())
    await informer.wait_for_sync(5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    text = metrics.render().decode()
    metrics.shutdown()
    assert 'karpy_informer_handler_errors_total{handler="on_add",kind="' in text
    series = "karpy_informer_handler_errors_total{"
    line = next(x for x in text.splitlines() if x.startswith(series))
    assert line.endswith(" 1.0")


async def test_a_quiet_watch_is_renewed_without_a_warning(
    stub: tuple[StubServer, KubeClient], caplog: pytest.LogCaptureFixture
) -> None:
    # A kind that does not change gets no bookmarks from a fresh API server's watch
    # cache: the silent watch is healthy, and client-go says nothing about it either.
    server, client = stub
    server.lists = [(10, [])]
    server.watches = [["hang"], ["hang"], ["hang"]]
    informer = _informer(client)
    caplog.set_level(logging.DEBUG, logger="karpy.runtime.informer")
    task = asyncio.create_task(informer.run())
    await eventually(lambda: len(server.watch_rvs) >= 3)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert server.watch_rvs[:3] == ["10", "10", "10"] and server.list_calls == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == []
    assert any(r.getMessage() == "watch idle, watching again" for r in caplog.records)
