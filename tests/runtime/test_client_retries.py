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
from aiohttp_serving import serving
from kubernetes_asyncio import client as k8s_client
from prometheus_client.parser import text_string_to_metric_families

from karpy.runtime import KubeClient, Manager, errors, kinds
from karpy.runtime._client_metrics import request_labels
from karpy.runtime._flowcontrol import MAX_RETRIES, MAX_RETRY_WAIT, RetryState
from karpy.runtime.ratelimit import Backoff
from karpy.runtime.telemetry import Metrics


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
    async with serving(app) as url:
        state.url = url
        yield state


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


# -- client-go's request metrics (client_go_request_total, _duration_seconds) ---------


def samples(metrics: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples named ``name`` of one scrape, keyed by their sorted labels."""
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples if s.name == name
    }


def gvk(verb: str, kind: str = "namespaces") -> tuple[tuple[str, str], ...]:
    return (("group", ""), ("kind", kind), ("subresource", ""), ("verb", verb),
            ("version", "v1"))  # fmt: skip


async def test_every_attempt_is_counted_and_each_request_timed_once(
    server: Server, client: KubeClient
) -> None:
    """As client-go: a retried request is two attempts in client_go_request_total (by
    status) and one observation of client_go_request_duration_seconds, whose time
    includes the Retry-After wait."""
    metrics = Metrics()
    client._count_requests_in(metrics.client)
    server.faults = [THROTTLED]
    await client.get(kinds.NAMESPACE, "default", live=True)
    assert samples(metrics, "client_go_request_total") == {
        (("code", "429"), ("method", "GET")): 1.0,
        (("code", "200"), ("method", "GET")): 1.0,
    }
    assert samples(metrics, "client_go_request_duration_seconds_count") == {gvk("GET"): 1.0}
    assert samples(metrics, "client_go_request_duration_seconds_sum")[gvk("GET")] >= 0.95


async def test_request_metrics_name_the_verb_as_karpenter_does(
    server: Server, client: KubeClient
) -> None:
    """POST is CREATE, a GET of a collection is LIST; a connection that died before an
    answer is code "<error>"; a watch counts its attempt but is not timed."""
    metrics = Metrics()
    client._count_requests_in(metrics.client)
    await client.list(kinds.NAMESPACE, live=True)
    await client.create(kinds.NAMESPACE, {"metadata": {"name": "team-a"}})
    server.faults = ["drop"]
    with pytest.raises(errors.TransportError):
        await client.create(kinds.NAMESPACE, {"metadata": {"name": "team-b"}})
    stream = client.watch(kinds.NAMESPACE, timeout_seconds=5)
    await anext(stream)
    await stream.aclose()
    assert samples(metrics, "client_go_request_total") == {
        (("code", "200"), ("method", "GET")): 2.0,  # the list and the watch
        (("code", "201"), ("method", "POST")): 1.0,
        (("code", "<error>"), ("method", "POST")): 1.0,
    }
    assert samples(metrics, "client_go_request_duration_seconds_count") == {
        gvk("LIST"): 1.0, gvk("CREATE"): 2.0,
    }


async def test_a_managers_clients_count_into_its_metrics(
    server: Server, client: KubeClient
) -> None:
    """The manager's /metrics counts the requests of the client it was given and of
    every client derived from it: its gated client, the lease renewal's own."""
    manager = Manager(client, metrics_bind_address="0", health_probe_bind_address="0")
    await manager.client.get(kinds.NAMESPACE, "default", live=True)
    async with client.with_own_connections() as renewals:
        await renewals.get(kinds.NAMESPACE, "kube-system")
    assert samples(manager.metrics, "client_go_request_total") == {
        (("code", "200"), ("method", "GET")): 2.0,
    }


@pytest.mark.parametrize(("method", "path", "labels"), [
    ("GET", "/api/v1/namespaces/ns/pods", ("LIST", "", "v1", "pods", "")),
    ("GET", "/api/v1/namespaces/ns/pods/p", ("GET", "", "v1", "pods", "")),
    ("PUT", "/api/v1/namespaces/ns/pods/p/status", ("UPDATE", "", "v1", "pods", "status")),
    ("PATCH", "/api/v1/nodes/n/status", ("PATCH", "", "v1", "nodes", "status")),
    ("POST", "/api/v1/namespaces/ns/pods/p/eviction", ("CREATE", "", "v1", "pods", "eviction")),
    ("DELETE", "/apis/karpenter.sh/v1/nodeclaims/x",
     ("DELETE", "karpenter.sh", "v1", "nodeclaims", "")),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/karpenter",
     ("UPDATE", "coordination.k8s.io", "v1", "leases", "")),
    ("GET", "/api/v1/namespaces/default", ("GET", "", "v1", "namespaces", "")),
    ("GET", "/version", None),
])  # fmt: skip
def test_request_labels_follow_operatorpkgs_parse_of_client_gos_url_template(
    method: str, path: str, labels: tuple[str, ...] | None
) -> None:
    assert request_labels(method, path) == labels
