"""The controller: a work queue, N workers and a reconciler.

Each worker takes a key, calls ``reconcile`` under a timeout and a logging context
(controller, namespace, name, reconcileID), and decides what happens to the key:

=============================  ============================================  ==========
reconcile outcome              what happens to the key                       ``result``
=============================  ============================================  ==========
``Result()``                   forgotten (backoff reset)                     success
``Result(requeue_after=s)``    forgotten, re-added after ``s`` seconds       requeue_after
``Result(requeue=True)``       re-added through the rate limiter             requeue
``TemporaryError(delay=s)``    re-added after ``s`` seconds, no error logged requeue_after
``TerminalError``              logged, counted, forgotten (not retried)      error
any other exception/timeout    logged, re-added through the rate limiter     error
=============================  ============================================  ==========

A worker survives every exception of its reconciler. Two kinds of error are also counted
on their own, under controller-runtime's names:

- ``controller_runtime_reconcile_timeouts_total``: the reconcile ran past
  ``reconcile_timeout`` (controller-runtime's ReconciliationTimeout) and was cancelled —
  only this controller's deadline, not a timeout the reconciler raised itself.
- ``controller_runtime_reconcile_panics_total``: the reconciler failed with a
  programming error (:data:`PANICS`: AttributeError, TypeError, LookupError, ...), what
  a Go reconciler's nil dereference, bad index or failed type assertion panics with.
  controller-runtime recovers such a panic into an error (RecoverPanic, on by default);
  so does this worker, which keeps serving the queue.
 Cancelling ``run()`` stops it
gracefully: no new keys are taken, in-flight reconciles get ``drain_timeout`` seconds
to finish, then they are cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from ._clock import Clock, SystemClock
from ._logging import log_context
from ._metrics import ControllerMetrics, Metrics
from ._ratelimit import RateLimiter
from ._reconcile import Reconciler, Request, Result, SingletonReconciler
from ._sources import Source, StaticSource
from ._workqueue import WorkQueue
from .errors import QueueShutDown, TemporaryError, TerminalError

__all__ = ["PANICS", "Controller", "singleton_controller"]

#: The exceptions that count as a reconciler's panic: Python's programming errors, where
#: Go would panic (nil dereference, index out of range, failed type assertion, division
#: by zero, a broken invariant, runaway recursion); not the errors a reconciler reports.
PANICS: tuple[type[BaseException], ...] = (
    AssertionError,
    AttributeError,
    TypeError,
    LookupError,
    NameError,
    ArithmeticError,
    RecursionError,
)

K = TypeVar("K", bound=Hashable)

log = logging.getLogger("karpy.runtime.controller")


class _NoControllerMetrics:
    def reconciled(self, result: str, seconds: float) -> None:
        return None

    def error(self, *, terminal: bool, panic: bool = False, timeout: bool = False) -> None:
        return None

    def worker(self, delta: int) -> None:
        return None


class Controller(Generic[K]):
    """Runs ``reconciler`` for keys fed by its sources, ``workers`` at a time.

    Keys are :class:`Request` for object controllers, but any hashable works.
    ``reconcile_timeout`` bounds one reconcile (a timeout counts as an error);
    ``rate_limiter`` defaults to client-go's (5 ms→1000 s per key, 10 qps overall).
    Controllers need leader election by default (``needs_leader_election``).
    """

    def __init__(
        self,
        name: str,
        reconciler: Reconciler[K],
        *,
        workers: int = 1,
        reconcile_timeout: float | None = 300.0,
        drain_timeout: float = 30.0,
        rate_limiter: RateLimiter[K] | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        needs_leader_election: bool = True,
    ) -> None:
        if workers < 1:
            raise ValueError("a controller needs at least one worker")
        self.name = name
        self.reconciler = reconciler
        self.workers = workers
        self.reconcile_timeout = reconcile_timeout
        self.drain_timeout = drain_timeout
        self.needs_leader_election = needs_leader_election
        self._clock = clock or SystemClock()
        self._rate_limiter = rate_limiter
        self._metrics_registry = metrics
        self._metrics: ControllerMetrics | _NoControllerMetrics = (
            metrics.controller(name, workers) if metrics is not None else _NoControllerMetrics()
        )
        self._sources: list[Source[K]] = []
        self._stopping = False
        self.queue: WorkQueue[K] = self._new_queue()

    def __repr__(self) -> str:
        return f"Controller({self.name!r}, workers={self.workers})"

    def _new_queue(self) -> WorkQueue[K]:
        queue: WorkQueue[K] = WorkQueue(
            name=self.name, rate_limiter=self._rate_limiter, clock=self._clock
        )
        if self._metrics_registry is not None:
            queue._metrics = self._metrics_registry.queue(self.name, queue)
        return queue

    def watch(self, source: Source[K]) -> None:
        """Feed the queue from ``source`` while the controller runs."""
        self._sources.append(source)

    # -- running -------------------------------------------------------------------------

    async def run(self) -> None:
        """Attach the sources and run the workers until cancelled (then drain)."""
        if self.queue.shutting_down:
            self.queue = self._new_queue()  # a stopped controller may be started again
        self._stopping = False
        detach = [source.attach(self.queue) for source in self._sources]
        log.info("Starting workers", extra={"controller": self.name, "worker count": self.workers})
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [
                    tg.create_task(self._worker(), name=f"controller:{self.name}:worker-{i}")
                    for i in range(self.workers)
                ]
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    log.info(
                        "Shutdown signal received, waiting for all workers to finish",
                        extra={"controller": self.name},
                    )
                    self._stopping = True
                    self.queue.shutdown()
                    # In-flight reconciles may finish; a second cancel cuts this short.
                    await asyncio.wait(tasks, timeout=self.drain_timeout)
                    raise
        finally:
            for stop in detach:
                stop()
            self.queue.shutdown()
            log.info("All workers finished", extra={"controller": self.name})

    async def _worker(self) -> None:
        queue = self.queue
        while not self._stopping:
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            if self._stopping:
                queue.done(key)
                return
            self._metrics.worker(1)
            try:
                await self.reconcile_key(key)
            finally:
                self._metrics.worker(-1)
                queue.done(key)

    def _log_fields(self, key: K) -> dict[str, Any]:
        if isinstance(key, Request):
            return {"namespace": key.namespace, "name": key.name}
        return {"key": str(key)}

    async def reconcile_key(self, key: K) -> None:
        """Reconcile one key and requeue it as the outcome demands (see module docs).

        Workers call this; tests may call it directly on a controller that is not running.
        """
        queue = self.queue
        token = log_context.set(
            {
                **log_context.get(),
                "controller": self.name,
                **self._log_fields(key),
                "reconcileID": str(uuid.uuid4()),
            }
        )
        start = self._clock.monotonic()
        outcome = "error"
        deadline = asyncio.timeout(self.reconcile_timeout)
        try:
            try:
                async with deadline:
                    result = await self.reconciler.reconcile(key)
            except TemporaryError as exc:
                outcome = "requeue_after"
                queue.add_after(key, exc.delay)
            except TerminalError as exc:
                self._metrics.error(terminal=True)
                log.error("Reconciler error", exc_info=exc, extra={"terminal": True})
                queue.forget(key)
            except Exception as exc:
                timed_out = deadline.expired()
                self._metrics.error(
                    terminal=False, panic=isinstance(exc, PANICS), timeout=timed_out
                )
                if timed_out:
                    log.error(
                        "Reconciler error",
                        extra={"error": f"reconcile timed out after {self.reconcile_timeout:g}s"},
                    )
                else:
                    log.error("Reconciler error", exc_info=exc)
                queue.add_rate_limited(key)
            else:
                if result.requeue_after > 0:
                    outcome = "requeue_after"
                    queue.forget(key)
                    queue.add_after(key, result.requeue_after)
                elif result.requeue:
                    outcome = "requeue"
                    queue.add_rate_limited(key)
                else:
                    outcome = "success"
                    queue.forget(key)
        finally:
            self._metrics.reconciled(outcome, self._clock.monotonic() - start)
            log_context.reset(token)


class _SingletonAdapter:
    """Turns a no-argument reconciler into a periodic one keyed by a fixed Request."""

    def __init__(self, inner: SingletonReconciler, period: float) -> None:
        self._inner = inner
        self._period = period

    async def reconcile(self, request: Request) -> Result:
        result = await self._inner.reconcile()
        if result.requeue_after > 0 or result.requeue:
            return result
        return Result(requeue_after=self._period)


def singleton_controller(
    name: str,
    reconciler: SingletonReconciler | Callable[[], Any],
    *,
    period: float,
    **options: Any,
) -> Controller[Request]:
    """A controller that runs ``reconciler.reconcile()`` every ``period`` seconds.

    One key, so never two rounds at once; a round may shorten or lengthen the wait with
    ``Result(requeue_after=...)``; failures back off through the rate limiter.
    ``options`` are Controller keyword arguments (``reconcile_timeout``, ``metrics`` ...).
    """
    if period <= 0:
        raise ValueError("period must be positive")
    inner: SingletonReconciler = reconciler  # type: ignore[assignment]
    controller: Controller[Request] = Controller(
        name, _SingletonAdapter(inner, period), workers=1, **options
    )
    controller.watch(StaticSource(Request("", name)))
    return controller
