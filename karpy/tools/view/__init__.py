"""A read-only view of a cluster for the tools: a live cluster (kubeconfig) or a
snapshot file, read into the controllers' own cluster model, with the real provisioner
and disruption controller built on it. ::

    from karpy.tools.view import LiveCluster, Snapshot, open_view

    async with open_view(Snapshot.load("cluster.yaml")) as view:
        results = await view.schedule()          # what provisioning would create
        view.land(results)                       # as if it had launched (in memory)
        decision = await view.disruption_pass()  # what disruption would start next
        view.cluster.nodes(); view.pending_pods(); await view.instance_types("default")

    async with open_view(LiveCluster(kubeconfig="~/.kube/config")) as view:
        ...  # view.cluster follows the watches while the block runs

Nothing here writes: reads go through :class:`ReadOnlyClient`, whose write methods
raise :class:`ReadOnlyError`; Events go to a :class:`CapturingRecorder`.
:func:`take_snapshot` / :meth:`Snapshot.dump` write the snapshot files ``karpy
snapshot`` makes.
"""

from karpy.tools.view._kinds import CORE_KINDS, node_class_kinds, view_kinds
from karpy.tools.view._readonly import ReadOnlyClient, ReadOnlyError
from karpy.tools.view._recorder import CapturedEvent, CapturingRecorder
from karpy.tools.view._snapshot import Snapshot, SnapshotError, take_snapshot
from karpy.tools.view._static import SnapshotClient
from karpy.tools.view._view import (
    DEFAULT_PROVIDER,
    ClusterView,
    DisruptionPass,
    LiveCluster,
    ViewError,
    guess_provider,
    open_view,
)

__all__ = [
    "CORE_KINDS",
    "DEFAULT_PROVIDER",
    "CapturedEvent",
    "CapturingRecorder",
    "ClusterView",
    "DisruptionPass",
    "LiveCluster",
    "ReadOnlyClient",
    "ReadOnlyError",
    "Snapshot",
    "SnapshotClient",
    "SnapshotError",
    "ViewError",
    "guess_provider",
    "node_class_kinds",
    "open_view",
    "take_snapshot",
    "view_kinds",
]
