"""The reconcile contract: a Request in, a Result out.

A :class:`Request` is only the object's key — the reconciler reads the current state
itself (usually from the cache), so it always acts on fresh data and a burst of events
collapses into one call. "Do not retry" and "retry later" are errors
(``errors.TerminalError``, ``errors.TemporaryError``), not flags on the Result.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

__all__ = ["Reconciler", "Request", "Result", "SingletonReconciler"]


@dataclass(frozen=True, slots=True, order=True)
class Request:
    """Which object to reconcile: its namespace ("" for cluster-scoped) and name."""

    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Request:
        """The request for ``obj`` (from its metadata)."""
        meta = obj["metadata"]
        return cls(meta.get("namespace") or "", meta["name"])

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Result:
    """What to do after a successful reconcile.

    ``requeue_after`` > 0 reconciles the same request again after that many seconds
    (and resets its failure backoff); ``requeue=True`` requeues it through the rate
    limiter instead. The default — neither — waits for the next event.
    """

    requeue_after: float = 0.0
    requeue: bool = False


K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)


class Reconciler(Protocol[K_contra]):
    """Makes the world match the desired state of one object. Must be idempotent."""

    async def reconcile(self, request: K_contra) -> Result:
        """Reconcile ``request``; raise to retry with backoff (see ``errors``)."""
        ...


class SingletonReconciler(Protocol):
    """A reconciler with no object: runs periodically (Karpenter's singleton controllers)."""

    async def reconcile(self) -> Result:
        """Do one round; ``Result(requeue_after=s)`` sets the delay to the next round."""
        ...
