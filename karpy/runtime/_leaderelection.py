"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's algorithm.

Candidates poll the Lease every ``retry_period``. A lease held by someone else counts as
expired only when its record has not changed for ``leaseDurationSeconds`` *as measured
on our own monotonic clock* since we first saw that record — never by comparing the
holder's renewTime with our wall clock, so clock skew between nodes cannot make two
leaders.

The leader renews every ``retry_period``. Its leadership is valid until ``renew_deadline``
after the *start* of its last successful renewal (the server stored that record no
earlier, so no other candidate can take over before that start + ``lease_duration``).
The moment that deadline passes, :attr:`LeaderElector.is_leader` is False — computed from
the clock, not set by a loop that may be late — and a renewal still in flight then does
not count even if it succeeds afterwards: leadership once lost stays lost. ``run()``
then cancels ``lead()`` and raises :class:`errors.LeaderElectionLost`. The elector is
also the manager's write gate (``_fence``): after the deadline no write is sent, and
writes in flight are cut off, ``lease_duration - renew_deadline`` (5 s by default)
before another replica could take over. On graceful shutdown the leader releases the
lease (empty holder, 1 s duration) so a successor takes over within one retry; writes
are refused from then on, too.

With ``renew_in_thread`` (what ``karpy run`` uses) the renewals run on an event loop of
their own, in a thread, over connections of their own (``KubeClient.with_own_connections``),
as client-go renews from a goroutine of its own. On the shared loop a renewal is a few
loop iterations and one pooled connection away; with a thousand NodeClaims launching
on a CPU-starved machine each iteration can take seconds and the pool has a queue, so
a healthy, busy leader missed its 10 s deadline and gave up the scale-up. A wedged
leader still lets go: the thread renews only while the main loop has answered a
heartbeat within ``renew_deadline``. The deadline is shared: the thread moves it on
each renewal, and the main loop's ``is_leader`` and write gate read it, so the main loop
stops writing at the deadline even before the thread's LeaderElectionLost reaches it.

A leader renews as client-go does: on its *fast path* it updates the Lease it last wrote
without reading it first (one PUT per round; its resourceVersion makes it optimistic);
only if that fails (a conflict, a timeout) does it fall back to the *slow path*: read the
Lease, check who holds it, then update. Each renewal that a leader had to make on the slow
path is counted in ``leader_election_slowpath_total{name}``, client-go's metric: a few
mean a flaky API server, a steady rate means something else writes the Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._client import KubeClient
from ._clock import Clock, SystemClock
from ._metrics import Metrics
from ._protocol import Client
from ._timestamps import format_micro_time
from .errors import (
    AlreadyExists,
    ClientError,
    Conflict,
    LeaderElectionLost,
    NotFound,
    NotLeader,
)
from .kinds import LEASE

__all__ = ["LeaderElectionConfig", "LeaderElector"]

log = logging.getLogger("karpy.runtime.leaderelection")


