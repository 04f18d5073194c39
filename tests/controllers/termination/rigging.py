"""The world termination's unit tests run in: the three reconcilers wired to a fake API,
the fake provider, a fake clock, an event recorder and real Prometheus metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from karpy.apis import NodeClaim
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.indexes import (
    INDEX_PROVIDER_ID,
    index_node_provider_id,
    index_nodeclaim_provider_id,
)
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.surge import SurgeBeforeEvict
from karpy.controllers.termination import (
    EvictionQueue,
    NodeClaimTermination,
    NodeTermination,
    Terminator,
)
from karpy.controllers.termination._objects import (
    INDEX_NODE_NAME,
    INDEX_VA_NODE_NAME,
    index_by_node_name,
    index_va_node_name,
)
from karpy.runtime import Request, Result, kinds
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClient, FakeClock, FakeEventRecorder
from karpy.state.kinds import NODE_CLAIM

EVICTION_RETRY = 5.0


@dataclass
class Rig:
    """Termination's reconcilers over one fake world."""

    clock: FakeClock
    kube: FakeClient
    recorder: FakeEventRecorder
    provider: FakeCloudProvider
    registry: Metrics
    queue: EvictionQueue
    node: NodeTermination
    nodeclaim: NodeClaimTermination
    queued: list[Request] = field(default_factory=list)

    def metric(self, name: str) -> list[str]:
        """The Prometheus sample lines of ``name`` (e.g. karpenter_nodes_terminated_total)."""
        text = self.registry.render().decode()
        return [line for line in text.splitlines() if line.startswith(name + "{")
                or line.startswith(name + " ")]

    def launch(self, nodeclaim: dict[str, object]) -> None:
        """Make the fake provider hold an instance for this NodeClaim."""
        model = NodeClaim.from_dict(nodeclaim)
        assert model.status.provider_id
        self.provider.instances[model.status.provider_id] = model

    async def evict_queued(self) -> dict[Request, Result]:
        """Run the eviction queue once over everything queued so far."""
        results = {}
        while self.queued:
            request = self.queued.pop(0)
            results[request] = await self.queue.reconcile(request)
        return results


def make_rig() -> Rig:
    """A fresh world at 2024-01-01T00:00:00Z."""
    clock = FakeClock(start=datetime(2024, 1, 1, tzinfo=UTC))
    kube = FakeClient(clock=clock, indexers={
        (kinds.POD, INDEX_NODE_NAME): index_by_node_name,
        (kinds.NODE, INDEX_PROVIDER_ID): index_node_provider_id,
        (NODE_CLAIM, INDEX_PROVIDER_ID): index_nodeclaim_provider_id,
        (kinds.VOLUME_ATTACHMENT, INDEX_VA_NODE_NAME): index_va_node_name,
    })
    recorder = FakeEventRecorder()
    provider = FakeCloudProvider()
    registry = Metrics()
    metrics = KarpenterMetrics(registry.meter("karpenter"))
    queued: list[Request] = []
    queue = EvictionQueue(
        client=kube,  # type: ignore[arg-type]
        index=kube, recorder=recorder, clock=clock, metrics=metrics, retry=EVICTION_RETRY,
        enqueue=queued.append,
        surge=SurgeBeforeEvict(client=kube, recorder=recorder),  # type: ignore[arg-type]
    )
    terminator = Terminator(client=kube, index=kube, queue=queue, clock=clock)  # type: ignore[arg-type]
    node = NodeTermination(
        client=kube, index=kube, cloud_provider=provider,  # type: ignore[arg-type]
        terminator=terminator, recorder=recorder, clock=clock, metrics=metrics,
    )
    nodeclaim = NodeClaimTermination(
        client=kube, index=kube, cloud_provider=provider,  # type: ignore[arg-type]
        recorder=recorder, clock=clock, metrics=metrics,
    )
    return Rig(clock, kube, recorder, provider, registry, queue, node, nodeclaim, queued)
