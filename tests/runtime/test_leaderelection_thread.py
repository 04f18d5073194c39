"""Lease renewal from a thread of its own (``LeaderElectionConfig.renew_in_thread``): it
goes on while the main event loop is busy, and stops when the main loop is wedged for
longer than the renew deadline. A stub API server in its own thread keeps the Lease, so
it answers while the test blocks the main loop."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from karpy.runtime import Client, LeaderElectionConfig
from karpy.runtime.errors import LeaderElectionLost
from karpy.runtime.leaderelection import LeaderElector

_PATH = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"


class _Leases:
    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.renewals: list[tuple[float, str]] = []  # (time, thread of the request's client)
        self.lock = threading.Lock()


@pytest.fixture
def leases() -> Iterator[tuple[_Leases, str]]:
    state = _Leases()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def _answer(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            with state.lock:
                lease = state.lease
            if lease is None:
                self._answer(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
            else:
                self._answer(200, lease)

        def _store(self, code: int) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body.setdefault("metadata", {})["resourceVersion"] = str(time.monotonic_ns())
            with state.lock:
                state.lease = body
                if self.command == "PUT":
                    state.renewals.append((time.monotonic(), self.headers["User-Agent"]))
            self._answer(code, body)

        def do_POST(self) -> None:
            self._store(201)

        def do_PUT(self) -> None:
            self._store(200)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _elector(host: str, *, renew_deadline: float) -> tuple[LeaderElector, Client]:
    client = Client(k8s_client.ApiClient(k8s_client.Configuration(host=host)), timeout=5,
                    owns_api_client=True)
    config = LeaderElectionConfig(
        name="karpy", namespace="ns", identity="me", lease_duration=renew_deadline + 1,
        renew_deadline=renew_deadline, retry_period=0.2, renew_in_thread=True,
    )
    return LeaderElector(client, config), client


async def test_renewals_go_on_while_the_main_loop_is_busy(
    leases: tuple[_Leases, str],
) -> None:
    state, host = leases
    elector, client = _elector(host, renew_deadline=3.0)
    window: list[float] = []

    async def lead() -> None:
        while len(state.renewals) < 2:  # bounded by the test timeout
            await _yield_a_while()
        start = time.monotonic()
        time.sleep(1.2)  # noqa: ASYNC251 - the fault: 1.2 s of synchronous work on the loop
        window.extend((start, time.monotonic()))

    try:
        await elector.run(lead)
    finally:
        await client.close()
    during = [t for t, _ in state.renewals if window[0] <= t <= window[1]]
    assert len(during) >= 2, f"renewals {state.renewals}, busy {window}"
    assert state.lease is not None and state.lease["spec"]["holderIdentity"] == ""  # released


async def test_a_main_loop_wedged_past_the_renew_deadline_loses_the_lease(
    leases: tuple[_Leases, str],
) -> None:
    state, host = leases
    elector, client = _elector(host, renew_deadline=1.0)

    async def lead() -> None:
        while not state.renewals:
            await _yield_a_while()
        time.sleep(2.5)  # noqa: ASYNC251 - the fault: wedged past the renew deadline
        await _yield_a_while(60)

    try:
        with pytest.raises(LeaderElectionLost):
            await elector.run(lead)
    finally:
        await client.close()
    assert not elector.is_leader


async def _yield_a_while(seconds: float = 0.05) -> None:
    import asyncio

    await asyncio.sleep(seconds)
