"""The client's request metrics, under the names Karpenter registers for client-go.

Karpenter plugs client-go's request hooks into Prometheus through operatorpkg
(``opmetrics.RegisterClientMetrics``), so its /metrics carries:

- ``client_go_request_total{code, method}``: one per HTTP *attempt* (client-go counts
  every attempt of a retried request), ``code`` the status or ``<error>`` when no answer
  came (connection refused or reset, timeout, cancellation); ``method`` the HTTP verb.
- ``client_go_request_duration_seconds{verb, group, version, kind, subresource}``: one
  per request, from before its first rate-limiter token to its final answer (retries
  included); watches are not observed (client-go's ``Watch`` does not either). ``kind``
  is the resource as in the path (``pods``, ``nodeclaims``); ``verb`` is the HTTP verb
  renamed as operatorpkg renames it: POST is CREATE, a GET of no single object is LIST,
  a PUT is UPDATE (CREATE when it names no object). Buckets: ExponentialBuckets(0.001,
  1.5, 20).

The labels of the duration come from the request's path as client-go templates it
(``finalURLTemplate``: the namespace and name become ``{namespace}`` and ``{name}``),
then parsed as operatorpkg parses it, quirks included, so each series matches
Karpenter's.

These are prometheus_client instruments, not OpenTelemetry ones: every request records
two, and an OTel ``add`` plus ``record`` cost about 12 µs where these cost about 4 µs
with their labelled children kept (``benchmarks/runtime_bench.py --client-only``);
prometheus_client is thread-safe, which the lease renewal thread, recording on its own
event loop, needs.
"""

from __future__ import annotations

import contextlib
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["REQUEST_BUCKETS", "ClientMetrics", "request_labels"]

#: operatorpkg's ``prometheus.ExponentialBuckets(0.001, 1.5, 20)``.
REQUEST_BUCKETS = tuple(0.001 * 1.5**i for i in range(20))

_Labels = tuple[str, str, str, str, str]


def _template(segments: list[str]) -> list[str]:
    """client-go's ``finalURLTemplate`` on a path split at "/" (leading "" included):
    the namespace and name segments replaced by ``{namespace}`` and ``{name}``."""
    if len(segments) <= 2:
        return segments
    if segments[1] == "api":
        index = 3
    elif segments[1] == "apis":
        index = 4
    else:
        return ["", "{prefix}"]
    out = list(segments)
    left = len(out) - index
    if left == 2:
        out[index + 1] = "{name}"
    elif left == 3:
        if out[index + 2] in ("finalize", "status"):
            out[index + 1] = "{name}"
        else:
            out[index + 1] = "{namespace}"
    elif left >= 4:
        out[index + 1] = "{namespace}"
        if out[index + 3] not in ("finalize", "status"):
            out[index + 3] = "{name}"
    return out


def request_labels(method: str, path: str) -> _Labels | None:
    """(verb, group, version, kind, subresource) of a request, as Karpenter labels
    ``client_go_request_duration_seconds``; None for a path it does not observe
    (neither /api nor /apis, or too short)."""
    segments = _template(path.split("?", 1)[0].rstrip("/").split("/"))
    parts = segments[1:]
    if not parts:
        return None
    if parts[0] == "api":
        group_index = 0
    elif parts[0] == "apis":
        group_index = 1
    else:
        return None
    if len(parts) < group_index + 3:
        return None
    version_index = group_index + 1
    if parts[group_index + 2] == "namespaces" and len(parts) > group_index + 4:
        kind_index = version_index + 3
    else:
        kind_index = version_index + 1
    subresource = parts[kind_index + 2] if len(parts) == kind_index + 3 else ""
    named = "{name}" in segments
    verb = method
    if method == "POST":
        verb = "CREATE"
    elif method == "GET" and not named:
        verb = "LIST"
    elif method == "PUT":
        verb = "UPDATE" if named else "CREATE"
    group = "" if group_index == 0 else parts[group_index]
    return verb, group, parts[version_index], parts[kind_index], subresource


class ClientMetrics:
    """The two client-go request series on one registry (see the module docstring)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self._results = Counter(
            "client_go_request_total",
            "Number of HTTP requests, partitioned by status code and method.",
            ("code", "method"),
            registry=registry,
        )
        self._latency = Histogram(
            "client_go_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, group, version, kind, and "
            "subresource.",
            ("verb", "group", "version", "kind", "subresource"),
            buckets=REQUEST_BUCKETS,
            registry=registry,
        )
        # The labelled children, kept here: ``labels()`` takes a lock and builds a key
        # on every call. A dict lookup is safe from any thread; a race only builds a
        # child twice, and prometheus_client hands back the same one.
        self._attempts: dict[tuple[str, str], Any] = {}
        self._latencies: dict[_Labels, Any] = {}

    def attempt(self, method: str, code: int | None) -> None:
        """Count one HTTP attempt: its status, or None when no answer came."""
        key = ("<error>" if code is None else str(code), method)
        child = self._attempts.get(key)
        if child is None:
            child = self._attempts[key] = self._results.labels(*key)
        child.inc()

    def request(self, method: str, path: str, seconds: float) -> None:
        """Observe one request's latency (all its attempts) under its path's labels."""
        labels = request_labels(method, path)
        if labels is None:
            return
        child = self._latencies.get(labels)
        if child is None:
            child = self._latencies[labels] = self._latency.labels(*labels)
        child.observe(seconds)

    def unregister(self) -> None:
        """Take both series off the registry."""
        for collector in (self._results, self._latency):
            with contextlib.suppress(KeyError):
                self._registry.unregister(collector)
