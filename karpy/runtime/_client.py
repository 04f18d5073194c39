"""The Kubernetes client: typed async verbs on plain JSON objects, for any kind.

kubernetes-asyncio supplies configuration (kubeconfig, in-cluster service account, token
refresh) and its aiohttp session; the verbs are issued here directly against the REST
paths a :class:`Kind` describes. That skips the generated model classes — objects stay
plain dicts, decoded once — and works the same for core kinds and custom resources.

Every request carries a timeout. Every failure is translated at this boundary into
:mod:`karpy.runtime.errors` (``raise ... from`` the original), so callers never see
kubernetes-asyncio's or aiohttp's exceptions.

Requests flow as client-go's do (:mod:`._flowcontrol`): each takes a token from a
client-wide bucket (``qps``/``burst``, Karpenter's 200/300 by default) and a 429 or 5xx
answer carrying Retry-After is tried again, bounded by the request's timeout, as is a
GET whose connection broke. The first token is waited for before the timeout starts.

Reads may be served by a cache: :meth:`KubeClient.with_reader` returns a client whose
``get``/``list`` consult the reader for kinds it serves (returning read-only objects),
while writes always go to the API server.

The environment is read once, not per request. kubernetes-asyncio opens its aiohttp
session with ``trust_env=True``, and aiohttp then looks up ``~/.netrc`` and the proxy
variables on *every* request, each in a worker thread (two thread hops, a failed file
open and a parse per request: about a fifth of karpy's CPU time while a thousand
NodeClaims launch). The clients built here resolve the proxy for the API server's
address once, when they are built: when none applies (the usual case, and the in-cluster
one, where ``NO_PROXY`` covers the API server) the per-request lookups are switched
off; when one does, aiohttp keeps honouring it as before. Kubernetes clients never read
``.netrc``; the kubeconfig's credentials are the only ones sent.

Requests are counted as client-go counts them when a manager asks
(``_count_requests_in``, for a client and every client derived from it):
``client_go_request_total`` per attempt and ``client_go_request_duration_seconds`` per
request, under Karpenter's labels (see ``_client_metrics``).

Writes can be fenced on leadership: :meth:`KubeClient.with_write_gate` (the manager's client)
asks the gate before every mutating request and cuts it off if the gate closes while it
is in flight; the sockets of clients built here reset on close, so a cut-off request's
unsent bytes are dropped, not delivered late (see ``_fence``).
"""

# Every verb takes a per-call ``timeout`` (seconds) overriding the client default, as
# httpx does; it is applied with asyncio.timeout inside.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import ssl
import struct
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException
from yarl import URL

from ._client_metrics import ClientMetrics
from ._fence import WriteGate, write_fence
from ._flowcontrol import DEFAULT_BURST, DEFAULT_QPS, RetryState, TokenBucket
from ._objects import Object, loads_frozen
from .errors import (
    ApiError,
    ClientError,
    RequestTimeout,
    TransportError,
    WatchIdle,
    api_error_from_response,
)
from .kinds import Kind

__all__ = ["KubeClient", "ObjectList", "PatchType", "Reader", "WatchEvent"]

Selector = str | Mapping[str, str] | None
_T = TypeVar("_T")

log = logging.getLogger("karpy.runtime.client")

_SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SERVICE_ACCOUNT_DIR_ENV = "KARPY_SERVICE_ACCOUNT_DIR"
"""Where the pod's service-account files (token, ca.crt) are read from instead of
/var/run/secrets/kubernetes.io/serviceaccount. For tests only, which run karpy
"in-cluster" as a process on the test machine; client-go has no such override, and a
pod never needs it."""


def _api_client(configuration: k8s_client.Configuration, source: str) -> k8s_client.ApiClient:
    """The SDK's client for ``configuration``; it loads the CA bundle at once, and an
    unreadable or malformed one raises ``ssl.SSLError``, which becomes a TransportError
    naming where the CA came from (one line at start-up, not a traceback)."""
    try:
        return k8s_client.ApiClient(configuration)
    except ssl.SSLError as exc:
        raise TransportError(f"cannot load the CA certificate from {source}: {exc}") from exc


