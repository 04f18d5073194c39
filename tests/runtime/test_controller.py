"""Controllers: what happens to a key after each kind of reconcile outcome, concurrency,
shutdown, singletons, logs and metrics — in process, without a cluster."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from karpy.runtime import Controller, Request, Result, WorkQueue, errors, singleton_controller
from karpy.runtime.telemetry import JsonFormatter, Metrics
from karpy.runtime.testing import FakeClock, ReconcileDriver, eventually, reconcile_once

REQ = Request("ns", "obj")


class Pushes:
    """A source the test feeds by hand."""

    def __init__(self) -> None:
        self.queue: WorkQueue[Request] | None = None

    def attach(self, queue: WorkQueue[Request]) -> Callable[[], None]:
        self.queue = queue
        return lambda: None

    def push(self, *keys: Request) -> None:
        assert self.queue is not None, "controller not running"
        for key in keys:
            self.queue.add(key)


class Scripted:
    """A reconciler whose behaviour per call is scripted; records calls."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[Request] = []

    async def reconcile(self, request: Request) -> Result:
        self.calls.append(request)
        outcome = self.outcomes.pop(0) if self.outcomes else Result()
        if isinstance(outcome, BaseException):
            raise outcome
        if callable(outcome):
            return await outcome()  # type: ignore[no-any-return]
        return outcome  # type: ignore[no-any-return]


# -- outcomes, through the testing driver ---------------------------------------------


async def test_success_forgets_the_key() -> None:
    report = await reconcile_once(Scripted(Result()), REQ)
    assert report.forgotten and not report.rate_limited and report.requeued_after is None


async def test_requeue_after_forgets_and_schedules() -> None:
    report = await reconcile_once(Scripted(Result(requeue_after=30)), REQ)
    assert report.forgotten and report.requeued_after == 30


async def test_requeue_goes_through_the_rate_limiter() -> None:
    report = await reconcile_once(Scripted(Result(requeue=True)), REQ)
    assert report.rate_limited and not report.forgotten


async def test_temporary_error_retries_after_its_delay_without_backoff() -> None:
    report = await reconcile_once(Scripted(errors.TemporaryError("wait", delay=7)), REQ)
    assert report.requeued_after == 7 and not report.rate_limited
    assert isinstance(report.error, errors.TemporaryError)


async def test_terminal_error_is_not_retried() -> None:
    report = await reconcile_once(Scripted(errors.TerminalError("bad spec")), REQ)
    assert report.forgotten and not report.rate_limited and report.requeued_after is None


async def test_any_other_exception_retries_with_backoff() -> None:
    report = await reconcile_once(Scripted(RuntimeError("boom")), REQ)
    assert report.rate_limited and isinstance(report.error, RuntimeError)


async def test_a_reconcile_that_hangs_times_out_and_retries() -> None:
    async def hang() -> Result:
        await asyncio.sleep(3600)
        return Result()

    report = await ReconcileDriver(Scripted(hang), reconcile_timeout=0.05).drive(REQ)
    assert report.rate_limited


# -- running controllers ---------------------------------------------------------------


async def _run(controller: Controller[Any]) -> asyncio.Task[None]:
    task = asyncio.create_task(controller.run(), name="controller-under-test")
    await asyncio.sleep(0)
    return task


def _idle(controller: Controller[Any]) -> bool:
    """No key queued or being reconciled (delayed keys may wait on the clock)."""
    return not len(controller.queue) and not controller.queue.processing()


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_workers_survive_exceptions_and_failed_keys_come_back(clock: FakeClock) -> None:
    reconciler = Scripted(RuntimeError("boom"), Result(), Result())
    controller: Controller[Request] = Controller("t", reconciler, clock=clock)
    source = Pushes()
    controller.watch(source)
    task = await _run(controller)
    source.push(REQ)
    # The failure is handled: the key waits out its backoff on the (fake) clock.
    await eventually(lambda: _idle(controller) and controller.queue.pending_delayed() == 1)
    assert reconciler.calls == [REQ]
    source.push(Request("ns", "other"))  # the worker is alive
    await eventually(lambda: _idle(controller) and len(reconciler.calls) == 2)
    assert reconciler.calls[-1] == Request("ns", "other")
    clock.advance(0.005)  # the failed key's first backoff
    await eventually(lambda: _idle(controller) and reconciler.calls.count(REQ) == 2)
    assert controller.queue.num_requeues(REQ) == 0  # forgotten after the success
    await _stop(task)


