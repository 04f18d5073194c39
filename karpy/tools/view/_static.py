"""The API a snapshot answers: the runtime's in-memory :class:`FakeClient`, loaded with
the snapshot's objects, plus the two reads informers make (``list_page`` and ``watch``)
so that the real :class:`~karpy.runtime.Cache` and informers run on it unchanged.

A snapshot never changes, so its watch delivers nothing and ends only when cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING

from karpy.runtime import Clock, ObjectList, WatchEvent
from karpy.runtime.kinds import Kind
from karpy.runtime.testing import FakeClient
from karpy.tools.view._snapshot import Snapshot

__all__ = ["SnapshotClient"]

Selector = str | Mapping[str, str] | None


class SnapshotClient(FakeClient):
    """A :class:`FakeClient` holding a snapshot's objects, listable and watchable."""

    def __init__(self, snapshot: Snapshot, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        for kind, items in snapshot.objects.items():
            for obj in items.values():
                self.add(kind, obj)
        # FakeClient records writes; none came from a caller, so start from a clean slate.
        self.calls.clear()

    async def list_page(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  # Client's signature
        frozen: bool = False,
    ) -> ObjectList:
        """Every matching object in one page (a snapshot is small enough)."""
        items = await self.list(
            kind, namespace=namespace, label_selector=label_selector,
            field_selector=field_selector,
        )
        return ObjectList(items=items, resource_version="1", continue_token=None)

    async def watch(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: Selector = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
        inactivity_timeout: float | None = 120.0,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Nothing ever changes: wait until cancelled."""
        await asyncio.Event().wait()
        return
        yield  # a generator, as Client.watch is


if TYPE_CHECKING:  # mypy proves a snapshot's client serves controllers and informers
    from karpy.runtime import Client, ListerWatcher

    def _conforms(client: SnapshotClient) -> tuple[Client, ListerWatcher]:
        return client, client
