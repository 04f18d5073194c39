"""The client's flow control as client-go's: a 429 or 5xx that carries Retry-After is
tried again after that wait (any verb), a GET whose connection broke is tried again,
everything else goes straight back; retries are bounded; and every request takes a
token from one client-wide bucket (qps/burst). A local aiohttp server plays the API
server, answering from a script of faults."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from karpy.runtime import KubeClient, errors, kinds
from karpy.runtime._flowcontrol import MAX_RETRIES, MAX_RETRY_WAIT, RetryState
from karpy.runtime.ratelimit import Backoff


@dataclass
class Server:
    """A namespaces endpoint that answers with ``faults`` first (one per request), then
    normally; it records each request's verb and arrival time."""

    url: str = ""
    faults: list[tuple[int, dict[str, str]] | str] = field(default_factory=list)
    seen: list[tuple[str, float]] = field(default_factory=list)
    created: int = 0

    def verbs(self) -> list[str]:
        return [verb for verb, _ in self.seen]


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    state = Server()

    async def handle(request: web.Request) -> web.StreamResponse:
        state.seen.append((request.method, time.monotonic()))
        await request.read()
        if state.faults:
            fault = state.faults.pop(0)
            if fault == "drop":
                # The connection dies before an answer: what a restarting server does.
                assert request.transport is not None
                request.transport.close()
                return web.Response()
            assert not isinstance(fault, str)
            status, headers = fault
            body = {"kind": "Status", "apiVersion": "v1", "code": status,
                    "reason": "TooManyRequests" if status == 429 else "ServiceUnavailable",
                    "message": "throttled"}  # fmt: skip
            return web.json_response(body, status=status, headers=headers)
        name = request.match_info.get("name", "made")
        if request.method == "POST":
            state.created += 1
            return web.json_response({"metadata": {"name": name}}, status=201)
        if "watch" in request.query:
            response = web.StreamResponse()
            await response.prepare(request)
            await response.write(
                b'{"type":"ADDED","object":{"kind":"Namespace","metadata":{"name":"w"}}}\n'
            )
            return response
        return web.json_response({"metadata": {"name": name}})

    app = web.Application()
    app.router.add_route("*", "/api/v1/namespaces", handle)
    app.router.add_route("*", "/api/v1/namespaces/{name}", handle)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    state.url = f"http://127.0.0.1:{port}"
    yield state
    await runner.cleanup()


@pytest.fixture
async def client(server: Server) -> AsyncIterator[KubeClient]:
    api = k8s_client.ApiClient(k8s_client.Configuration(host=server.url))
    async with KubeClient(api, timeout=5, owns_api_client=True) as made:
        yield made


THROTTLED = (429, {"Retry-After": "1"})
THROTTLED_NOW = (429, {"Retry-After": "0"})


async def test_a_get_waits_as_long_as_retry_after_says_then_succeeds(
    server: Server, client: KubeClient
) -> None:
    server.faults = [THROTTLED]
    got = await client.get(kinds.NAMESPACE, "default", live=True)
    assert got["metadata"]["name"] == "default"
    (_, first), (_, second) = server.seen
    assert second - first >= 0.95


ASKED_TO_RETRY = [THROTTLED_NOW, (503, {"Retry-After": "0"}), (500, {"Retry-After": "0"})]


@pytest.mark.parametrize("fault", ASKED_TO_RETRY, ids=["429", "503", "500"])
async def test_a_write_the_server_asked_to_retry_is_retried_and_done_once(
    server: Server, client: KubeClient, fault: tuple[int, dict[str, str]]
) -> None:
    server.faults = [fault, fault]
    made = await client.create(kinds.NAMESPACE, {"metadata": {"name": "team-a"}})
    assert made["metadata"]["name"] == "made"
    assert server.verbs() == ["POST", "POST", "POST"]
    assert server.created == 1


async def test_a_watch_the_server_throttled_opens_on_retry(
    server: Server, client: KubeClient
) -> None:
    server.faults = [THROTTLED_NOW]
    stream = client.watch(kinds.NAMESPACE, timeout_seconds=5)
    event = await anext(stream)
    await stream.aclose()
    assert event.object["metadata"]["name"] == "w"
    assert server.verbs() == ["GET", "GET"]


@pytest.mark.parametrize("fault", [(429, {}), (500, {}), (404, {"Retry-After": "0"})],
                         ids=["429-without-retry-after", "500-without", "404"])  # fmt: skip
