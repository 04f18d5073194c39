"""A read-only, live :class:`~karpy.state.Cluster` for the tools: Nodes, NodeClaims,
Pods and NodePools watched through :class:`karpy.runtime.Cache` informers, with a
callback on every change.

Only those four kinds are watched (not DaemonSets, volumes or Namespaces, which the
autoscaler's model also follows), so a viewer needs no more than get/list/watch on
them: see docs/tools.md for the RBAC. Nothing here writes to the API server.

Why not :func:`karpy.tools.view.open_view`: a view also follows DaemonSets, volumes,
Namespaces, PodDisruptionBudgets and builds the provisioner and disruption controller
on them, so it needs read access to all of those and more memory; a live viewer of
nodes needs four kinds and a callback on each change, which the view does not offer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress

from karpy.runtime import Cache, FuncHandler, ListerWatcher, Object, kinds
from karpy.state import NODE_CLAIM, NODE_POOL, Cluster

__all__ = ["WATCHED_KINDS", "watched_cluster"]

WATCHED_KINDS = (kinds.NODE, NODE_CLAIM, kinds.POD, NODE_POOL)
"""What :func:`watched_cluster` lists and watches."""


def _handler(
    update: Callable[[Object], None], delete: Callable[[Object], None], changed: Callable[[], None]
) -> FuncHandler:
    def on_update(obj: Object) -> None:
        update(obj)
        changed()

    def on_delete(obj: Object) -> None:
        delete(obj)
        changed()

    return FuncHandler(on_update, lambda _old, new: on_update(new), on_delete)


@asynccontextmanager
async def watched_cluster(
    client: ListerWatcher, *, changed: Callable[[], None], sync_timeout: float = 60.0
) -> AsyncIterator[Cluster]:
    """A cluster model kept current by watches while the block runs; ``changed`` is
    called (on the event loop, never awaited) after every event.

    Yields once every informer has listed; raises ``TimeoutError`` naming the kinds that
    did not list within ``sync_timeout`` seconds (a CRD not installed, or no list/watch
    permission on it).
    """
    cluster = Cluster()
    cache = Cache(client)
    wiring = (
        (kinds.NODE, cluster.update_node, cluster.delete_node),
        (NODE_CLAIM, cluster.update_nodeclaim, cluster.delete_nodeclaim),
        (kinds.POD, cluster.update_pod, cluster.delete_pod),
        (NODE_POOL, cluster.update_nodepool, cluster.delete_nodepool),
    )
    for kind, update, delete in wiring:
        cache.informer(kind).add_handler(_handler(update, delete, changed))
    task = asyncio.create_task(cache.run(), name="karpy-tools:cache")
    try:
        try:
            await cache.wait_for_sync(timeout=sync_timeout)
        except TimeoutError:
            if task.done():
                task.result()
            missing = [str(i.kind) for i in cache.informers() if not i.has_synced]
            raise TimeoutError(
                f"could not list {', '.join(missing)} within {sync_timeout:g}s: are karpy's "
                "CRDs installed, and may this account get/list/watch them?"
            ) from None
        yield cluster
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
