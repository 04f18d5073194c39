"""The workload every chaos scenario scales: a KWOKNodeClass, a NodePool of small
on-demand kwok nodes (at most 4 vCPU, so pods need many NodeClaims) and a Deployment
of one-CPU pause pods, all named after the scenario; and its clean-up, which deletes
them while karpy still runs and then checks the cloud is empty."""

from __future__ import annotations

import contextlib
from typing import Any

from kube import KWOK_NODE_CLASS as KWOK_NODE_CLASS_KIND
from kube import clean_up, deployment, nodepool, ready_node_class

from karpy.cloudprovider.kwok import KwokCloudProvider
from karpy.runtime import Client, errors, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

__all__ = ["SMALL_ON_DEMAND", "Workload"]

SELECT = "karpy-chaos"
SMALL_ON_DEMAND = [
    {"key": "karpenter.kwok.sh/instance-cpu", "operator": "Lt", "values": ["5"]},
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
]
CLEANUP_TIMEOUT = 240.0


class Workload:
    """One scenario's objects (see the module docstring). Use ``async with``."""

    def __init__(
        self, client: Client, namespace: str, name: str, *, registration_delay: str = ""
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.pool = name
        self._delay = registration_delay
        self.forced: list[str] = []
        self.left_in_cloud: list[str] = []

    async def __aenter__(self) -> Workload:
        spec = {"nodeRegistrationDelay": self._delay} if self._delay else {}
        with contextlib.suppress(errors.AlreadyExists):
            await self.client.create(KWOK_NODE_CLASS_KIND,
                                     {"metadata": {"name": self.name}, "spec": spec})
        await ready_node_class(self.client, self.name)
        await self.client.create(NODE_POOL, nodepool(
            self.pool, node_class=self.name, labels={SELECT: self.name},
            requirements=SMALL_ON_DEMAND))
        await self.client.create(kinds.DEPLOYMENT, deployment(
            self.name, node_selector={SELECT: self.name}, replicas=0, cpu="1"),
            namespace=self.namespace)
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Delete everything while karpy runs; record what had to be forced and what
        the cloud still holds afterwards (both should be empty)."""
        self.forced = await clean_up(self.client, self.namespace, self.name, [self.pool],
                                     timeout=CLEANUP_TIMEOUT)
        cloud = KwokCloudProvider(self.client)
        self.left_in_cloud = [str(i.status.provider_id) for i in await cloud.list()
                              if i.metadata.labels.get("karpenter.sh/nodepool") == self.pool]
        await cloud.aclose()
        with contextlib.suppress(errors.NotFound):
            await self.client.delete(KWOK_NODE_CLASS_KIND, self.name)

    async def scale(self, replicas: int) -> None:
        """Set the Deployment's replicas."""
        await self.client.patch(kinds.DEPLOYMENT, self.name, {"spec": {"replicas": replicas}},
                                namespace=self.namespace)

    async def running(self) -> int:
        """How many of its pods are Running."""
        pods = await self.client.list(kinds.POD, namespace=self.namespace,
                                      label_selector={"app": self.name})
        return sum((p.get("status") or {}).get("phase") == "Running" for p in pods)

    async def nodeclaims(self) -> list[Any]:
        """Its NodeClaims."""
        return [c for c in await self.client.list(NODE_CLAIM)
                if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool")
                == self.pool]
