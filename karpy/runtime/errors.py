"""Errors raised by karpy.runtime, and the two a reconciler raises to steer its retries.

The tree::

    Error                         base of everything below
    ├── ReconcileError            raised *by reconcilers* to steer the controller
    │   ├── TerminalError         do not retry this request (logged, counted, forgotten)
    │   └── TemporaryError        retry after ``delay`` seconds, without counting a failure
    ├── ClientError               raised *by Client* for a request that did not succeed
    │   ├── TransportError        no HTTP answer: connection refused/reset, TLS, timeout
    │   │   └── RequestTimeout    the request's own timeout expired
    │   │       └── WatchIdle     a watch received nothing for its inactivity timeout
    │   ├── NotLeader             a write refused (or cut off) because the leader lease is lost
    │   └── ApiError              the API server answered with a non-2xx status
    │       ├── BadRequest        400
    │       ├── Unauthorized      401
    │       ├── Forbidden         403
    │       ├── NotFound          404
    │       ├── MethodNotAllowed  405
    │       ├── Conflict          409 (optimistic-concurrency clash: re-read and retry)
    │       │   └── AlreadyExists 409 with reason AlreadyExists (create of an existing name)
    │       ├── Gone              410 (resource version too old: relist)
    │       ├── Invalid           422 (the object failed validation)
    │       ├── TooManyRequests   429 (throttled)
    │       └── ServerError       5xx
    │           └── ServiceUnavailable 503
    ├── QueueShutDown             WorkQueue.get() after shutdown() once the queue is empty
    ├── CacheSyncTimeout          the manager's informers did not sync in time
    └── LeaderElectionLost        the manager lost its lease; its controllers were stopped

kubernetes-asyncio's ``ApiException`` and aiohttp's errors never escape the client: they
are translated here (``raise ... from``), so callers catch one tree. Names follow the
HTTP status (``NotFound``, not ``NotFoundError``), as Kubernetes users know them.
Every ApiError carries ``retry_after``: the server's Retry-After in seconds, or None.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "CacheSyncTimeout",
    "ClientError",
    "Conflict",
    "Error",
    "Forbidden",
    "Gone",
    "Invalid",
    "LeaderElectionLost",
    "MethodNotAllowed",
    "NotFound",
    "NotLeader",
    "QueueShutDown",
    "ReconcileError",
    "RequestTimeout",
    "ServerError",
    "ServiceUnavailable",
    "TemporaryError",
    "TerminalError",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "WatchIdle",
    "api_error_from_response",
]


class Error(Exception):
    """Base class of every error karpy.runtime raises on purpose."""


class ReconcileError(Error):
    """Base class of the errors a reconciler raises to tell the controller what to do."""


class TerminalError(ReconcileError):
    """Raised by a reconciler when retrying cannot help (bad spec, unsupported input).

    The controller logs it, counts it in ``controller_runtime_terminal_reconcile_errors_total``
    and forgets the request's backoff; the request comes back only on the next event.
    """


class TemporaryError(ReconcileError):
    """Raised by a reconciler to be called again after ``delay`` seconds.

    Unlike an ordinary exception this is not a failure: no error is logged, and the
    per-item backoff is not increased.
    """

    def __init__(self, message: str, *, delay: float) -> None:
        super().__init__(message)
        self.delay = delay


class ClientError(Error):
    """A request made by :class:`karpy.runtime.KubeClient` did not succeed."""


class TransportError(ClientError):
    """No HTTP answer came back: connection refused or reset, TLS failure, timeout."""


class RequestTimeout(TransportError):  # noqa: N818
    """The request's timeout (``KubeClient(timeout=...)`` or per call) expired."""


class WatchIdle(RequestTimeout):
    """A watch received nothing at all (no event, no bookmark) for its inactivity
    timeout. Not necessarily a fault: the API server sends no bookmarks for a kind its
    watch cache has seen no change of, so a quiet kind's healthy watch is silent too. The
    informer simply watches again from its last resourceVersion."""


