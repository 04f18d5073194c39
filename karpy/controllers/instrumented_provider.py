"""A CloudProvider wrapper that records every call in Karpenter's cloud-provider metrics.

Karpenter decorates its provider the same way (``metrics.Decorate``), so
``karpenter_cloudprovider_duration_seconds{method,provider}`` and
``karpenter_cloudprovider_errors_total{method,provider,error}`` are filled for any
provider without the provider doing anything. The operator wraps the provider once; every
controller then sees the wrapper.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from karpy.apis.v1 import NodeClaim, NodePool
from karpy.cloudprovider import CloudProvider, DriftReason, RepairPolicy
from karpy.controllers.instruments import KarpenterMetrics
from karpy.runtime import Kind
from karpy.scheduling import InstanceType

__all__ = ["InstrumentedCloudProvider"]

T = TypeVar("T")


class InstrumentedCloudProvider:
    """Delegates to ``inner``; times each async call and counts the errors it raises."""

    def __init__(self, inner: CloudProvider, metrics: KarpenterMetrics) -> None:
        self.inner = inner
        self._metrics = metrics

    @property
    def name(self) -> str:
        return self.inner.name

    async def _timed(self, method: str, call: Callable[[], Awaitable[T]]) -> T:
        labels = {"method": method, "provider": self.inner.name}
        start = time.perf_counter()
        try:
            return await call()
        except Exception as exc:
            self._metrics.cloudprovider_errors.add(1, {**labels, "error": type(exc).__name__})
            raise
        finally:
            self._metrics.cloudprovider_duration.record(time.perf_counter() - start, labels)

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        return await self._timed("Create", lambda: self.inner.create(nodeclaim))

    async def delete(self, nodeclaim: NodeClaim) -> None:
        await self._timed("Delete", lambda: self.inner.delete(nodeclaim))

    async def get(self, provider_id: str) -> NodeClaim:
        return await self._timed("Get", lambda: self.inner.get(provider_id))

    async def list(self) -> Sequence[NodeClaim]:
        return await self._timed("List", self.inner.list)

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        return await self._timed(
            "GetInstanceTypes", lambda: self.inner.get_instance_types(nodepool)
        )

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        return await self._timed("IsDrifted", lambda: self.inner.is_drifted(nodeclaim))

    def repair_policies(self) -> Sequence[RepairPolicy]:
        return self.inner.repair_policies()

    def supported_node_classes(self) -> Sequence[Kind]:
        return self.inner.supported_node_classes()
