"""Merging concurrent identical CreateFleet calls into one, as Karpenter AWS's
CreateFleet batcher does (pkg/batcher/createfleet.go).

A burst of NodeClaims of one shape makes the same request (same overrides, templates
and tags: the NodeClaim's own tags are written after the launch). Requests wait in a
batch keyed by their content until none has joined for 35 ms (the idle window) or the
first has waited 1 s (the max window), or 1000 have gathered; then one CreateFleet
asks for as many instances as requests, and its instances are handed out one per
request in order. A request left without an instance (partial fulfilment) gets the
answer's errors and no instance, so the caller reads it as a capacity error; an
exception from the call goes to every request of the batch.

No ``ClientToken`` is set here, as in Karpenter AWS: the SDK fills CreateFleet's
idempotency token with a fresh UUID for each call and sends that same token on each of
its own retries, so a retry of a call whose answer was lost (a timeout, a 5xx) gets the
first attempt's instances back instead of launching more. A *later* launch of the same
NodeClaim must not reuse a token: the instance a token names may be an orphan that
garbage collection has terminated (a process killed between CreateFleet and the
NodeClaim status write), and replaying it would give the NodeClaim a dead instance
that never registers. Such a launch asks anew; the orphan is garbage collection's.

Batches run in tasks the batcher owns (named ``create-fleet-batch``); ``aclose``
cancels the ones still waiting. A caller cancelled while its batch is in flight loses
its place, and the instance launched for it (if any) is handed to ``release`` at once —
the provider terminates it — instead of running unowned until garbage collection finds
it (30 s later at best; Karpenter leaves it to garbage collection). If ``release``
fails, the instance IDs are kept in :attr:`CreateFleetBatcher.unreleased`, logged, and
handed over again with the next batch's answer; garbage collection remains the
backstop (the instance is tagged as the cluster's).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from karpy_aws._metrics import AWSMetrics

__all__ = [
    "CREATE_FLEET_IDLE",
    "CREATE_FLEET_MAX_ITEMS",
    "CREATE_FLEET_MAX_WAIT",
    "CreateFleetBatcher",
]

log = logging.getLogger("karpy.aws.batcher")

CREATE_FLEET_IDLE: Final = 0.035
"""Seconds a batch waits for another request before it is sent (Karpenter's 35 ms)."""
CREATE_FLEET_MAX_WAIT: Final = 1.0
"""Seconds the first request of a batch waits at most (Karpenter's 1 s)."""
CREATE_FLEET_MAX_ITEMS: Final = 1000
"""Requests in one batch at most (Karpenter's 1000)."""

CreateFleet = Callable[..., Awaitable[Mapping[str, Any]]]
Release = Callable[[list[str]], Awaitable[object]]

_BATCHER: Final = {"batcher": "create_fleet"}


@dataclass
class _Batch:
    request: dict[str, Any]
    names: list[str] = field(default_factory=list)
    waiters: list[asyncio.Future[Mapping[str, Any]]] = field(default_factory=list)
    joined: asyncio.Event = field(default_factory=asyncio.Event)


class CreateFleetBatcher:
    """``await create_fleet(request, nodeclaim=name)`` -> that request's share of a
    merged CreateFleet answer (see the module doc)."""

    def __init__(
        self,
        create_fleet: CreateFleet,
        *,
        idle: float = CREATE_FLEET_IDLE,
        max_wait: float = CREATE_FLEET_MAX_WAIT,
        max_items: int = CREATE_FLEET_MAX_ITEMS,
        release: Release | None = None,
    ) -> None:
        self._create_fleet = create_fleet
        self._release = release
        self.unreleased: set[str] = set()
        """Instances launched for cancelled callers whose release failed (retried)."""
        self._idle = idle
        self._max_wait = max_wait
        self._max_items = max_items
        self._open: dict[str, _Batch] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: CreateFleet calls sent and requests they carried (for metrics and benchmarks)
        self.calls = 0
        self.requests = 0
        #: where each batch's window and size are recorded (set by the provider)
        self.metrics: AWSMetrics | None = None

    async def create_fleet(
        self, request: Mapping[str, Any], *, nodeclaim: str
    ) -> Mapping[str, Any]:
        """Add ``request`` (one instance) to the open batch of identical requests and
        wait for its share of the answer."""
        key = json.dumps(request, sort_keys=True, default=str)
        batch = self._open.get(key)
        if batch is None:
            batch = _Batch(request=copy.deepcopy(dict(request)))
            self._open[key] = batch
            task = asyncio.create_task(self._run(key, batch), name="create-fleet-batch")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        future: asyncio.Future[Mapping[str, Any]] = asyncio.get_running_loop().create_future()
        batch.names.append(nodeclaim)
        batch.waiters.append(future)
        batch.joined.set()
        if len(batch.waiters) >= self._max_items:
            self._open.pop(key, None)
        return await future

    async def _run(self, key: str, batch: _Batch) -> None:
        loop = asyncio.get_running_loop()
        opened = loop.time()
        deadline = opened + self._max_wait
        try:
            while self._open.get(key) is batch:
                batch.joined.clear()
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    await asyncio.wait_for(batch.joined.wait(), min(self._idle, remaining))
                except TimeoutError:
                    break
        finally:
            if self._open.get(key) is batch:
                del self._open[key]
        if self.metrics is not None:
            self.metrics.batch_time.record(loop.time() - opened, _BATCHER)
            self.metrics.batch_size.record(len(batch.waiters), _BATCHER)
        await self._send(batch)

    async def _send(self, batch: _Batch) -> None:
        request = batch.request
        request["TargetCapacitySpecification"] = {
            **request["TargetCapacitySpecification"],
            "TotalTargetCapacity": len(batch.waiters),
        }
        self.calls += 1
        self.requests += len(batch.waiters)
        log.debug("creating fleet", extra={"nodeclaims": batch.names})
        try:
            answer = await self._create_fleet(**request)
        except Exception as exc:
            for waiter in batch.waiters:
                if not waiter.done():
                    waiter.set_exception(exc)
            return
        except BaseException:
            for waiter in batch.waiters:
                waiter.cancel()
            raise
        shares = _split(answer, len(batch.waiters))
        abandoned: list[str] = []
        for waiter, share in zip(batch.waiters, shares, strict=True):
            if not waiter.done():
                waiter.set_result(share)
            else:  # its caller was cancelled while the call was in flight
                abandoned.extend(
                    iid for i in share.get("Instances") or () for iid in i.get("InstanceIds") or ()
                )
        await self._release_abandoned(abandoned)

    async def _release_abandoned(self, abandoned: list[str]) -> None:
        ids = sorted({*abandoned, *self.unreleased})
        if not ids or self._release is None:
            return
        log.info("terminating instances launched for cancelled launches",
                 extra={"instance-ids": ids})  # fmt: skip
        try:
            await self._release(ids)
        except Exception as exc:
            self.unreleased.update(ids)
            log.error(
                "failed terminating instances of cancelled launches, retrying with the next "
                "batch; garbage collection will find them otherwise",
                extra={"instance-ids": ids, "error": str(exc)},
            )
        else:
            self.unreleased.difference_update(ids)

    async def aclose(self) -> None:
        """Cancel the batches still waiting (their callers see CancelledError)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _split(answer: Mapping[str, Any], count: int) -> list[Mapping[str, Any]]:
    """One answer per request: each gets one instance in order while they last; the
    rest get the answer's errors and no instance."""
    errors = list(answer.get("Errors") or [])
    shares: list[Mapping[str, Any]] = []
    for launched in answer.get("Instances") or []:
        for iid in launched.get("InstanceIds") or []:
            if len(shares) == count:
                log.error(
                    "received more instances than requested, ignoring instance",
                    extra={"instance-id": iid},
                )
                continue
            shares.append(
                {
                    "FleetId": answer.get("FleetId"),
                    "Errors": errors,
                    "Instances": [{**launched, "InstanceIds": [iid]}],
                }
            )
    if len(shares) < count and not errors:
        errors = [
            {
                "ErrorCode": "too few instances returned",
                "ErrorMessage": "too few instances returned",
            }
        ]
    while len(shares) < count:
        shares.append({"FleetId": answer.get("FleetId"), "Errors": errors, "Instances": []})
    return shares
