"""How a client's requests flow to the API server: a token bucket and retries.

Two of client-go's rest-client behaviours, which Karpenter inherits:

* **A client-wide token bucket** (client-go's ``flowcontrol.NewTokenBucketRateLimiter``):
  every request, retries and watch opens included, takes a token first; ``qps`` tokens
  come back per second up to ``burst``. Karpenter's defaults are 200 and 300
  (``KUBE_CLIENT_QPS``/``KUBE_CLIENT_BURST``). A controller loop gone wrong then
  throttles itself instead of the API server, and the server's own priority-and-fairness
  limits are met rarely. Unlike controller-runtime, whose clients keep one bucket per
  resource type, all of a client's requests share one bucket (the clients made by
  ``with_reader`` share it too), so the bound holds for the whole process; the leader
  election's client (``with_own_connections``) has a bucket of its own, so a busy
  process cannot starve its Lease renewals.
* **Retries the server asks for** (client-go's ``rest.Request`` with its
  ``checkWait``): a 429 or 5xx answer that carries ``Retry-After`` is tried again after
  that many seconds, whatever the verb — the server is saying it did not do the work
  (priority-and-fairness rejections, an API server shutting down). A GET whose
  connection was reset or closed before the answer is tried again after a second, as
  client-go does; writes are not (they may have been applied). Anything else — a 429
  without Retry-After, such as a PodDisruptionBudget refusing an eviction, or a 500 —
  goes straight back to the caller, whose work queue backs off.

Retries are bounded three ways: at most :data:`MAX_RETRIES` (client-go's 10), each wait
is the longer of Retry-After and a jittered exponential backoff but at most
:data:`MAX_RETRY_WAIT`, and no wait may run past the request's own timeout — the last
error is raised instead, so the caller's backoff takes over.
"""

from __future__ import annotations

import errno
from typing import Final

import aiohttp

from ._backoff import Backoff
from ._clock import Clock, SystemClock
from ._ratelimit import BucketRateLimiter
from .errors import ApiError, ServerError, TooManyRequests, TransportError

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_QPS",
    "MAX_RETRIES",
    "MAX_RETRY_WAIT",
    "RetryState",
    "TokenBucket",
]

DEFAULT_QPS: Final = 200.0
"""Karpenter's ``KUBE_CLIENT_QPS`` default: requests per second, sustained."""

DEFAULT_BURST: Final = 300
"""Karpenter's ``KUBE_CLIENT_BURST`` default: requests allowed at once after a lull."""

MAX_RETRIES: Final = 10
"""How many times one request is retried at most (client-go's ``maxRetries``)."""

MAX_RETRY_WAIT: Final = 10.0
"""The longest one retry waits, whatever Retry-After says (seconds)."""

_TRANSIENT_WAIT: Final = 1.0
"""The wait before a GET whose connection broke is tried again (client-go's artificial
``Retry-After: 1``)."""


class TokenBucket:
    """A token bucket of ``qps`` refill and ``burst`` capacity that requests wait on.

    :meth:`wait` takes a token now, going into debt if none is left, and sleeps until the
    debt is repaid (Go's ``rate.Limiter.Wait``), so waiters are served in arrival order
    at ``qps`` and no request is refused.
    """

    def __init__(self, *, qps: float, burst: int, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._bucket: BucketRateLimiter[None] = BucketRateLimiter(
            qps=qps, burst=burst, clock=self._clock
        )
        self.qps = qps
        self.burst = burst

    async def wait(self) -> float:
        """Take a token, sleeping while the bucket is in debt; returns the seconds slept."""
        delay = self._bucket.when(None)
        if delay > 0:
            await self._clock.sleep(delay)
        return delay


def _connection_broke(exc: BaseException | None) -> bool:
    """True for a connection reset or closed before the answer arrived (client-go's
    ``IsConnectionReset``/``IsProbableEOF``), not for refused connections or timeouts."""
    if isinstance(exc, aiohttp.ServerDisconnectedError | ConnectionResetError):
        return True
    if isinstance(exc, aiohttp.ClientOSError):
        return exc.errno in (errno.ECONNRESET, errno.EPIPE)
    return False


class RetryState:
    """The retry decisions for one request (see the module docstring).

    :meth:`delay` is asked after each failed attempt; it returns how long to wait
    before the next one, or None when the failure goes back to the caller.
    """

    def __init__(self, method: str, *, backoff: Backoff | None = None) -> None:
        self._method = method
        self._backoff = backoff or Backoff(initial=0.05, maximum=MAX_RETRY_WAIT, jitter=0.5)
        self.retries = 0

    def delay(self, failure: BaseException, *, remaining: float) -> float | None:
        """Seconds to wait before retrying after ``failure`` (None: do not retry).

        ``remaining`` is what is left of the request's timeout: a retry that could not
        start before it ends is not made.
        """
        if self.retries >= MAX_RETRIES:
            return None
        wait = self._asked_wait(failure)
        if wait is None:
            return None
        wait = min(MAX_RETRY_WAIT, max(wait, self._backoff.next()))
        if wait >= remaining:
            return None
        self.retries += 1
        return wait

    def _asked_wait(self, failure: BaseException) -> float | None:
        if isinstance(failure, ApiError):
            # checkWait: only 429 and 5xx, and only when the server named a wait.
            if isinstance(failure, TooManyRequests | ServerError):
                return failure.retry_after
            return None
        if (
            self._method == "GET"
            and isinstance(failure, TransportError)
            and _connection_broke(failure.__cause__)
        ):
            return _TRANSIENT_WAIT
        return None