class NotLeader(ClientError):  # noqa: N818
    """A write through the manager's client was refused because this process no longer
    holds the leader lease (or its renewal deadline passed), or a write in flight at that
    moment was cut off and its connection reset. Another replica may be leading: nothing
    was, or will be, written by this request. Raised only after the lease was held once;
    a replica that never led writes freely (events, its own runnables)."""


class ApiError(ClientError):
    """The API server answered with a non-2xx status.

    ``status`` is the HTTP code, ``reason`` the Status object's reason (e.g. "NotFound"),
    ``message`` the server's own explanation, ``body`` the decoded Status (or {}) and
    ``retry_after`` the seconds of the answer's Retry-After header (None without one).
    The client has already retried what the server asked it to retry
    (:mod:`karpy.runtime`'s client docs say when); what reaches you is final.
    """

    status: int = 0

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        body: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.reason = reason
        self.message = message
        self.body: Mapping[str, Any] = body or {}
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"{self.status} {self.reason}: {self.message}" if self.reason else self.message


class BadRequest(ApiError):  # noqa: N818
    """400: the request was malformed (bad selector, bad patch)."""

    status = 400


class Unauthorized(ApiError):  # noqa: N818
    """401: the credentials were missing or rejected."""

    status = 401


class Forbidden(ApiError):  # noqa: N818
    """403: RBAC denies this verb on this resource."""

    status = 403


class NotFound(ApiError):  # noqa: N818
    """404: the object (or the resource type) does not exist."""

    status = 404


class MethodNotAllowed(ApiError):  # noqa: N818
    """405: the verb is not supported on this resource."""

    status = 405


class Conflict(ApiError):  # noqa: N818
    """409: the object changed since it was read (stale resourceVersion); re-read and retry."""

    status = 409


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists: an object with that name exists already."""


class Gone(ApiError):  # noqa: N818
    """410: the resourceVersion is too old (compacted); list again."""

    status = 410


class Invalid(ApiError):  # noqa: N818
    """422: the object failed validation; the message names the field."""

    status = 422


class TooManyRequests(ApiError):  # noqa: N818
    """429: the server throttled the request (or a PodDisruptionBudget refused an
    eviction); ``retry_after`` holds its hint in seconds."""

    status = 429


class ServerError(ApiError):
    """5xx: the API server (or etcd behind it) failed."""

    status = 500


class ServiceUnavailable(ServerError):  # noqa: N818
    """503: the API server is starting or shutting down."""

    status = 503


class QueueShutDown(Error):  # noqa: N818
    """Raised by ``WorkQueue.get()`` once the queue is shut down and holds no more items."""


class CacheSyncTimeout(Error):  # noqa: N818
    """Raised by ``Manager.run()`` when informers did not complete their first list in
    time — usually a missing CRD or missing RBAC; the message names the kinds."""


class LeaderElectionLost(Error):  # noqa: N818
    """Raised by ``Manager.run()`` when the lease could not be renewed in time.

    Leader-only runnables were stopped before it was raised; the process should exit
    (as controller-runtime does) and be restarted.
    """


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
    503: ServiceUnavailable,
}


def api_error_from_response(
    status: int, body: bytes | str | None, headers: Mapping[str, str] | None = None
) -> ApiError:
    """Build the typed :class:`ApiError` for an HTTP status and its (Status) body."""
    decoded: dict[str, Any] = {}
    if body:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            decoded = parsed
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    message = str(decoded.get("message") or text or f"HTTP {status}")
    reason = str(decoded.get("reason") or "")
    cls: type[ApiError]
    if status == 409 and reason == "AlreadyExists":
        cls = AlreadyExists
    elif status in _BY_STATUS:
        cls = _BY_STATUS[status]
    elif status >= 500:
        cls = ServerError
    else:
        cls = ApiError
    return cls(
        message,
        status=status,
        reason=reason,
        body=decoded,
        retry_after=_retry_after((headers or {}).get("Retry-After")),
    )


def _retry_after(raw: str | None) -> float | None:
    """Retry-After in seconds: a whole number >= 0, as client-go reads it (an HTTP
    date, a fraction or garbage count as absent)."""
    if raw is None or not raw.strip().isdigit():
        return None
    return float(int(raw))
