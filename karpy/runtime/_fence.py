"""Write fencing: no API write leaves a replica that may no longer be the leader.

Leader election only promises that a leader *stops acting* before another replica can
take the Lease over (renew deadline < lease duration); it cannot stop requests that are
already on their way. So the manager's client asks a :class:`WriteGate` (the leader
elector) before every mutating request, and holds the request under
:func:`write_fence` while it is on the wire:

* before sending: a replica that held the lease and no longer does (lost, expired or
  released) raises :class:`errors.NotLeader` instead of sending;
* while waiting for the answer: when the gate closes (the renew deadline passes), the
  request is cancelled, which makes aiohttp drop its connection. The client's sockets
  are set to reset on close (SO_LINGER 0, see ``_client``), so bytes the kernel had not
  yet delivered are discarded rather than retransmitted after a partition heals. The
  caller gets :class:`errors.NotLeader`.

A request whose answer arrived was processed by the server while this replica still
led; one cut off was either processed before the deadline or never will be — unless an
intermediary (an L7 load balancer) had accepted its bytes already; no client can take
those back (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Protocol

from .errors import NotLeader

__all__ = ["WriteGate", "write_fence"]


class WriteGate(Protocol):
    """Decides whether this process may write to the API server now."""

    def write_allowance(self) -> float | None:
        """Seconds a write sent now may stay in flight (None: no limit); raise
        :class:`errors.NotLeader` if no write may be sent."""


@contextlib.asynccontextmanager
async def write_fence(gate: WriteGate | None, what: str) -> AsyncIterator[None]:
    """Run the body (one request: ``what``) only while ``gate`` allows writes; cancel it
    and raise :class:`errors.NotLeader` when the gate closes meanwhile."""
    if gate is None:
        yield
        return
    allowance = gate.write_allowance()
    if allowance is None:
        yield
        return
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    fired = False
    timer: asyncio.TimerHandle | None = None

    def check() -> None:
        # The deadline may have moved on (a renewal in between): look again, re-arm.
        nonlocal fired, timer
        try:
            remaining = gate.write_allowance()
        except NotLeader:
            remaining = 0.0
        if remaining is None or remaining > 0:
            timer = loop.call_later(remaining or 1.0, check)
            return
        fired = True
        task.cancel()

    timer = loop.call_later(allowance, check)
    try:
        yield
    except asyncio.CancelledError:
        if fired and task.uncancel() == 0:
            raise NotLeader(
                f"{what}: cut off in flight, the leader lease's renew deadline passed"
            ) from None
        raise
    finally:
        assert timer is not None
        timer.cancel()
