"""Running a simulation from what the command line names: a snapshot file or a live
cluster, ``-f`` files of changed objects, the provider and the controllers' settings.

A live cluster is read once into an in-memory snapshot first (reads only), so the
unchanged and the what-if run see the same moment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpy.controllers.settings import Settings
from karpy.runtime import KubeClient
from karpy.tools.simulate._report import Report
from karpy.tools.simulate._simulate import simulate
from karpy.tools.view import (
    ReadOnlyClient,
    Snapshot,
    SnapshotError,
    ViewError,
    open_view,
    take_snapshot,
)

__all__ = ["SimulateOptions", "load_live", "run_simulation"]


@dataclass(frozen=True, kw_only=True)
class SimulateOptions:
    """What to simulate: exactly one of ``snapshot`` (a file) and ``kubeconfig``."""

    snapshot: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    what_if: Sequence[str] = ()
    """Files of objects (usually NodePools) replacing or adding to the cluster's."""
    provider: str | None = None
    provider_settings: Mapping[str, str] = field(default_factory=dict)
    settings: Settings = field(default_factory=Settings)


async def load_live(kubeconfig: str | None, context: str | None = None) -> Snapshot:
    """Read a live cluster into a snapshot through a :class:`ReadOnlyClient`."""
    try:
        client = await KubeClient.from_kubeconfig(kubeconfig, context=context)
    except Exception as exc:
        raise ViewError(f"cannot connect to the cluster: {exc}") from exc
    async with ReadOnlyClient(client, owns=True, tool="karpy simulate") as reader:
        source = f"cluster ({kubeconfig or 'default kubeconfig'})"
        return await take_snapshot(reader, source=source)


async def run_simulation(options: SimulateOptions) -> Report:
    """Simulate (see the module docstring); with ``what_if`` files the report carries
    the unchanged run as ``baseline``. Raises :class:`SnapshotError` or
    :class:`ViewError` with a message for the user."""
    if (options.snapshot is None) == (options.kubeconfig is None):
        raise ViewError("give exactly one of a snapshot file and a kubeconfig")
    if options.snapshot is not None:
        snapshot = Snapshot.load(options.snapshot)
    else:
        snapshot = await load_live(options.kubeconfig, options.context)
    changes: Snapshot | None = None
    for path in options.what_if:
        loaded = Snapshot.load(path)
        if not loaded.objects:
            raise SnapshotError(f"{path}: holds no object karpy reads (NodePools, ...)")
        changes = loaded if changes is None else changes.with_objects(loaded)
    unchanged = await _simulate(snapshot, None, options)
    if changes is None:
        return unchanged
    changed = await _simulate(snapshot, changes, options)
    return dataclasses.replace(changed, what_if=tuple(options.what_if), baseline=unchanged)


async def _simulate(snapshot: Snapshot, changes: Snapshot | None,
                    options: SimulateOptions) -> Report:
    async with open_view(snapshot, what_if=changes, provider=options.provider,
                         provider_settings=options.provider_settings,
                         settings=options.settings) as view:
        return await simulate(view)