async def test_requeue_after_reconciles_again_on_time(clock: FakeClock) -> None:
    reconciler = Scripted(Result(requeue_after=60), Result())
    controller: Controller[Request] = Controller("t", reconciler, clock=clock)
    source = Pushes()
    controller.watch(source)
    task = await _run(controller)
    source.push(REQ)
    await eventually(lambda: _idle(controller) and controller.queue.pending_delayed() == 1)
    clock.advance(59)  # not due yet: the delayed add stays delayed
    assert controller.queue.pending_delayed() == 1 and _idle(controller)
    assert len(reconciler.calls) == 1
    clock.advance(1)
    await eventually(lambda: len(reconciler.calls) == 2)
    await _stop(task)


async def test_a_key_is_never_reconciled_by_two_workers_at_once() -> None:
    active: set[Request] = set()
    overlaps = []
    done = 0

    class Slow:
        async def reconcile(self, request: Request) -> Result:
            nonlocal done
            if request in active:
                overlaps.append(request)
            active.add(request)
            await asyncio.sleep(0.002)
            active.discard(request)
            done += 1
            return Result()

    controller: Controller[Request] = Controller("t", Slow(), workers=8)
    source = Pushes()
    controller.watch(source)
    task = await _run(controller)
    keys = [Request("ns", f"k{i % 3}") for i in range(300)]
    for key in keys:
        source.push(key)
        await asyncio.sleep(0)
    await eventually(lambda: _idle(controller))
    await _stop(task)
    assert overlaps == []
    assert 3 <= done < 300  # parallel across keys, deduplicated per key


async def test_cancel_lets_inflight_reconciles_finish() -> None:
    started, finished = asyncio.Event(), asyncio.Event()

    async def work() -> Result:
        started.set()
        await asyncio.sleep(0.05)
        finished.set()
        return Result()

    controller: Controller[Request] = Controller("t", Scripted(work), drain_timeout=5)
    source = Pushes()
    controller.watch(source)
    task = await _run(controller)
    source.push(REQ)
    await started.wait()
    await _stop(task)
    assert finished.is_set()
    assert controller.queue.shutting_down


async def test_cancel_cuts_off_reconciles_after_the_drain_timeout() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hang() -> Result:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return Result()

    controller: Controller[Request] = Controller("t", Scripted(hang), drain_timeout=0.05)
    source = Pushes()
    controller.watch(source)
    task = await _run(controller)
    source.push(REQ)
    await started.wait()
    await asyncio.wait_for(_stop(task), 10)
    assert cancelled.is_set()


async def test_singleton_runs_periodically(clock: FakeClock) -> None:
    rounds = 0

    class Tick:
        async def reconcile(self) -> Result:
            nonlocal rounds
            rounds += 1
            return Result()

    controller = singleton_controller("tick", Tick(), period=10, clock=clock)
    task = await _run(controller)

    def waiting_for_the_next_round() -> bool:
        return _idle(controller) and controller.queue.pending_delayed() == 1

    await eventually(waiting_for_the_next_round)
    assert rounds == 1
    clock.advance(9.9)
    assert waiting_for_the_next_round() and rounds == 1
    clock.advance(0.1)
    await eventually(lambda: rounds == 2 and waiting_for_the_next_round())
    clock.advance(10)
    await eventually(lambda: rounds == 3 and waiting_for_the_next_round())
    await _stop(task)