async def test_a_failure_without_retry_after_goes_straight_back(
    server: Server, client: KubeClient, fault: tuple[int, dict[str, str]]
) -> None:
    # A PodDisruptionBudget refusing an eviction is a 429 without Retry-After: the
    # termination controller must hear it at once, not after ten retries.
    server.faults = [fault]
    with pytest.raises(errors.ApiError) as caught:
        await client.create(kinds.NAMESPACE, {"metadata": {"name": "x"}})
    assert caught.value.status == fault[0]
    assert server.verbs() == ["POST"]


async def test_throttling_that_never_ends_gives_up_within_the_timeout(
    server: Server, client: KubeClient
) -> None:
    server.faults = [THROTTLED_NOW] * 100
    started = time.monotonic()
    with pytest.raises(errors.TooManyRequests):
        await client.get(kinds.NAMESPACE, "default", live=True, timeout=3)
    assert time.monotonic() - started < 3.5
    # Retried, with growing waits between the attempts (not a hot loop).
    times = [at for _, at in server.seen]
    assert 3 <= len(times) <= MAX_RETRIES + 1
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[-1] > gaps[0]


def test_retries_stop_after_max_retries() -> None:
    retry = RetryState("GET", backoff=Backoff(initial=0.001, factor=1.0, jitter=0))
    throttled = errors.TooManyRequests("throttled", retry_after=0)
    waits = [retry.delay(throttled, remaining=60) for _ in range(MAX_RETRIES + 3)]
    assert waits[:MAX_RETRIES] == [0.001] * MAX_RETRIES
    assert waits[MAX_RETRIES:] == [None] * 3


def test_a_retry_after_wait_is_capped() -> None:
    retry = RetryState("PUT")
    asked = errors.ServiceUnavailable("shutting down", retry_after=600)
    assert retry.delay(asked, remaining=60) == MAX_RETRY_WAIT


async def test_a_wait_longer_than_the_timeout_is_not_made(
    server: Server, client: KubeClient
) -> None:
    server.faults = [(429, {"Retry-After": "3600"})]
    started = time.monotonic()
    with pytest.raises(errors.TooManyRequests) as caught:
        await client.get(kinds.NAMESPACE, "default", live=True, timeout=2)
    assert time.monotonic() - started < 1.0
    assert caught.value.retry_after == 3600
    assert len(server.seen) == 1


async def test_a_get_whose_connection_broke_is_retried_a_create_is_not(
    server: Server, client: KubeClient
) -> None:
    # aiohttp itself resends an idempotent request once when a connection drops; the
    # second drop is the client's to retry.
    server.faults = ["drop", "drop"]
    got = await client.get(kinds.NAMESPACE, "default", live=True)
    assert got["metadata"]["name"] == "default"
    assert server.verbs() == ["GET", "GET", "GET"]
    server.seen.clear()
    server.faults = ["drop"]
    # The create may have been applied before the connection broke: never sent twice.
    with pytest.raises(errors.TransportError):
        await client.create(kinds.NAMESPACE, {"metadata": {"name": "x"}})
    assert server.verbs() == ["POST"]


async def test_requests_share_one_token_bucket(server: Server) -> None:
    api = k8s_client.ApiClient(k8s_client.Configuration(host=server.url))
    async with KubeClient(api, timeout=10, owns_api_client=True, qps=20, burst=5) as limited:
        cached = limited.with_reader(None)  # shares the bucket
        started = time.monotonic()
        await asyncio.gather(
            *(limited.get(kinds.NAMESPACE, f"n{i}", live=True) for i in range(13)),
            *(cached.get(kinds.NAMESPACE, f"c{i}", live=True) for i in range(12)),
        )
    arrivals = sorted(at - started for _, at in server.seen)
    # 5 at once (the burst), then 20 a second: the 25th no sooner than 1 s in.
    assert arrivals[4] < 0.5
    assert arrivals[-1] >= 0.95
    for n, at in enumerate(arrivals[5:], start=1):
        assert at >= n / 20 - 0.02, (n, at)


async def test_the_lease_client_has_a_bucket_of_its_own(server: Server) -> None:
    api = k8s_client.ApiClient(k8s_client.Configuration(host=server.url))
    async with KubeClient(api, timeout=10, owns_api_client=True, qps=2, burst=1) as limited:
        own = limited.with_own_connections()
        try:
            await limited.get(kinds.NAMESPACE, "spend-the-token", live=True)
            started = time.monotonic()
            await own.get(kinds.NAMESPACE, "lease", live=True)
            assert time.monotonic() - started < 0.3
        finally:
            await own.close()
