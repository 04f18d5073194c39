"""The manager: owns the lifecycles of the cache, the controllers and the endpoints.

``run()`` does, in order:

1. serve ``/healthz``+``/readyz`` and ``/metrics``;
2. start the cache's informers and wait until they have synced (``/readyz`` turns 200);
3. start runnables that do not need leadership;
4. campaign for the Lease (if configured) and, once leader, start the controllers.

It returns after ``stop()`` (or SIGTERM/SIGINT with ``handle_signals=True``): controllers
are stopped first and given ``graceful_shutdown_timeout`` seconds to finish in-flight
reconciles, then the lease is released and everything else is cancelled.

Losing the lease is not a graceful stop, because another replica may take over
``lease_duration - renew_deadline`` seconds later (5 s by default). As in
controller-runtime (graceful shutdown 0): the moment the renew deadline passes,
``is_leader`` is False and the write gate closes — every write through
:attr:`Manager.client` and :attr:`Manager.api_client` is refused with
``errors.NotLeader`` and writes in flight are cut off (``_fence``); then the controllers
and other leader-only runnables are cancelled at once, with no drain (a runnable that
drains on cancellation is cancelled again until it ends), the rest is cancelled, and
``run()`` raises ``errors.LeaderElectionLost``. The process should exit non-zero and be
restarted (``karpy run`` does).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from opentelemetry.metrics import Meter

from ._builder import ControllerBuilder
from ._cache import Cache, InformerOptions
from ._client import KubeClient
from ._clock import Clock, SystemClock
from ._controller import Controller, singleton_controller
from ._events import EventRecorder
from ._http import Check, HttpServer, ProbeSet, parse_bind_address
from ._leaderelection import LeaderElectionConfig, LeaderElector
from ._metrics import Metrics
from ._protocol import ManagerClient
from ._reconcile import Request, SingletonReconciler
from .errors import CacheSyncTimeout, Error, LeaderElectionLost
from .kinds import Kind

__all__ = ["Manager", "Runnable"]

log = logging.getLogger("karpy.runtime.manager")


def _leaf(group: BaseExceptionGroup[Error]) -> Error:
    # Nested TaskGroups nest their groups; the caller wants the error itself.
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    assert isinstance(first, Error)
    return first


@runtime_checkable
class Runnable(Protocol):
    """Anything the manager runs: ``run()`` works until cancelled.

    Set ``needs_leader_election = False`` on it to run on every replica.
    """

    async def run(self) -> None:
        """Do the work; return or raise only when cancelled (or on a fatal error)."""
        ...


class Manager:
    """Runs a cache, controllers and endpoints as one unit (see the module docs)."""

    def __init__(
        self,
        client: ManagerClient,
        *,
        namespace: str | None = None,
        cache_options: Mapping[Kind, InformerOptions] | None = None,
        leader_election: LeaderElectionConfig | None = None,
        metrics_bind_address: str = ":8080",
        health_probe_bind_address: str = ":8081",
        graceful_shutdown_timeout: float = 30.0,
        cache_sync_timeout: float | None = 120.0,
        metrics: Metrics | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        self.metrics = metrics or Metrics()
        if isinstance(client, KubeClient):  # the others send no requests of their own to count
            client._count_requests_in(self.metrics.client)
        self.cache = Cache(
            client,
            namespace=namespace,
            by_kind=cache_options,
            on_handler_error=self.metrics.informer_handler_error,
        )
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.cache_sync_timeout = cache_sync_timeout
        # The elector keeps the ungated client: it must write the Lease to get it.
        self.elector = (
            LeaderElector(client, leader_election, clock=self.clock, metrics=self.metrics)
            if leader_election is not None
            else None
        )
        self.api_client = client.with_write_gate(self.elector)
        """The client, with writes gated on leadership (see the module docs)."""
        self.client = self.api_client.with_reader(self.cache)
        """A client whose reads of cached kinds come from the cache; writes go to the
        server, gated on leadership."""
        self.healthz = ProbeSet()
        self.readyz = ProbeSet()
        self.healthz.add("ping", lambda: True)
        self.readyz.add("cache-sync", lambda: self.cache.synced and self._synced)
        self._servers: list[tuple[str, HttpServer]] = []
        health = parse_bind_address(health_probe_bind_address)
        metrics_at = parse_bind_address(metrics_bind_address)
        if health is not None and health == metrics_at and health[1] != 0:
            both = HttpServer(*health)
            both.probe("/healthz", self.healthz)
            both.probe("/readyz", self.readyz)
            both.metrics("/metrics", self.metrics.render)
            self._servers.append(("health+metrics", both))
            self._health_server: HttpServer | None = both
            self._metrics_server: HttpServer | None = both
        else:
            self._health_server = self._metrics_server = None
            if health is not None:
                self._health_server = HttpServer(*health)
                self._health_server.probe("/healthz", self.healthz)
                self._health_server.probe("/readyz", self.readyz)
                self._servers.append(("health", self._health_server))
            if metrics_at is not None:
                self._metrics_server = HttpServer(*metrics_at)
                self._metrics_server.metrics("/metrics", self.metrics.render)
                self._servers.append(("metrics", self._metrics_server))
        self._leader_runnables: list[tuple[str, Runnable]] = []
        self._other_runnables: list[tuple[str, Runnable]] = []
        self._recorders: dict[str, EventRecorder] = {}
        self._stop = asyncio.Event()
        self._synced = False
        self._running = False

    # -- registration --------------------------------------------------------------------

    def add(
        self,
        runnable: Runnable,
        *,
        name: str | None = None,
        needs_leader_election: bool | None = None,
    ) -> None:
        """Run ``runnable`` with the manager; by default only while leader (if it has a
        ``needs_leader_election`` attribute, that decides)."""
        if self._running:
            raise RuntimeError("add runnables before Manager.run()")
        if needs_leader_election is None:
            needs_leader_election = bool(getattr(runnable, "needs_leader_election", True))
        label = name or getattr(runnable, "name", None) or type(runnable).__name__
        target = self._leader_runnables if needs_leader_election else self._other_runnables
        target.append((str(label), runnable))

    def controller(self, name: str) -> ControllerBuilder:
        """Start building an object controller: ``.for_(kind).owns(...).complete(r)``."""
        return ControllerBuilder(self, name)

    def singleton(
        self, name: str, reconciler: SingletonReconciler, *, period: float, **options: Any
    ) -> Controller[Request]:
        """Register a controller running ``reconciler.reconcile()`` every ``period`` s."""
        options.setdefault("drain_timeout", 0.8 * self.graceful_shutdown_timeout)
        controller = singleton_controller(
            name, reconciler, period=period, clock=self.clock, metrics=self.metrics, **options
        )
        self.add(controller)
        return controller

    def event_recorder(self, component: str) -> EventRecorder:
        """The EventRecorder writing Events with ``source.component = component``."""
        recorder = self._recorders.get(component)
        if recorder is None:
            recorder = EventRecorder(
                self.api_client,
                component=component,
                clock=self.clock,
                on_drop=self.metrics.event_dropped,
            )
            self._recorders[component] = recorder
            self.add(recorder, name=f"events:{component}", needs_leader_election=False)
        return recorder

    def meter(self, name: str, version: str | None = None) -> Meter:
        """An OpenTelemetry Meter exported on this manager's /metrics endpoint."""
        return self.metrics.meter(name, version)

    def add_health_check(self, name: str, check: Check) -> None:
        """Add a /healthz check (return normally or True when healthy)."""
        self.healthz.add(name, check)

    def add_ready_check(self, name: str, check: Check) -> None:
        """Add a /readyz check (return normally or True when ready)."""
        self.readyz.add(name, check)

    # -- state ---------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """True while leader-only runnables are allowed to run."""
        return self.elector.is_leader if self.elector is not None else self._running

    @property
    def health_port(self) -> int | None:
        """The bound port of /healthz and /readyz once serving (useful with port 0)."""
        return self._health_server.bound_port if self._health_server else None

    @property
    def metrics_port(self) -> int | None:
        """The bound port of /metrics once serving (useful with port 0)."""
        return self._metrics_server.bound_port if self._metrics_server else None

    async def wait_serving(self) -> None:
        """Return once the HTTP endpoints are listening."""
        for _, server in self._servers:
            await server.started.wait()

    # -- lifecycle -----------------------------------------------------------------------

    def stop(self) -> None:
        """Ask ``run()`` to shut down gracefully. Safe to call from a signal handler."""
        self._stop.set()

    async def run(self, *, handle_signals: bool = False) -> None:
        """Run until ``stop()``, cancellation, or a signal (``handle_signals=True``)."""
        if self._running:
            raise RuntimeError("the manager is running already")
        self._running = True
        self._stop.clear()
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT) if handle_signals else ()
        for sig in signals:
            loop.add_signal_handler(sig, self.stop)
        try:
            async with asyncio.TaskGroup() as tg:
                infra = [
                    tg.create_task(server.run(), name=f"manager:http:{label}")
                    for label, server in self._servers
                ]
                infra.append(tg.create_task(self.cache.run(), name="manager:cache"))
                work = tg.create_task(self._run_workloads(), name="manager:runnables")
                stop = tg.create_task(self._stop.wait(), name="manager:stop-signal")
                try:
                    await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    await self._shutdown(work)
                    stop.cancel()
                    for task in infra:
                        task.cancel()
        except* (LeaderElectionLost, CacheSyncTimeout) as group:
            raise _leaf(group) from None
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
            self._running = False
            self._synced = False
            log.info("manager stopped")

    async def _shutdown(self, work: asyncio.Task[None]) -> None:
        if work.done():
            return
        log.info("stopping controllers", extra={"timeout": self.graceful_shutdown_timeout})
        work.cancel()
        _, pending = await asyncio.wait({work}, timeout=self.graceful_shutdown_timeout)
        if pending:
            log.warning("graceful shutdown timed out, cancelling in-flight work")
            work.cancel()
            await asyncio.wait({work}, timeout=5.0)

    async def _run_workloads(self) -> None:
        log.info(
            "waiting for caches to sync",
            extra={"kinds": [str(i.kind) for i in self.cache.informers()]},
        )
        try:
            await self.cache.wait_for_sync(self.cache_sync_timeout)
        except TimeoutError:
            # named as their CRDs are, which the hint asks about
            missing = [i.kind.resource for i in self.cache.informers() if not i.has_synced]
            raise CacheSyncTimeout(
                f"caches did not sync within {self.cache_sync_timeout:g}s: {missing} "
                "(is the CRD installed, and may this identity list and watch them?)"
            ) from None
        self._synced = True
        log.info("caches synced")
        async with asyncio.TaskGroup() as tg:
            for label, runnable in self._other_runnables:
                tg.create_task(runnable.run(), name=f"runnable:{label}")
            if self.elector is not None:
                tg.create_task(
                    self.elector.run(self._run_leader_runnables), name="manager:leader-election"
                )
            else:
                tg.create_task(self._run_leader_runnables(), name="manager:leader-runnables")

    async def _run_leader_runnables(self) -> None:
        log.info(
            "starting controllers",
            extra={"controllers": [label for label, _ in self._leader_runnables]},
        )
        async with asyncio.TaskGroup() as tg:
            tasks = [
                tg.create_task(runnable.run(), name=f"runnable:{label}")
                for label, runnable in self._leader_runnables
            ]
            try:
                # Keep leadership (and the lease renewals) until cancelled, even with no
                # runnables.
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                if not self.is_leader:  # lost, not a graceful stop: no drain
                    await _cancel_at_once(tasks)
                raise


async def _cancel_at_once(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` and cancel again each that is still running a moment later:
    a controller drains in-flight reconciles on its first cancellation, a second cuts
    that short."""
    log.info("leadership lost, cancelling controllers without waiting")
    pending = [t for t in tasks if not t.done()]
    while pending:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=0.01)
        pending = [t for t in pending if not t.done()]