def _default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """Which Lease to contend for, as whom, and the timing (client-go's defaults)."""

    name: str
    namespace: str
    identity: str = field(default_factory=_default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True
    renew_in_thread: bool = False
    """Renew from a thread with its own event loop and connections (module docstring).
    Needs the system clock and a real :class:`KubeClient`."""

    def __post_init__(self) -> None:
        if not (self.lease_duration > self.renew_deadline > self.retry_period > 0):
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")


class LeaderElector:
    """Campaigns for a Lease and runs a coroutine only while holding it."""

    def __init__(
        self,
        client: Client,
        config: LeaderElectionConfig,
        *,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        if config.renew_in_thread and not isinstance(client, KubeClient):
            raise TypeError(
                "renew_in_thread needs a KubeClient (the renewals use connections of their "
                f"own), not {type(client).__name__}"
            )
        self._client = client
        self.config = config
        self._clock = clock or SystemClock()
        self._metrics = metrics
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._leader = False
        # Written by the renewal (maybe in its thread), read by is_leader and the write
        # gate on the main loop: plain attributes, each write a single atomic store.
        self._valid_until = -math.inf
        self._lock = threading.Lock()  # a renewal's check-and-extend vs. _expire
        self._holder = ""  # the holder in the last record seen
        # The Lease as this candidate last wrote it while holding it (the fast path's
        # base), or None: only the renewing side writes it (maybe in its thread).
        self._written: dict[str, Any] | None = None
        self._led = False  # held the lease in this run: from then on writes are gated
        self.elected = asyncio.Event()
        """Set while this candidate holds the lease."""

    @property
    def is_leader(self) -> bool:
        """True while this candidate holds the lease and its renew deadline has not
        passed (false from that instant, before anything is cancelled)."""
        return self._leader and self._clock.monotonic() < self._valid_until

    def write_allowance(self) -> float | None:
        """The write gate (``_fence.WriteGate``): None before this candidate ever led
        (a standby writes its events freely), the seconds left until the renew deadline
        while leading, :class:`errors.NotLeader` once leadership is lost or released."""
        if not self._led:
            return None
        remaining = self._valid_until - self._clock.monotonic()
        if not self._leader or remaining <= 0:
            raise NotLeader(
                f"not the leader of lease {self.config.namespace}/{self.config.name} "
                "any more: write refused"
            )
        return remaining

    def _expire(self) -> None:
        """Leadership is over: no renewal may count from now on (thread-safe)."""
        with self._lock:
            self._valid_until = -math.inf

    def _extend(self, start: float) -> bool:
        """Count a renewal that started at ``start``, unless the deadline passed first."""
        with self._lock:
            if self._clock.monotonic() >= self._valid_until:
                return False
            self._valid_until = start + self.config.renew_deadline
            return True

    def _set_leader(self, value: bool) -> None:
        if value == self._leader:
            return
        self._leader = value
        if value:
            self.elected.set()
        else:
            self.elected.clear()
        if self._metrics is not None:
            self._metrics.leader(self.config.name, value)

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Wait for the lease, then run ``lead()`` while renewing it.

        Returns when ``lead()`` returns (lease released). If cancelled, ``lead()`` is
        cancelled and allowed to finish, then the lease is released. Raises
        :class:`errors.LeaderElectionLost` (after cancelling ``lead()``) if the lease
        could not be renewed within ``renew_deadline``.
        """
        cfg = self.config
        log.info(
            "attempting to acquire leader lease",
            extra={"lease": f"{cfg.namespace}/{cfg.name}", "identity": cfg.identity},
        )
        await self._acquire()
        log.info(
            "successfully acquired lease",
            extra={"lease": f"{cfg.namespace}/{cfg.name}", "identity": cfg.identity},
        )
        self._led = True
        self._set_leader(True)
        try:
            async with asyncio.TaskGroup() as tg:
                renew = tg.create_task(
                    self._renew_in_thread() if cfg.renew_in_thread else self._renew_loop(),
                    name=f"leaderelection:{cfg.name}:renew",
                )
                await lead()
                renew.cancel()
        except* LeaderElectionLost as group:
            self._expire()
            self._set_leader(False)
            raise group.exceptions[0] from None
        finally:
            if self.is_leader and cfg.release_on_cancel:
                await self._release()
            self._expire()
            self._written = None
            self._set_leader(False)

    # -- one attempt ---------------------------------------------------------------------

    async def try_acquire_or_renew(
        self,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
        client: Client | None = None,
    ) -> bool:
        """One attempt to take or renew the lease; True if we hold it afterwards
        (over ``client``, default the elector's)."""
        cfg = self.config
        client = client or self._client
        now = self._clock.now()
        duration = max(1, math.ceil(cfg.lease_duration))
        if await self._renew_fast(client, now, duration, timeout):
            return True
        try:
            lease = await client.get(
                LEASE, cfg.name, namespace=cfg.namespace, live=True, timeout=timeout
            )
        except NotFound:
            spec: dict[str, Any] = {
                "holderIdentity": cfg.identity,
                "leaseDurationSeconds": duration,
                "acquireTime": format_micro_time(now),
                "renewTime": format_micro_time(now),
                "leaseTransitions": 0,
            }
            body = {"metadata": {"name": cfg.name, "namespace": cfg.namespace}, "spec": spec}
            try:
                self._written = dict(await client.create(LEASE, body, timeout=timeout))
            except (AlreadyExists, Conflict):
                return False
            self._observe(spec)
            return True
        spec = dict(lease.get("spec") or {})
        self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        self._holder = str(holder)
        held_for = float(spec.get("leaseDurationSeconds") or duration)
        if (
            holder
            and holder != cfg.identity
            and self._observed_at + held_for > self._clock.monotonic()
        ):
            return False
        if holder != cfg.identity:
            spec["acquireTime"] = format_micro_time(now)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        elif self._metrics is not None:
            # The holder renewing through a read: client-go's slow path.
            self._metrics.leader_slowpath(cfg.name)
        spec["holderIdentity"] = cfg.identity
        spec["leaseDurationSeconds"] = duration
        spec["renewTime"] = format_micro_time(now)
        lease["spec"] = spec
        try:
            self._written = dict(await client.update(LEASE, lease, timeout=timeout))
        except Conflict:
            return False
        self._observe(spec)
        return True

    async def _renew_fast(
        self, client: Client, now: datetime, duration: int, timeout: float | None  # noqa: ASYNC109
    ) -> bool:
        """client-go's fast path: update the Lease as last written, unread, if this
        candidate holds it and its record is still valid; False to take the slow path."""
        written = self._written
        if written is None or self._observed_at + duration <= self._clock.monotonic():
            return False
        spec = dict(written.get("spec") or {})
        spec["leaseDurationSeconds"] = duration
        spec["renewTime"] = format_micro_time(now)
        try:
            stored = await client.update(LEASE, {**written, "spec": spec}, timeout=timeout)
        except ClientError as exc:
            self._written = None
            log.debug(
                "Failed to update lease optimistically, falling back to slow path",
                extra={"lease": f"{self.config.namespace}/{self.config.name}",
                       "error": str(exc)},
            )
            return False
        self._written = dict(stored)
        self._observe(spec)
        return True

    def _observe(self, spec: dict[str, Any]) -> None:
        record = tuple(sorted((k, str(v)) for k, v in spec.items()))
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock.monotonic()

    # -- loops ---------------------------------------------------------------------------

    def _jittered_retry(self) -> float:
        return self.config.retry_period * (1.0 + 0.2 * random.random())

    async def _acquire(self) -> None:
        while True:
            start = self._clock.monotonic()
            try:
                if await self.try_acquire_or_renew(timeout=self.config.renew_deadline):
                    self._valid_until = start + self.config.renew_deadline
                    if self._clock.monotonic() < self._valid_until:
                        return
                    continue  # took longer than the deadline: renew before leading
            except ClientError as exc:
                log.warning(
                    "error retrieving resource lock",
                    extra={"lease": self.config.name, "error": str(exc)},
                )
            await self._clock.sleep(self._jittered_retry())

    async def _renew_loop(
        self, client: Client | None = None, alive: Callable[[], bool] = lambda: True
    ) -> None:
        """Renew every retry_period; raise LeaderElectionLost once the renew deadline
        (``renew_deadline`` after the start of the last successful renewal) passes.
        ``alive`` False counts as a failed attempt; a renewal answered after the
        deadline does not count."""
        cfg = self.config
        while True:
            await self._clock.sleep(cfg.retry_period)
            while True:
                start = self._clock.monotonic()
                remaining = self._valid_until - start
                if remaining <= 0:
                    self._expire()
                    log.error(
                        "failed to renew lease, leadership lost",
                        extra={"lease": f"{cfg.namespace}/{cfg.name}"},
                    )
                    raise LeaderElectionLost(
                        f"could not renew lease {cfg.namespace}/{cfg.name} "
                        f"within {cfg.renew_deadline:g}s"
                    )
                try:
                    if not alive():
                        raise TimeoutError("the main event loop is not answering")
                    async with asyncio.timeout(remaining):
                        renewed = await self.try_acquire_or_renew(
                            timeout=remaining, client=client
                        )
                    # A deadline passed meanwhile (is_leader already False) is never
                    # undone by this late answer.
                    if renewed and self._extend(start):
                        break
                    if not renewed and self._holder not in ("", cfg.identity):
                        # Someone else holds it now: no point waiting for the deadline.
                        self._expire()
                        log.error(
                            "leader lease taken by another candidate, leadership lost",
                            extra={"lease": f"{cfg.namespace}/{cfg.name}",
                                   "holder": self._holder},
                        )
                        raise LeaderElectionLost(
                            f"lease {cfg.namespace}/{cfg.name} is held by {self._holder}"
                        )
                except (ClientError, TimeoutError) as exc:
                    log.warning(
                        "failed to renew lease",
                        extra={"lease": cfg.name, "error": str(exc) or "timeout"},
                    )
                left = self._valid_until - self._clock.monotonic()
                if left > 0:  # else: the deadline passed, give up now
                    await self._clock.sleep(min(cfg.retry_period, left))

    async def _renew_in_thread(self) -> None:
        """Run :meth:`_renew_loop` in a thread of its own (see the module docstring);
        raise its LeaderElectionLost here. Cancelling stops the thread."""
        main = asyncio.get_running_loop()
        lost: asyncio.Future[None] = main.create_future()
        beat = [time.monotonic()]
        deadline = self.config.renew_deadline
        started = threading.Event()
        handles: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[None]]] = []

        def fail(exc: BaseException) -> None:
            if not lost.done():
                lost.set_exception(exc)

        async def renew() -> None:
            assert isinstance(self._client, KubeClient)  # checked in __init__
            client = self._client.with_own_connections()
            try:
                await self._renew_loop(client, lambda: time.monotonic() - beat[0] < deadline)
            finally:
                await client.close()

        def thread() -> None:
            async def body() -> None:
                task = asyncio.current_task()
                assert task is not None
                handles.append((asyncio.get_running_loop(), task))
                started.set()
                try:
                    await renew()
                except asyncio.CancelledError:
                    pass
                except BaseException as exc:  # LeaderElectionLost, or a bug: stop leading
                    main.call_soon_threadsafe(fail, exc)

            asyncio.run(body())

        worker = threading.Thread(
            target=thread, name=f"leaderelection:{self.config.name}:renew", daemon=True
        )
        worker.start()
        if not await asyncio.to_thread(started.wait, 30.0):
            raise LeaderElectionLost("the lease renewal thread did not start")
        try:
            while not lost.done():
                beat[0] = time.monotonic()
                await asyncio.wait([lost], timeout=min(1.0, self.config.retry_period / 2))
            lost.result()
        finally:
            for loop, task in handles:
                with contextlib.suppress(RuntimeError):  # its loop has ended already
                    loop.call_soon_threadsafe(task.cancel)
            await asyncio.to_thread(worker.join, 10.0)

    async def _release(self) -> None:
        cfg = self.config
        try:
            lease = await self._client.get(
                LEASE, cfg.name, namespace=cfg.namespace, live=True, timeout=cfg.retry_period * 2
            )
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != cfg.identity:
                return
            now = format_micro_time(self._clock.now())
            spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=now, acquireTime=now)
            lease["spec"] = spec
            await self._client.update(LEASE, lease, timeout=cfg.retry_period * 2)
            log.info("released leader lease", extra={"lease": f"{cfg.namespace}/{cfg.name}"})
        except ClientError as exc:
            log.warning("failed to release lease", extra={"lease": cfg.name, "error": str(exc)})
