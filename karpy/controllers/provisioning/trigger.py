"""What wakes the provisioner: pods that need capacity, nodes going away, and NodePools
that become usable.

Karpenter runs two controllers for the first two (provisioner.trigger.pod and
provisioner.trigger.node). Here all three are handlers on the shared informers,
attached while the controllers run: a pod event costs a dict lookup and a set insert,
not a work-queue round trip, which matters when a thousand pods arrive at once. A
NodePool turning Ready (or changing its spec) also starts a round, so pods waiting for a
new pool do not wait for their retry: pods that stay pending are re-examined by the
provisioner every 10 s on its own.
"""

from __future__ import annotations

import asyncio

from karpy.apis.conditions import condition_is_true
from karpy.apis.taints import has_disrupted_taint
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
        self,
        provisioner: Provisioner,
        cluster: Cluster,
        *,
        pods: Informer,
        nodes: Informer,
        nodepools: Informer,
    ) -> None:
        self._provisioner = provisioner
        self._cluster = cluster
        self._pods = pods
        self._nodes = nodes
        self._nodepools = nodepools

    def on_pod(self, pod: Object) -> None:
        """A pod changed: trigger if it needs capacity nobody is bringing yet."""
        if is_provisionable(pod) and not self._cluster.is_nominated(pod_key(pod)):
            self._provisioner.trigger(pod["metadata"].get("uid") or pod_key(pod))

    def on_node(self, node: Object) -> None:
        """A node changed: trigger if it is going away (its pods will need a home)."""
        meta = node["metadata"]
        if has_disrupted_taint(node) or meta.get("deletionTimestamp"):
            self._provisioner.trigger(meta.get("uid") or meta["name"])

    def on_nodepool(self, old: Object | None, new: Object) -> None:
        """A NodePool changed: trigger if it became Ready or its spec changed."""
        if not condition_is_true(new, "Ready"):
            return
        if (old is None or not condition_is_true(old, "Ready")
                or _generation(old) != _generation(new)):
            self._provisioner.trigger(f"nodepool/{new['metadata'].get('uid')}/{_generation(new)}")

    async def run(self) -> None:
        """Listen until cancelled (objects already cached are replayed at once)."""
        pods = self._pods.add_handler(
            FuncHandler(add=self.on_pod, update=lambda _old, new: self.on_pod(new))
        )
        nodes = self._nodes.add_handler(
            FuncHandler(add=self.on_node, update=lambda _old, new: self.on_node(new))
        )
        nodepools = self._nodepools.add_handler(
            FuncHandler(add=lambda new: self.on_nodepool(None, new), update=self.on_nodepool)
        )
        try:
            await asyncio.Event().wait()
        finally:
            self._pods.remove_handler(pods)
            self._nodes.remove_handler(nodes)
            self._nodepools.remove_handler(nodepools)


def _generation(obj: Object) -> int:
    return int(obj["metadata"].get("generation") or 0)
