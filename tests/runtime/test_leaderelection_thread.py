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

from karpy.runtime import KubeClient, LeaderElectionConfig
from karpy.runtime.errors import LeaderElectionLost
from karpy.runtime.leaderelection import LeaderElector
from karpy.runtime.testing import eventually

_PATH = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"


class _Leases:
    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.renewals: list[tuple[float, str]] = []  # (time, thread of the request's client)
        self.lock = threading.Lock()
        self.partitioned = False  # Lease requests answered 503 (the leader cannot renew)
        self.held: list[tuple[float, str]] = []  # other writes: (arrival, how they ended)


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
            if state.partitioned:
                self._answer(503, {"kind": "Status", "code": 503})
                return
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
            if not self.path.startswith(_PATH):
                self._hold()
            elif state.partitioned:
                self._answer(503, {"kind": "Status", "code": 503})
            else:
                self._store(200)

        def _hold(self) -> None:
            """Any other write: read it, never answer, and note how the client let go
            (a reset drops what it sent; a FIN would let the bytes through later)."""
            self.rfile.read(int(self.headers["Content-Length"]))
            arrived = time.monotonic()
            self.connection.settimeout(30)
            try:
                ended = "FIN" if self.connection.recv(1) == b"" else "more data"
            except ConnectionResetError:
                ended = "RST"
            except TimeoutError:
                ended = "still open"
            with state.lock:
                state.held.append((arrived, ended))
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _elector(host: str, *, renew_deadline: float) -> tuple[LeaderElector, KubeClient]:
    client = KubeClient(k8s_client.ApiClient(k8s_client.Configuration(host=host)), timeout=5,
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


async def test_a_write_in_flight_at_the_deadline_is_cut_off_and_reset(
    leases: tuple[_Leases, str],
) -> None:
    """renew_in_thread: the renewals fail (the API server answers 503 to them); at the
    renew deadline — measured from the start of the last successful renewal — a write
    still waiting for its answer is cut off with NotLeader and its connection reset,
    is_leader is already false, and a later write is refused without being sent."""
    from karpy.runtime import errors, kinds

    state, host = leases
    elector, client = _elector(host, renew_deadline=1.0)
    gated = client.with_write_gate(elector)
    seen: dict[str, Any] = {}

    async def lead() -> None:
        while len(state.renewals) < 2:
            await _yield_a_while()
        state.partitioned = True
        try:
            await gated.update(
                kinds.CONFIG_MAP,
                {"metadata": {"name": "w", "namespace": "ns", "resourceVersion": "1"}},
                timeout=30,
            )
        except errors.NotLeader as exc:
            seen["cut"] = (time.monotonic(), exc, elector.is_leader)
        try:
            await gated.update(kinds.CONFIG_MAP, {"metadata": {"name": "w", "namespace": "ns"}})
        except errors.NotLeader as exc:
            seen["refused"] = exc
        await _yield_a_while(60)

    try:
        with pytest.raises(LeaderElectionLost):
            await elector.run(lead)
    finally:
        await client.close()
    assert "cut" in seen, "the write in flight was not cut off"
    cut_at, _, leader_then = seen["cut"]
    last_renewal = state.renewals[-1][0]  # arrival: the renewal started no later
    assert leader_then is False
    assert cut_at - last_renewal <= 1.0 + 0.3  # renew_deadline (+ scheduling slack)
    assert cut_at - last_renewal < 2.0  # lease_duration: before anyone could take over
    assert isinstance(seen.get("refused"), errors.NotLeader)
    await eventually(lambda: state.held, within=10, what="the server noticing the hang-up")
    assert [how for _, how in state.held] == ["RST"]