def _service_account_dir() -> Path:
    return Path(os.environ.get(SERVICE_ACCOUNT_DIR_ENV) or _SERVICE_ACCOUNT_DIR)


class PatchType(StrEnum):
    """The patch formats the API server accepts, by content type."""

    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One event of a watch stream: ADDED, MODIFIED, DELETED or BOOKMARK, and its object."""

    type: str
    object: Object


@dataclass(frozen=True, slots=True)
class ObjectList:
    """One page of a list: its items, the list's resourceVersion, and the continue token."""

    items: list[Object]
    resource_version: str
    continue_token: str | None


class Reader(Protocol):
    """Something that can answer reads for some kinds (the informer cache)."""

    def serves(self, kind: Kind) -> bool:
        """True if reads of ``kind`` should come from this reader."""

    def get(self, kind: Kind, name: str, *, namespace: str | None = None) -> Object:
        """The object, read-only; raise ``errors.NotFound`` if absent."""

    def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: str | None = None,
    ) -> list[Object]:
        """Matching objects, read-only."""


class _Observer:
    """Where a client and the clients derived from it count their requests (shared,
    so the manager's :meth:`KubeClient._count_requests_in` reaches every one of them)."""

    __slots__ = ("metrics",)

    def __init__(self) -> None:
        self.metrics: ClientMetrics | None = None


def _in_pod() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (
        _service_account_dir() / "token"
    ).exists()


_CONNECTIONS: Final = 48
"""The most connections a client opens to the API server (kubernetes-asyncio's default
is 100). Each HTTPS connection holds a 256 KiB TLS read buffer, and karpy's workers
open as many as they are allowed: at 100 that was 25 MiB of a 240 MiB process. The
watches hold one each for good; the rest queue briefly, which an API server that is the
bottleneck anyway does not notice (client-go multiplexes everything over one HTTP/2
connection)."""


def _selector_text(selector: Selector) -> str | None:
    if selector is None:
        return None
    if isinstance(selector, Mapping):
        return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    return selector


def _read_environment_once(api_client: k8s_client.ApiClient) -> None:
    """Stop aiohttp's per-request ``.netrc`` and proxy-variable lookups when no proxy
    from the environment applies to the API server (see the module docstring)."""
    session = api_client.rest_client.pool_manager
    if not session.trust_env or api_client.rest_client.proxy:
        return
    try:
        get_env_proxy_for_url(URL(str(api_client.configuration.host)))
    except LookupError:
        # aiohttp has no public setter; the attribute is what ``_request`` consults.
        session._trust_env = False
    # else: a proxy applies; aiohttp keeps resolving it per request, as before.