async def test_reconcile_logs_carry_the_reconcile_context() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    app_log = logging.getLogger("test.app")
    runtime_log = logging.getLogger("karpy.runtime.controller")
    for logger in (app_log, runtime_log):
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)

    class Logs:
        async def reconcile(self, request: Request) -> Result:
            app_log.info("did a thing", extra={"NodeClaim": {"name": "nc-1"}})
            raise RuntimeError("and failed")

    try:
        await reconcile_once(Logs(), REQ)
    finally:
        for logger in (app_log, runtime_log):
            logger.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    info, error = lines
    assert list(info)[:4] == ["level", "time", "logger", "message"]
    assert info["level"] == "INFO" and info["message"] == "did a thing"
    assert info["controller"] == "test" and info["namespace"] == "ns" and info["name"] == "obj"
    assert info["NodeClaim"] == {"name": "nc-1"}
    assert error["message"] == "Reconciler error" and error["error"] == "and failed"
    assert error["reconcileID"] == info["reconcileID"] and len(info["reconcileID"]) == 36
    assert info["time"].endswith("Z")


async def test_metrics_count_reconciles_by_result() -> None:
    metrics = Metrics()
    controller: Controller[Request] = Controller(
        "m", Scripted(Result(), RuntimeError("x"), errors.TerminalError("y")), metrics=metrics
    )
    for _ in range(3):
        await controller.reconcile_key(REQ)
    text = metrics.render().decode()
    assert 'controller_runtime_reconcile_total{controller="m",result="success"} 1.0' in text
    assert 'controller_runtime_reconcile_total{controller="m",result="error"} 2.0' in text
    assert 'controller_runtime_reconcile_errors_total{controller="m"} 2.0' in text
    assert 'controller_runtime_terminal_reconcile_errors_total{controller="m"} 1.0' in text
    assert 'controller_runtime_reconcile_time_seconds_count{controller="m"} 3.0' in text
    assert 'workqueue_retries_total{controller="m",name="m"} 1.0' in text
    assert 'controller_runtime_max_concurrent_reconciles{controller="m"} 1.0' in text


async def test_a_reconciler_bug_counts_as_a_panic_and_the_worker_keeps_serving() -> None:
    """controller-runtime recovers a reconciler's panic, counts it and goes on; here a
    programming error (AttributeError, KeyError ...) is the panic. An error the
    reconciler reports (an API error, a RuntimeError) is no panic."""
    metrics = Metrics()
    pushes = Pushes()
    reconciler = Scripted(
        AttributeError("'NoneType' object has no attribute 'spec'"), KeyError("zone"),
        errors.Conflict("stale"), Result(),
    )
    controller: Controller[Request] = Controller("p", reconciler, metrics=metrics)
    controller.watch(pushes)
    assert 'controller_runtime_reconcile_panics_total{controller="p"} 0.0' in (
        metrics.render().decode()
    ), "present at 0 before the first panic, as controller-runtime's initMetrics"
    task = asyncio.create_task(controller.run())
    try:
        await eventually(lambda: pushes.queue is not None)
        for name in ("a", "b", "c", "d"):
            pushes.push(Request("ns", name))
        # the last key, after the panics, is still reconciled
        await eventually(lambda: 'controller_runtime_reconcile_total{controller="p",'
                         'result="success"} 1.0' in metrics.render().decode())
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    text = metrics.render().decode()
    assert 'controller_runtime_reconcile_panics_total{controller="p"} 2.0' in text
    assert 'controller_runtime_reconcile_errors_total{controller="p"} 3.0' in text


async def test_only_the_controllers_own_deadline_counts_as_a_reconcile_timeout() -> None:
    """controller_runtime_reconcile_timeouts_total counts reconciles cut off at
    reconcile_timeout (controller-runtime's ReconciliationTimeout), not a TimeoutError
    the reconciler raised itself."""

    async def hang() -> Result:
        await asyncio.Event().wait()
        return Result()

    metrics = Metrics()
    controller: Controller[Request] = Controller(
        "t", Scripted(hang, TimeoutError("the cloud API timed out")),
        reconcile_timeout=0.05, metrics=metrics,
    )
    assert 'controller_runtime_reconcile_timeouts_total{controller="t"} 0.0' in (
        metrics.render().decode()
    )
    await controller.reconcile_key(REQ)
    await controller.reconcile_key(REQ)
    text = metrics.render().decode()
    assert 'controller_runtime_reconcile_timeouts_total{controller="t"} 1.0' in text
    assert 'controller_runtime_reconcile_errors_total{controller="t"} 2.0' in text
