"""``metrics.cluster_state``: karpenter_cluster_state_node_count (machines the cluster
model knows: launched NodeClaims joined to their Nodes, and other Nodes) and
karpenter_cluster_state_synced (1 once the model can be trusted),
karpenter_cluster_state_unsynced_time_seconds (how long it has not been, 0 when it is)
and karpenter_build_info (a constant 1 labelled with karpy's version).

While the model stays unsynced for more than 30 s it also logs Karpenter's "cluster is
waiting on sync for extended duration" error, every 10 s, naming the NodeClaims it
waits on: an unsynced model stops provisioning and disruption, and without the line
nothing would say why."""

from __future__ import annotations

import logging
import platform
from datetime import datetime
from typing import Final

from karpy import __version__
from karpy.controllers.metrics._store import Gauge, GaugeStore, Sample
from karpy.runtime import Clock, Result
from karpy.state.cluster import Cluster

__all__ = [
    "BUILD_INFO", "GAUGES", "NODE_COUNT", "SYNCED", "UNSYNCED_TIME", "ClusterStateMetrics",
    "build_info",
]

NODE_COUNT: Final = Gauge(
    "karpenter_cluster_state_node_count", "Current count of nodes in cluster state", ()
)
SYNCED: Final = Gauge(
    "karpenter_cluster_state_synced",
    "Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims "
    "and nodes that are stored in the APIServer have the same representation as "
    "Karpenter's cluster state",
    (),
)
UNSYNCED_TIME: Final = Gauge(
    "karpenter_cluster_state_unsynced_time_seconds",
    "The time for which cluster state is not synced", (),
)
BUILD_INFO: Final = Gauge(
    "karpenter_build_info",
    "A metric with a constant '1' value labeled by version from which karpenter was built.",
    ("version", "goversion", "goarch", "commit"),
)
GAUGES: Final = (NODE_COUNT, SYNCED, UNSYNCED_TIME, BUILD_INFO)

log = logging.getLogger("controller")

# Karpenter's Cluster.Synced: log once unsynced this long, then at most this often.
_UNSYNCED_LOG_AFTER: Final = 30.0
_UNSYNCED_LOG_EVERY: Final = 10.0
_NAMED: Final = 10  # NodeClaims named in the line (the count is given in full)

# Go's GOARCH names for the machines Python reports, so a dashboard grouping by goarch
# reads the same.
_GOARCH: Final = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "amd64": "amd64"}


def build_info() -> Sample:
    """karpenter_build_info for this karpy: ``goversion`` holds the Python version (the
    runtime karpy is built on), ``commit`` is empty (a wheel does not record one)."""
    machine = platform.machine().lower()
    return Sample(BUILD_INFO, {
        "version": __version__,
        "goversion": f"python{platform.python_version()}",
        "goarch": _GOARCH.get(machine, machine),
        "commit": "",
    }, 1.0)


class ClusterStateMetrics:
    """The ``metrics.cluster_state`` singleton reconciler."""

    name = "metrics.cluster_state"

    def __init__(
        self, *, cluster: Cluster, store: GaugeStore, clock: Clock | None = None
    ) -> None:
        self._cluster = cluster
        self._store = store
        self._clock = clock
        self._unsynced_since: datetime | None = None
        self._logged_at: datetime | None = None
        store.update("build", [build_info()])

    async def reconcile(self) -> Result:
        """Export the node count, whether the model is synced and for how long not."""
        synced = self._cluster.synced
        unsynced = 0.0
        if synced:
            self._unsynced_since = self._logged_at = None
        elif self._clock is not None:
            now = self._clock.now()
            if self._unsynced_since is None:
                self._unsynced_since = now
            unsynced = (now - self._unsynced_since).total_seconds()
            if unsynced > _UNSYNCED_LOG_AFTER and (
                self._logged_at is None
                or (now - self._logged_at).total_seconds() > _UNSYNCED_LOG_EVERY
            ):
                self._logged_at = now
                self._log_unsynced(unsynced)
        self._store.update("cluster", [
            Sample(NODE_COUNT, {}, float(len(self._cluster.nodes()))),
            Sample(SYNCED, {}, 1.0 if synced else 0.0),
            Sample(UNSYNCED_TIME, {}, unsynced),
        ])
        return Result()

    def _log_unsynced(self, seconds: float) -> None:
        waiting = self._cluster.waiting_on()
        extra: dict[str, object] = {"error": "waiting on cluster sync",
                                    "duration": f"{int(seconds)}s"}
        if waiting:
            extra["nodeclaims"] = waiting[:_NAMED]
            extra["unlaunched"] = len(waiting)
        log.error("cluster is waiting on sync for extended duration", extra=extra)
