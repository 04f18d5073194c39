"""A loopback proxy in front of the API server that a test can partition, and that
records every request it lets through.

karpy talks plain HTTP to the proxy (a kubeconfig with no credentials, :meth:`kubeconfig`);
the proxy opens one TLS connection to the API server per client connection, with the
cluster's admin certificate, and copies bytes both ways. Seeing the plain requests is
what lets it record, for each write (any method but GET), the moment its headers were
handed to the server.

A partition (:meth:`partition` ... :meth:`heal`) behaves as TCP does when packets are
dropped: nothing is forwarded in either direction (new connections are accepted but not
connected onwards). The proxy keeps reading what the client sends, as the client's
kernel would keep it for retransmission, so what happens at the heal depends on how the
client let go meanwhile, exactly as on a real network:

* the connection still open, or closed normally (FIN): its bytes are retransmitted, so
  the proxy delivers them at the heal — a write sent during the partition reaches the
  server late;
* the connection reset (RST): the sender's kernel dropped them, and so does the proxy.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

__all__ = ["PartitionProxy", "Request"]


@dataclass(frozen=True)
class Request:
    """One request the proxy handed to the API server: when (wall clock), verb, path."""

    at: float
    method: str
    path: str

    @property
    def lease(self) -> bool:
        """A Lease request (leader election)."""
        return "/leases/" in self.path or self.path.endswith("/leases")


class _Parser:
    """Finds the request lines in the client-to-server byte stream (Content-Length
    bodies, as aiohttp sends them)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._body_left = 0

    def feed(self, data: bytes) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        self._buffer += data
        while True:
            if self._body_left:
                skip = min(self._body_left, len(self._buffer))
                del self._buffer[:skip]
                self._body_left -= skip
                if self._body_left:
                    return found
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return found
            head = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
            del self._buffer[: end + 4]
            method, path, _ = [*head[0].split(" ", 2), "", ""][:3]
            found.append((method, path))
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    self._body_left = int(value.strip())


class PartitionProxy:
    """See the module docstring. ``async with PartitionProxy.for_cluster(cluster)``."""

    def __init__(self, server: str, tls: ssl.SSLContext) -> None:
        url = urlsplit(server)
        self._host = url.hostname or "127.0.0.1"
        self._port = url.port or 443
        self._tls = tls
        self._open = asyncio.Event()
        self._open.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.requests: list[Request] = []
        """Every request handed to the API server, in order."""
        self.dropped = 0
        """Connections reset by the client during a partition (their bytes dropped)."""

    @classmethod
    def for_cluster(cls, cluster: Any, workdir: Path) -> PartitionProxy:
        """A proxy to ``cluster``'s API server with the credentials of its admin
        kubeconfig (written under ``workdir`` for the TLS context)."""
        config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
        user = config["users"][0]["user"]
        ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
        cert, key = workdir / "proxy.crt", workdir / "proxy.key"
        cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        key.chmod(0o600)
        tls = ssl.create_default_context(cadata=ca.decode())
        tls.load_cert_chain(str(cert), str(key))
        return cls(config["clusters"][0]["cluster"]["server"], tls)

    async def __aenter__(self) -> PartitionProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.heal()
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def url(self) -> str:
        """Where clients connect (plain HTTP)."""
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def kubeconfig(self, path: Path) -> str:
        """Write a kubeconfig pointing at the proxy (no credentials) and return its path."""
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "proxy",
            "clusters": [{"name": "proxy", "cluster": {"server": self.url}}],
            "users": [{"name": "proxy", "user": {}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "proxy"}}],
        }))
        return str(path)

    def partition(self) -> None:
        """Stop forwarding, both ways, on every connection, old and new."""
        self._open.clear()

    def heal(self) -> None:
        """Forward again (what was held first, unless its sender reset the connection)."""
        self._open.set()

    def writes(self, *, since: float = 0.0) -> list[Request]:
        """Requests other than GET handed to the server at or after ``since``."""
        return [r for r in self.requests if r.method != "GET" and r.at >= since]

    # -- one connection ----------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await _Connection(self, reader, writer).run()
        finally:
            self._tasks.discard(task)
            writer.close()


class _Connection:
    def __init__(
        self, proxy: PartitionProxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.proxy = proxy
        self.reader = reader
        self.writer = writer
        self.held = bytearray()
        self.eof = False
        self.reset = False
        self.changed = asyncio.Event()
        self.parser = _Parser()

    async def run(self) -> None:
        receiving = asyncio.create_task(self._receive())
        try:
            await self._forward()
        finally:
            receiving.cancel()
            with contextlib.suppress(BaseException):
                await receiving

    async def _receive(self) -> None:
        """Read from the client all the time (its kernel would keep the bytes)."""
        try:
            while data := await self.reader.read(65536):
                self.held += data
                self.changed.set()
        except (ConnectionResetError, OSError):
            self.reset = True
        else:
            self.eof = True
        self.changed.set()

    async def _forward(self) -> None:
        proxy = self.proxy
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        answering: asyncio.Task[None] | None = None
        try:
            while True:
                await proxy._open.wait()
                if self.reset:
                    if self.held:
                        proxy.dropped += 1
                    return  # the sender dropped what it had not delivered
                if self.held:
                    if upstream is None:
                        upstream = await asyncio.open_connection(
                            proxy._host, proxy._port, ssl=proxy._tls
                        )
                        answering = asyncio.create_task(self._answer(upstream[0]))
                        continue  # the partition may have begun meanwhile
                    data = bytes(self.held)
                    self.held.clear()
                    now = time.time()
                    for method, path in self.parser.feed(data):
                        proxy.requests.append(Request(now, method, path))
                    upstream[1].write(data)
                    await upstream[1].drain()
                    continue
                if self.eof:
                    if answering is not None:  # let the server answer what it was sent
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(asyncio.shield(answering), 5)
                    return
                self.changed.clear()
                await self.changed.wait()
        except (ConnectionError, OSError, ssl.SSLError):
            return
        finally:
            if answering is not None:
                answering.cancel()
            if upstream is not None:
                upstream[1].transport.abort()

    async def _answer(self, upstream: asyncio.StreamReader) -> None:
        """Server to client, held while partitioned."""
        with contextlib.suppress(ConnectionError, OSError, ssl.SSLError):
            while data := await upstream.read(65536):
                await self.proxy._open.wait()
                if self.reset:
                    return
                self.writer.write(data)
                await self.writer.drain()
        self.writer.close()
