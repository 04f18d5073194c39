"""The manager's HTTP endpoints: /healthz, /readyz and /metrics.

Checks are named callables that return normally when healthy and raise (or return
False) when not; ``/healthz`` and ``/readyz`` answer 200 "ok" if every check of their
kind passes, 500 listing the failures otherwise — controller-runtime's behaviour, so a
kubelet probe config copied from a Go operator works unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

__all__ = ["Check", "HttpServer", "ProbeSet", "parse_bind_address"]

Check = Callable[[], bool | None]


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """``":8080"`` → ("0.0.0.0", 8080); ``"127.0.0.1:0"`` → ephemeral port; ``"0"`` → off."""
    if address in ("", "0"):
        return None
    host, _, port = address.rpartition(":")
    return (host or "0.0.0.0", int(port))


@dataclass
class ProbeSet:
    """Named checks for one probe path."""

    checks: dict[str, Check] = field(default_factory=dict)

    def add(self, name: str, check: Check) -> None:
        """Register ``check`` under ``name`` (a name can be registered once)."""
        if name in self.checks:
            raise ValueError(f"check {name!r} is registered already")
        self.checks[name] = check

    def run(self) -> tuple[bool, str]:
        """Run every check; (all passed, a report naming each check)."""
        lines = []
        healthy = True
        for name, check in self.checks.items():
            try:
                ok = check() is not False
                detail = ""
            except Exception as exc:
                ok, detail = False, f": {exc}"
            healthy &= ok
            lines.append(f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}{detail}")
        return healthy, "\n".join(lines)


class HttpServer:
    """An aiohttp server on one address serving a fixed set of GET routes."""

    def __init__(self, host: str, port: int) -> None:
        self._host = host
        self._port = port
        self._app = web.Application()
        self.bound_port: int | None = None
        self.started = asyncio.Event()

    def probe(self, path: str, probes: ProbeSet) -> None:
        """Serve ``probes`` at ``path`` (``?verbose`` shows the per-check report)."""

        async def handle(request: web.Request) -> web.Response:
            ok, report = probes.run()
            if ok:
                body = report + "\nok" if "verbose" in request.query else "ok"
                return web.Response(text=body)
            return web.Response(status=500, text=report + f"\n{path.strip('/')} check failed")

        self._app.router.add_get(path, handle)

    def metrics(self, path: str, render: Callable[[], bytes]) -> None:
        """Serve the Prometheus text exposition produced by ``render`` at ``path``."""

        async def handle(request: web.Request) -> web.Response:
            return web.Response(
                body=render(),
                content_type="text/plain",
                charset="utf-8",
                headers={"X-Content-Type": "version=0.0.4"},
            )

        self._app.router.add_get(path, handle)

    async def run(self) -> None:
        """Serve until cancelled."""
        runner = web.AppRunner(
            self._app, access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self._host, self._port)
            await site.start()
            server = site._server
            sockets = getattr(server, "sockets", None) or []
            self.bound_port = sockets[0].getsockname()[1] if sockets else self._port
            self.started.set()
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()
