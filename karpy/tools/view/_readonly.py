"""A client that can only read: what every tool talks to the cluster through.

:class:`ReadOnlyClient` implements the :class:`~karpy.runtime.Client` protocol (so the
controllers' own classes accept it) and the informers' ``ListerWatcher``; it delegates
``get``/``list``/``list_page``/``watch`` to the client it wraps — a live cluster's, or a
snapshot's — and refuses every write with :class:`ReadOnlyError` before anything is
sent. The tools only ever call the controllers' deciding code, never their writing code;
this makes that a guarantee rather than a convention, so a bug can never change a
cluster.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from karpy.runtime import (
    Client,
    Kind,
    KubeClient,
    ListerWatcher,
    Object,
    ObjectList,
    Reader,
    WatchEvent,
)

__all__ = ["ReadOnlyClient", "ReadOnlyError", "Reads"]

Selector = str | Mapping[str, str] | None


class ReadOnlyError(RuntimeError):
    """A tool tried to write to the cluster (a bug: tools only read)."""


class Reads(Client, ListerWatcher, Protocol):
    """What a view reads through: a client (a live cluster's ``KubeClient`` or a
    snapshot's client) that informers can also list and watch."""


class ReadOnlyClient:
    """Reads through ``inner``; every write raises :class:`ReadOnlyError` (see the
    module docstring). ``reader`` serves reads of the kinds it caches, as
    :meth:`KubeClient.with_reader` does. Closing it closes ``inner`` when ``owns``."""

    def __init__(
        self, inner: Reads, *, reader: Reader | None = None, owns: bool = False,
        tool: str = "karpy",
    ) -> None:
        self._inner = inner
        self._reader = reader
        self._owns = owns
        self._tool = tool
        self._closed = False
        self.timeout = float(getattr(inner, "timeout", 30.0))

    @property
    def inner(self) -> Reads:
        """The client reads go to."""
        return self._inner

    def with_reader(self, reader: Reader | None) -> ReadOnlyClient:
        """A read-only client over the same reads whose get/list consult ``reader``."""
        return ReadOnlyClient(self._inner, reader=reader, owns=False, tool=self._tool)

    def with_write_gate(self, gate: object) -> ReadOnlyClient:
        """A read-only client over the same reads and reader: every write is refused
        already, so there is nothing for ``gate`` to hold back (a
        :class:`~karpy.runtime.Manager` built on this client, as a view's is, asks)."""
        return ReadOnlyClient(self._inner, reader=self._reader, owns=False, tool=self._tool)

    @property
    def api_client(self) -> NoReturn:
        """Refused: the raw API client could write."""
        self._refuse("use the raw API client", "", "")

    async def close(self) -> None:
        """Close the wrapped client if this one owns it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns and isinstance(self._inner, KubeClient):
            await self._inner.close()

    async def __aenter__(self) -> ReadOnlyClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- reads -----------------------------------------------------------------------

    async def get(
        self, kind: Kind, name: str, *, namespace: str | None = None, live: bool = False,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Object:
        """One object (from the reader when it serves ``kind``)."""
        if not live and self._reader is not None and self._reader.serves(kind):
            return self._reader.get(kind, name, namespace=namespace)
        return await self._inner.get(kind, name, namespace=namespace)

    async def list(
        self, kind: Kind, *, namespace: str | None = None, label_selector: Selector = None,
        field_selector: str | None = None, live: bool = False,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> builtins.list[Object]:
        """Every matching object (from the reader when it serves ``kind``)."""
        if not live and self._reader is not None and self._reader.serves(kind):
            return self._reader.list(
                kind, namespace=namespace, label_selector=label_selector,
                field_selector=field_selector,
            )
        return await self._inner.list(
            kind, namespace=namespace, label_selector=label_selector,
            field_selector=field_selector,
        )

    async def list_page(
        self, kind: Kind, *, namespace: str | None = None, label_selector: Selector = None,
        field_selector: str | None = None, limit: int | None = None,
        continue_token: str | None = None, resource_version: str | None = None,
        timeout: float | None = None, frozen: bool = False,  # noqa: ASYNC109
    ) -> ObjectList:
        """One page of a list (informers)."""
        return await self._inner.list_page(
            kind, namespace=namespace, label_selector=label_selector,
            field_selector=field_selector, limit=limit, continue_token=continue_token,
            resource_version=resource_version, timeout=timeout, frozen=frozen,
        )

    async def watch(
        self, kind: Kind, *, namespace: str | None = None,
        resource_version: str | None = None, label_selector: Selector = None,
        field_selector: str | None = None, timeout_seconds: int = 300,
        allow_bookmarks: bool = True, inactivity_timeout: float | None = 120.0,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Change events (informers)."""
        stream = self._inner.watch(
            kind, namespace=namespace, resource_version=resource_version,
            label_selector=label_selector, field_selector=field_selector,
            timeout_seconds=timeout_seconds, allow_bookmarks=allow_bookmarks,
            inactivity_timeout=inactivity_timeout,
        )
        try:
            async for event in stream:
                yield event
        finally:
            await stream.aclose()

    # -- writes: refused ---------------------------------------------------------------

    def _refuse(self, verb: str, kind: object, name: object) -> NoReturn:
        what = f" {kind} {name}".rstrip() if kind or name else ""
        raise ReadOnlyError(
            f"{self._tool} is read-only: refused to {verb}{what} (this is a bug in karpy; "
            "please report it)"
        )

    async def create(self, kind: Kind, obj: Mapping[str, Any], *a: Any, **kw: Any) -> NoReturn:
        """Refused."""
        self._refuse("create", kind, (obj.get("metadata") or {}).get("name", ""))

    async def update(self, kind: Kind, obj: Mapping[str, Any], *a: Any, **kw: Any) -> NoReturn:
        """Refused."""
        self._refuse("update", kind, (obj.get("metadata") or {}).get("name", ""))

    async def update_status(
        self, kind: Kind, obj: Mapping[str, Any], *a: Any, **kw: Any
    ) -> NoReturn:
        """Refused."""
        self._refuse("update the status of", kind, (obj.get("metadata") or {}).get("name", ""))

    async def patch(self, kind: Kind, name: str, *a: Any, **kw: Any) -> NoReturn:
        """Refused."""
        self._refuse("patch", kind, name)

    async def patch_status(self, kind: Kind, name: str, *a: Any, **kw: Any) -> NoReturn:
        """Refused."""
        self._refuse("patch the status of", kind, name)

    async def apply(self, kind: Kind, obj: Mapping[str, Any], *a: Any, **kw: Any) -> NoReturn:
        """Refused."""
        self._refuse("apply", kind, (obj.get("metadata") or {}).get("name", ""))

    async def delete(self, kind: Kind, name: str, *a: Any, **kw: Any) -> NoReturn:
        """Refused."""
        self._refuse("delete", kind, name)


if TYPE_CHECKING:  # mypy proves the read-only client stands in for the real one

    def _conforms(client: ReadOnlyClient) -> tuple[Client, ListerWatcher]:
        return client, client