def _resetting_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """A socket that resets (RST) on close instead of finishing (FIN): bytes of a request
    cut off in flight are dropped, never retransmitted to the server after a partition
    heals (see ``_fence``). For an HTTP client whose requests are all answered before a
    connection closes, a reset loses nothing."""
    family, type_, proto = addr_info[0], addr_info[1], addr_info[2]
    sock = socket.socket(family=family, type=type_, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return sock


def _reset_on_close(api_client: k8s_client.ApiClient) -> None:
    # kubernetes-asyncio builds the connector; aiohttp reads this attribute per connect.
    connector = api_client.rest_client.pool_manager.connector
    if connector is not None and hasattr(connector, "_socket_factory"):
        connector._socket_factory = _resetting_socket


@contextlib.contextmanager
def _translated(what: str, timed_out: str) -> Iterator[None]:
    """Translate what one request attempt raises into this package's errors (API errors
    pass through): a timeout, kubernetes-asyncio's ApiException, a broken connection."""
    try:
        yield
    except ApiError:
        raise
    except TimeoutError as exc:
        raise RequestTimeout(f"{what}: {timed_out}") from exc
    except ApiException as exc:
        raise api_error_from_response(exc.status or 0, exc.body, exc.headers) from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise TransportError(f"{what}: {exc}") from exc


def _namespace_of(kind: Kind, obj: Mapping[str, Any], namespace: str | None) -> str | None:
    if not kind.namespaced:
        return None
    ns = namespace or obj.get("metadata", {}).get("namespace")
    if not ns:
        raise ValueError(f"{kind.kind} is namespaced: pass namespace= or set metadata.namespace")
    return str(ns)


@dataclass(frozen=True, slots=True)
class ServerVersion:
    """What an API server's ``/version`` says (client-go's ``version.Info``, in part)."""

    major: str
    """``"1"``."""
    minor: str
    """``"31"``; a provider's build may append to it (``"31+"`` on EKS)."""
    git_version: str
    """``"v1.31.2"``, perhaps with a build suffix (``"v1.31.2-eks-7f9249a"``)."""

    @property
    def major_minor(self) -> str:
        """``"1.31"``: the digits of major and minor, as the node images are named."""
        minor = "".join(ch for ch in self.minor if ch.isdigit())
        return f"{self.major}.{minor}"


class KubeClient:
    """An async Kubernetes client for any :class:`Kind`, with a timeout on every request:
    the implementation of the :class:`~karpy.runtime.Client` protocol that talks to an
    API server.

    Build one with :meth:`from_kubeconfig`, :meth:`in_cluster`, :meth:`from_environment`
    or around an existing kubernetes-asyncio ``ApiClient``. Use it as an async context
    manager (or call :meth:`close`); a closed client refuses further requests.

    Objects are plain dicts. Objects returned from the server are yours to mutate;
    objects read through a cache reader are read-only (see ``karpy.runtime.thaw``).

    ``qps`` and ``burst`` size the client-wide token bucket every request waits on
    (client-go's; None turns it off); 429/5xx answers with Retry-After are retried
    within the request's timeout (see the module docstring).
    """

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        *,
        timeout: float = 30.0,
        owns_api_client: bool = False,
        reader: Reader | None = None,
        user_agent: str = "karpy-runtime",
        write_gate: WriteGate | None = None,
        qps: float | None = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
    ) -> None:
        self._api = api_client
        if owns_api_client:
            _read_environment_once(api_client)
            _reset_on_close(api_client)
        self._host = str(api_client.configuration.host).rstrip("/")
        self.timeout = timeout
        self._owns = owns_api_client
        self._reader = reader
        self._user_agent = user_agent
        self._gate = write_gate
        self._bucket = TokenBucket(qps=qps, burst=burst) if qps is not None else None
        self._observer = _Observer()
        self._closed = False

    # -- construction ------------------------------------------------------------------

    @classmethod
    async def from_kubeconfig(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        context: str | None = None,
        timeout: float = 30.0,
        qps: float | None = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
    ) -> KubeClient:
        """Load ``path`` (default: ``$KUBECONFIG`` or ``~/.kube/config``) and its context."""
        configuration = k8s_client.Configuration()
        configuration.connection_pool_maxsize = _CONNECTIONS
        config_file = str(path) if path is not None else os.environ.get("KUBECONFIG")
        try:
            await k8s_config.load_kube_config(
                config_file=config_file.split(os.pathsep)[0] if config_file else None,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        except (OSError, k8s_config.ConfigException) as exc:
            where = config_file or "~/.kube/config"
            raise TransportError(f"cannot load kubeconfig {where}: {exc}") from exc
        return cls(
            _api_client(configuration, f"kubeconfig {config_file or '~/.kube/config'}"),
            timeout=timeout,
            owns_api_client=True,
            qps=qps,
            burst=burst,
        )

    @classmethod
    def in_cluster(
        cls, *, timeout: float = 30.0, qps: float | None = DEFAULT_QPS, burst: int = DEFAULT_BURST
    ) -> KubeClient:
        """Use the pod's service account (token re-read as it rotates): the API server
        at ``KUBERNETES_SERVICE_HOST``/``PORT``, the token and CA in
        /var/run/secrets/kubernetes.io/serviceaccount (or ``$KARPY_SERVICE_ACCOUNT_DIR``,
        which only tests set)."""
        configuration = k8s_client.Configuration()
        configuration.connection_pool_maxsize = _CONNECTIONS
        directory = _service_account_dir()
        try:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration,
                token_filename=str(directory / "token"),
                cert_filename=str(directory / "ca.crt"),
            )
        except k8s_config.ConfigException as exc:
            raise TransportError(f"not running in a cluster: {exc}") from exc
        return cls(
            _api_client(configuration, f"service account CA {directory / 'ca.crt'}"),
            timeout=timeout,
            owns_api_client=True,
            qps=qps,
            burst=burst,
        )

    @classmethod
    async def from_environment(
        cls, *, timeout: float = 30.0, qps: float | None = DEFAULT_QPS, burst: int = DEFAULT_BURST
    ) -> KubeClient:
        """In-cluster config when running in a pod, else the kubeconfig (``$KUBECONFIG``)."""
        if _in_pod():
            return cls.in_cluster(timeout=timeout, qps=qps, burst=burst)
        return await cls.from_kubeconfig(timeout=timeout, qps=qps, burst=burst)

    def with_reader(self, reader: Reader | None) -> KubeClient:
        """A client sharing this one's connection whose reads go to ``reader`` when it
        serves the kind (pass ``live=True`` to a read to bypass it). Closing it does not
        close the shared connection. It shares this client's token bucket too."""
        client = KubeClient(
            self._api,
            timeout=self.timeout,
            owns_api_client=False,
            reader=reader,
            user_agent=self._user_agent,
            write_gate=self._gate,
            qps=None,
        )
        client._bucket = self._bucket
        client._observer = self._observer
        return client

    def with_write_gate(self, gate: WriteGate | None) -> KubeClient:
        """A client sharing this one's connection, reader and token bucket whose mutating
        requests ask ``gate`` first (the manager passes its leader elector): refused with
        ``errors.NotLeader`` once the lease is lost, cut off if it is lost in flight.
        Closing it does not close the shared connection."""
        client = KubeClient(
            self._api,
            timeout=self.timeout,
            owns_api_client=False,
            reader=self._reader,
            user_agent=self._user_agent,
            write_gate=gate,
            qps=None,
        )
        client._bucket = self._bucket
        client._observer = self._observer
        return client

    def with_own_connections(self) -> KubeClient:
        """A client on the same configuration (server, credentials, timeout) with a
        connection pool and a token bucket of its own (same qps and burst), so its
        requests never queue behind this one's (the leader-election Lease renewals use
        one). Close it separately."""
        bucket = self._bucket
        client = KubeClient(
            k8s_client.ApiClient(self._api.configuration),
            timeout=self.timeout,
            owns_api_client=True,
            user_agent=self._user_agent,
            write_gate=self._gate,
            qps=bucket.qps if bucket is not None else None,
            burst=bucket.burst if bucket is not None else DEFAULT_BURST,
        )
        client._observer = self._observer
        return client

    def _count_requests_in(self, metrics: ClientMetrics | None) -> None:
        """Count this client's requests, and those of every client derived from it
        (before or after), in ``metrics`` (client-go's request metrics; the manager
        calls this with its registry's). None stops counting."""
        self._observer.metrics = metrics

    async def server_version(self) -> ServerVersion:
        """The API server's ``/version`` (client-go's ``discovery.ServerVersion``), with
        this client's retries, token bucket and request metrics."""
        data = await self._call("GET", "/version")
        info = data if isinstance(data, Mapping) else {}
        return ServerVersion(major=str(info.get("major") or ""),
                             minor=str(info.get("minor") or ""),
                             git_version=str(info.get("gitVersion") or ""))

    @property
    def api_client(self) -> k8s_client.ApiClient:
        """The underlying kubernetes-asyncio ApiClient (for APIs this client lacks)."""
        return self._api

    async def close(self) -> None:
        """Close the connection pool (if this client created it). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns:
            await self._api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- transport ---------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        if self._closed:
            raise TransportError("client is closed")
        headers = {
            "Accept": "application/json",
            "Content-Type": content_type,
            "User-Agent": self._user_agent,
        }
        params = list(query)
        await self._api.update_params_for_auth(headers, params, ["BearerToken"])
        # The leadership check is the last thing before the request leaves.
        metrics = self._observer.metrics
        async with write_fence(self._gate if method != "GET" else None, f"{method} {path}"):
            try:
                response: aiohttp.ClientResponse = await self._api.rest_client.request(
                    method,
                    self._host + path,
                    query_params=params or None,  # type: ignore[arg-type]  # list of pairs
                    headers=headers,
                    body=body,
                    _preload_content=False,
                    _request_timeout=timeout,
                )
            except BaseException:
                if metrics is not None:  # no answer: refused, reset, timed out, cut off
                    metrics.attempt(method, None)
                raise
        if metrics is not None:
            metrics.attempt(method, response.status)
        if response.status >= 300:
            try:
                data = await response.read()
            finally:
                response.release()
            raise api_error_from_response(response.status, data, response.headers)
        return response

    async def _throttle(self) -> None:
        if self._closed:
            raise TransportError("client is closed")
        if self._bucket is not None:
            await self._bucket.wait()

    async def _retrying(
        self, method: str, path: str, limit: float, attempt: Callable[[float], Awaitable[_T]]
    ) -> _T:
        """Run ``attempt(seconds left)`` after taking a token, and again after each
        failure the server asked to be retried, until ``limit`` seconds have passed."""
        loop = asyncio.get_running_loop()
        # As client-go: the first token is waited for before the timeout starts, so a
        # throttled client does not time out requests it never sent.
        await self._throttle()
        deadline = loop.time() + limit
        retry = RetryState(method)
        while True:
            try:
                return await attempt(deadline - loop.time())
            except ClientError as exc:
                wait = retry.delay(exc, remaining=deadline - loop.time())
                if wait is None:
                    raise
                log.debug(
                    "retrying request",
                    extra={"verb": method, "path": path, "attempt": retry.retries,
                           "wait": round(wait, 3), "error": str(exc)},
                )  # fmt: skip
                await asyncio.sleep(wait)
                await self._throttle()
                if loop.time() >= deadline:
                    raise

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        frozen: bool = False,
    ) -> Any:
        limit = self.timeout if timeout is None else timeout

        async def attempt(left: float) -> bytes:
            with _translated(f"{method} {path}", f"timed out after {limit:g}s"):
                async with asyncio.timeout(left):
                    response = await self._send(
                        method,
                        path,
                        query=query,
                        body=body,
                        content_type=content_type,
                        timeout=aiohttp.ClientTimeout(total=left),
                    )
                    try:
                        return await response.read()
                    finally:
                        response.release()

        metrics = self._observer.metrics
        if metrics is None:
            data = await self._retrying(method, path, limit, attempt)
        else:
            # As client-go: from before the first token to the last answer, retries in.
            start = time.perf_counter()
            try:
                data = await self._retrying(method, path, limit, attempt)
            finally:
                metrics.request(method, path, time.perf_counter() - start)
        if not data:
            return None
        return loads_frozen(data) if frozen else json.loads(data)

    # -- reads -------------------------------------------------------------------------

    async def get(
        self,
        kind: Kind,
        name: str,
        *,
        namespace: str | None = None,
        live: bool = False,
        timeout: float | None = None,
    ) -> Object:
        """Read one object (from the cache reader if it serves ``kind`` and not ``live``)."""
        if not live and self._reader is not None and self._reader.serves(kind):
            return self._reader.get(kind, name, namespace=namespace)
        result: Object = await self._call(
            "GET", kind.path(namespace=namespace, name=name), timeout=timeout
        )
        return result

    async def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: str | None = None,
        live: bool = False,
        timeout: float | None = None,
    ) -> list[Object]:
        """All matching objects (paged from the server, or from the cache reader)."""
        if not live and self._reader is not None and self._reader.serves(kind):
            return self._reader.list(
                kind,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
            )
        items: list[Object] = []
        token: str | None = None
        while True:
            page = await self.list_page(
                kind,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=500,
                continue_token=token,
                timeout=timeout,
            )
            items.extend(page.items)
            token = page.continue_token
            if not token:
                return items

    async def list_page(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
        frozen: bool = False,
    ) -> ObjectList:
        """One page of a list from the server, with its resourceVersion and continue token.

        Items get ``apiVersion``/``kind`` filled in (the server omits them in lists).
        ``frozen=True`` decodes straight into read-only objects (what informers use).
        """
        query: list[tuple[str, str]] = []
        labels = _selector_text(label_selector)
        if labels:
            query.append(("labelSelector", labels))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if limit:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        data = await self._call(
            "GET", kind.path(namespace=namespace), query=query, timeout=timeout, frozen=frozen
        )
        meta = data.get("metadata") or {}
        raw_items = data.get("items") or []
        items: list[Object] = []
        api_version, kind_name = kind.api_version, kind.kind
        for item in raw_items:
            if "kind" not in item:
                # dict.__setitem__ bypasses FrozenDict's guard: the object is still ours.
                dict.__setitem__(item, "apiVersion", api_version)
                dict.__setitem__(item, "kind", kind_name)
            items.append(item)
        return ObjectList(
            items=items,
            resource_version=str(meta.get("resourceVersion") or ""),
            continue_token=meta.get("continue") or None,
        )

    async def watch(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: Selector = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
        inactivity_timeout: float | None = 120.0,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Stream change events (read-only objects) from ``resource_version`` onwards.

        The server ends the stream after ``timeout_seconds``; if nothing at all arrives
        for ``inactivity_timeout`` seconds (a half-open connection, or just a quiet kind)
        this raises :class:`errors.WatchIdle`. An in-stream ERROR event is raised as its
        :class:`errors.ApiError` (410 → :class:`errors.Gone`). Use with
        ``contextlib.aclosing`` so the connection is released when you stop early.
        """
        query: list[tuple[str, str]] = [
            ("watch", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if resource_version:
            query.append(("resourceVersion", resource_version))
        labels = _selector_text(label_selector)
        if labels:
            query.append(("labelSelector", labels))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        path = kind.path(namespace=namespace)

        async def attempt(left: float) -> aiohttp.ClientResponse:
            with _translated(f"watch {path}", f"no response after {self.timeout:g}s"):
                async with asyncio.timeout(left):
                    return await self._send(
                        "GET",
                        path,
                        query=query,
                        timeout=aiohttp.ClientTimeout(
                            total=timeout_seconds + self.timeout,
                            connect=self.timeout,
                        ),
                    )

        response = await self._retrying("GET", path, self.timeout, attempt)
        try:
            async for line in _lines(response, inactivity_timeout, path):
                event = loads_frozen(line)
                etype = event.get("type")
                obj = event.get("object")
                if etype == "ERROR":
                    status = obj or {}
                    raise api_error_from_response(
                        int(status.get("code") or 500), json.dumps(status).encode(), None
                    )
                if etype is None or obj is None:
                    continue
                yield WatchEvent(type=str(etype), object=obj)
        finally:
            response.close()

    # -- writes ------------------------------------------------------------------------

    async def create(
        self,
        kind: Kind,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        subresource: str = "",
        field_manager: str | None = None,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> Object:
        """Create ``obj``; returns the stored object. ``errors.AlreadyExists`` if taken.

        With ``subresource`` it POSTs ``obj`` to that subresource of the object named by
        ``obj``'s metadata.name — e.g. an Eviction: ``create(kinds.POD, {"apiVersion":
        "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": ns}},
        subresource="eviction")`` (a PDB refusal is ``errors.TooManyRequests``).
        """
        ns = _namespace_of(kind, obj, namespace)
        if subresource:
            path = kind.path(namespace=ns, name=obj["metadata"]["name"], subresource=subresource)
            body: Mapping[str, Any] = obj
        else:
            path = kind.path(namespace=ns)
            body = _with_type(kind, obj)
        result: Object = await self._call(
            "POST",
            path,
            body=body,
            query=_write_query(field_manager, dry_run),
            timeout=timeout,
        )
        return result

    async def update(
        self,
        kind: Kind,
        obj: Mapping[str, Any],
        *,
        subresource: str = "",
        field_manager: str | None = None,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> Object:
        """Replace ``obj`` (PUT). Its metadata.resourceVersion makes this optimistic:
        ``errors.Conflict`` if the object changed since it was read."""
        ns = _namespace_of(kind, obj, None)
        name = obj["metadata"]["name"]
        result: Object = await self._call(
            "PUT",
            kind.path(namespace=ns, name=name, subresource=subresource),
            body=_with_type(kind, obj),
            query=_write_query(field_manager, dry_run),
            timeout=timeout,
        )
        return result

    async def update_status(
        self,
        kind: Kind,
        obj: Mapping[str, Any],
        *,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Object:
        """Replace ``obj``'s status subresource (only .status is written)."""
        return await self.update(
            kind, obj, subresource="status", field_manager=field_manager, timeout=timeout
        )

    async def patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str = "",
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> Object:
        """Patch one object (merge by default; JSON patch takes a list of operations).

        For ``PatchType.APPLY`` (server-side apply) ``field_manager`` is required.
        """
        if patch_type is PatchType.APPLY and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        query = _write_query(field_manager, dry_run)
        if force is not None:
            query.append(("force", "true" if force else "false"))
        result: Object = await self._call(
            "PATCH",
            kind.path(namespace=namespace, name=name, subresource=subresource),
            body=patch,
            content_type=patch_type.value,
            query=query,
            timeout=timeout,
        )
        return result

    async def patch_status(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Object:
        """Patch the status subresource."""
        return await self.patch(
            kind,
            name,
            patch,
            namespace=namespace,
            patch_type=patch_type,
            subresource="status",
            field_manager=field_manager,
            force=True if patch_type is PatchType.APPLY else None,
            timeout=timeout,
        )

    async def apply(
        self,
        kind: Kind,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        subresource: str = "",
        namespace: str | None = None,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> Object:
        """Server-side apply ``obj`` (the fields this manager owns) and return the result."""
        ns = _namespace_of(kind, obj, namespace)
        return await self.patch(
            kind,
            obj["metadata"]["name"],
            _with_type(kind, obj),
            namespace=ns,
            patch_type=PatchType.APPLY,
            subresource=subresource,
            field_manager=field_manager,
            force=force,
            dry_run=dry_run,
            timeout=timeout,
        )

    async def delete(
        self,
        kind: Kind,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> Object | None:
        """Delete one object; ``uid``/``resource_version`` make it conditional.

        Returns what the server returned (the object while finalizers hold it, else a
        Status), or None. ``errors.NotFound`` if it was already gone.
        """
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        preconditions = {}
        if uid:
            preconditions["uid"] = uid
        if resource_version:
            preconditions["resourceVersion"] = resource_version
        if preconditions:
            body["preconditions"] = preconditions
        query = [("dryRun", "All")] if dry_run else []
        result: Object | None = await self._call(
            "DELETE",
            kind.path(namespace=namespace, name=name),
            body=body,
            query=query,
            timeout=timeout,
        )
        return result


def _with_type(kind: Kind, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    if "apiVersion" in obj and "kind" in obj:
        return obj
    return {"apiVersion": kind.api_version, "kind": kind.kind, **obj}


def _write_query(field_manager: str | None, dry_run: bool) -> list[tuple[str, str]]:
    query: list[tuple[str, str]] = []
    if field_manager:
        query.append(("fieldManager", field_manager))
    if dry_run:
        query.append(("dryRun", "All"))
    return query


async def _lines(
    response: aiohttp.ClientResponse, inactivity_timeout: float | None, path: str
) -> AsyncIterator[bytes]:
    """Split a chunked body into lines, however large (no per-line size limit)."""
    buffer = bytearray()
    content = response.content
    while True:
        try:
            async with asyncio.timeout(inactivity_timeout):
                chunk = await content.readany()
        except TimeoutError as exc:
            raise WatchIdle(
                f"watch {path}: nothing received for {inactivity_timeout:g}s"
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise TransportError(f"watch {path}: {exc}") from exc
        if not chunk:
            if buffer.strip():
                yield bytes(buffer)
            return
        buffer += chunk
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            if end > start:
                yield bytes(buffer[start:end])
            start = end + 1
        if start:
            del buffer[:start]
