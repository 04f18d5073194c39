"""In-process test aids for code built on karpy.runtime.

* :class:`FakeClock` — a manually advanced clock for rate limiters, work queues, leader
  election and anything else that takes a ``clock=``.
* :func:`reconcile_once` / :class:`ReconcileDriver` — call a reconciler the way a
  controller would (logging context, outcome classification) without a cluster.
* :func:`eventually` — wait for a condition with a bounded poll, instead of sleeping a
  fixed time and hoping the work is done (which flakes on a loaded machine).
* :class:`FakeClient` — an in-memory API server behind ``Client``'s methods and the
  cache's ``by_index``: merge patches, resourceVersion preconditions, the status
  subresource, finalizers, selectors, PDB-aware eviction; every write recorded
  (:class:`Call`).
* :class:`FakeEventRecorder` — an ``EventRecorder`` that keeps every Event it is given
  (:class:`RecordedEvent`) instead of writing it.

What they do **not** do is stated on each; in short: nothing here runs informers or
emulates watches, admission or other controllers. For that — and for every end-to-end
test — use the local control plane (tests/controlplane).
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import itertools
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from ._controller import Controller
from ._fakeclient import Call, FakeClient
from ._fakerecorder import FakeEventRecorder, RecordedEvent
from ._reconcile import Reconciler, Result

__all__ = [
    "Call",
    "DriveReport",
    "FakeClient",
    "FakeClock",
    "FakeEventRecorder",
    "ReconcileDriver",
    "RecordedEvent",
    "eventually",
    "reconcile_once",
]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class _FakeTimer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that moves only when told to (``advance``/``step``).

    ``call_later`` callbacks fire synchronously inside ``advance`` in due order;
    ``sleep`` suspends until the clock is advanced past the wake-up time.

    It does not: patch ``time``/``asyncio`` globally (code that calls ``asyncio.sleep``
    or ``asyncio.timeout`` directly still uses real time), or advance by itself when
    every task is blocked — the test advances it.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._mono = 0.0
        self._wall = start or datetime(2024, 1, 1, tzinfo=UTC)
        self._timers: list[tuple[float, int, _FakeTimer, Callable[[], None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._mono

    def now(self) -> datetime:
        return self._wall

    def call_later(self, delay: float, callback: Callable[[], None]) -> _FakeTimer:
        timer = _FakeTimer()
        due = self._mono + max(0.0, delay)
        heapq.heappush(self._timers, (due, next(self._seq), timer, callback))
        return timer

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        timer = self.call_later(seconds, wake)
        try:
            await fut
        finally:
            timer.cancel()

    def pending_timers(self) -> int:
        """Timers (sleeps, delayed adds) not yet fired or cancelled."""
        return sum(1 for _, _, t, _ in self._timers if not t.cancelled)

    def next_deadline(self) -> float | None:
        """Monotonic time of the earliest pending timer, or None."""
        for when, _, timer, _ in sorted(self._timers):
            if not timer.cancelled:
                return when
        return None

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing every timer that falls due."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        target = self._mono + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, timer, callback = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._wall += timedelta(seconds=when - self._mono)
            self._mono = when
            callback()
        self._wall += timedelta(seconds=target - self._mono)
        self._mono = target

    async def step(self, seconds: float) -> None:
        """``advance`` then yield to the loop so woken tasks run before returning."""
        self.advance(seconds)
        for _ in range(3):
            await asyncio.sleep(0)


@dataclass(frozen=True)
class DriveReport(Generic[K]):
    """What one reconcile did to its key, as the controller would have seen it."""

    key: K
    result: Result | None
    error: BaseException | None
    requeued_after: float | None
    """Delay of an add_after (requeue_after / TemporaryError), if any."""
    rate_limited: bool
    """True if the key went back through the rate limiter (error or ``requeue``)."""
    forgotten: bool


@dataclass
class _RecordingQueue(Generic[K]):
    after: list[tuple[K, float]] = field(default_factory=list)
    limited: list[K] = field(default_factory=list)
    forgotten: list[K] = field(default_factory=list)

    def add_after(self, item: K, delay: float) -> None:
        self.after.append((item, delay))

    def add_rate_limited(self, item: K) -> None:
        self.limited.append(item)

    def forget(self, item: K) -> None:
        self.forgotten.append(item)


class ReconcileDriver(Generic[K]):
    """Calls a reconciler exactly as a controller worker does, and reports the outcome.

    Uses the real Controller code path (timeout, logging context, error handling) with
    a recording queue in place of the work queue.

    It does not: run informers or sources, deduplicate keys, wait out backoffs, or run
    more than one reconcile at a time. Call :meth:`drive` again to simulate a requeue.
    """

    def __init__(
        self, reconciler: Reconciler[K], *, name: str = "test", reconcile_timeout: float = 30.0
    ) -> None:
        self.controller: Controller[K] = Controller(
            name, reconciler, reconcile_timeout=reconcile_timeout
        )

    async def drive(self, key: K) -> DriveReport[K]:
        """Reconcile ``key`` once; return what the controller would do next with it."""
        recorder: _RecordingQueue[K] = _RecordingQueue()
        real = self.controller.queue
        captured: dict[str, object] = {}
        inner = self.controller.reconciler

        class _Capture:
            async def reconcile(self, request: K) -> Result:
                try:
                    result = await inner.reconcile(request)
                except BaseException as exc:
                    captured["error"] = exc
                    raise
                captured["result"] = result
                return result

        self.controller.queue = recorder  # type: ignore[assignment]
        self.controller.reconciler = _Capture()
        try:
            await self.controller.reconcile_key(key)
        finally:
            self.controller.queue = real
            self.controller.reconciler = inner
        result = captured.get("result")
        error = captured.get("error")
        return DriveReport(
            key=key,
            result=result if isinstance(result, Result) else None,
            error=error if isinstance(error, BaseException) else None,
            requeued_after=recorder.after[-1][1] if recorder.after else None,
            rate_limited=bool(recorder.limited),
            forgotten=bool(recorder.forgotten),
        )


async def reconcile_once(reconciler: Reconciler[K], key: K) -> DriveReport[K]:
    """Shorthand for ``await ReconcileDriver(reconciler).drive(key)``."""
    return await ReconcileDriver(reconciler).drive(key)


async def eventually(
    check: Callable[[], T | Awaitable[T]],
    *,
    within: float = 30.0,
    interval: float = 0.005,
    what: str = "",
) -> T:
    """Poll ``check`` until it returns something truthy, and return that; a check may
    also ``assert`` (an ``AssertionError`` means "not yet"). After ``within`` seconds of
    real time, raise ``AssertionError`` naming ``what`` (and the check's last failure).

    ``check`` may be a plain or an async function. Between checks the loop runs other
    tasks for ``interval`` seconds, so the code under test makes progress. ``within`` is
    a bound for a machine under load, not an expected duration: a passing check returns
    at once. It does not advance a :class:`FakeClock` — advance it before waiting.
    """
    deadline = time.monotonic() + within
    while True:
        failure: AssertionError | None = None
        try:
            outcome = check()
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except AssertionError as exc:
            failure = exc
        else:
            if outcome:
                return outcome
        if time.monotonic() >= deadline:
            detail = f": {failure}" if failure is not None else ""
            raise AssertionError(
                f"still not true after {within:g}s: {what or repr(check)}{detail}"
            ) from failure
        await asyncio.sleep(interval)
