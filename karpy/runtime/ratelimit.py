"""Rate limiters and backoff: how long an item or a retry waits.

The work queue's rate limiters follow client-go's semantics (``when`` a failed key may
come back, ``forget`` once it succeeds); the controller default is
:func:`default_controller_rate_limiter` (per key 5 ms → 1000 s exponential, overall
10 qps with a burst of 100). Pass another to ``Controller(rate_limiter=...)`` or
``WorkQueue(rate_limiter=...)``. :class:`Backoff` is the same curve for a loop that
retries one call.
"""

from ._backoff import Backoff
from ._ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)

__all__ = [
    "Backoff",
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "default_controller_rate_limiter",
]
