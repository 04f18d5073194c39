"""What wakes the provisioner: pods that need capacity, and nodes going away.

Karpenter runs two controllers for this (provisioner.trigger.pod and
provisioner.trigger.node). Here they are handlers on the shared Pod and Node informers,
attached while the controllers run: a pod event costs a dict lookup and a set insert,
not a work-queue round trip, which matters when a thousand pods arrive at once.
Pods that stay pending are re-examined by the provisioner every 10 s on its own.
"""

from __future__ import annotations

import asyncio

from karpy.apis.taints import TAINT_DISRUPTED
from karpy.controllers.provisioning.provisioner import Provisioner
from karpy.runtime import FuncHandler, Informer, Object
from karpy.state import Cluster
from karpy.state.pods import is_provisionable, pod_key

__all__ = ["ProvisionerTrigger"]


class ProvisionerTrigger:
    """Triggers the provisioner's batcher from pod and node events (a Runnable)."""

    name = "provisioner.trigger"
    needs_leader_election = True

    def __init__(
        self, provisioner: Provisioner, cluster: Cluster, *, pods: Informer, nodes: Informer
    ) -> None:
        self._provisioner = provisioner
        self._cluster = cluster
        self._pods = pods
        self._nodes = nodes

    def on_pod(self, pod: Object) -> None:
        """A pod changed: trigger if it needs capacity nobody is bringing yet."""
        if is_provisionable(pod) and not self._cluster.is_nominated(pod_key(pod)):
            self._provisioner.trigger(pod["metadata"].get("uid") or pod_key(pod))

    def on_node(self, node: Object) -> None:
        """A node changed: trigger if it is going away (its pods will need a home)."""
        meta = node["metadata"]
        disrupted = any(
            t.get("key") == TAINT_DISRUPTED for t in (node.get("spec") or {}).get("taints") or ()
        )
        if disrupted or meta.get("deletionTimestamp"):
            self._provisioner.trigger(meta.get("uid") or meta["name"])

    async def run(self) -> None:
        """Listen until cancelled (objects already cached are replayed at once)."""
        pods = self._pods.add_handler(
            FuncHandler(add=self.on_pod, update=lambda _old, new: self.on_pod(new))
        )
        nodes = self._nodes.add_handler(
            FuncHandler(add=self.on_node, update=lambda _old, new: self.on_node(new))
        )
        self._cluster.add_release_handler(self._provisioner.release)
        try:
            await asyncio.Event().wait()
        finally:
            self._pods.remove_handler(pods)
            self._nodes.remove_handler(nodes)
