"""Probe endpoints answer like controller-runtime's."""

from __future__ import annotations

import asyncio

import aiohttp

from karpy.runtime._http import HttpServer, ProbeSet, parse_bind_address


def test_bind_addresses() -> None:
    assert parse_bind_address(":8080") == ("0.0.0.0", 8080)
    assert parse_bind_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_bind_address("0") is None


async def test_probes_report_each_failing_check() -> None:
    ready = ProbeSet()
    state = {"synced": False}
    ready.add("cache-sync", lambda: state["synced"])

    def broken() -> None:
        raise RuntimeError("no connection")

    healthy = ProbeSet()
    healthy.add("ping", lambda: True)
    server = HttpServer("127.0.0.1", 0)
    server.probe("/readyz", ready)
    server.probe("/healthz", healthy)
    server.metrics("/metrics", lambda: b"# nothing\n")
    task = asyncio.create_task(server.run())
    await server.started.wait()
    base = f"http://127.0.0.1:{server.bound_port}"
    async with aiohttp.ClientSession() as http:
        response = await http.get(f"{base}/readyz")
        assert response.status == 500 and "[-]cache-sync failed" in await response.text()
        state["synced"] = True
        response = await http.get(f"{base}/readyz")
        assert response.status == 200 and await response.text() == "ok"
        ready.add("db", broken)
        response = await http.get(f"{base}/readyz?verbose")
        text = await response.text()
        assert response.status == 500 and "[+]cache-sync ok" in text
        assert "[-]db failed: no connection" in text
        assert (await http.get(f"{base}/healthz")).status == 200
        assert await (await http.get(f"{base}/metrics")).text() == "# nothing\n"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
