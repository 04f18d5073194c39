"""The ``Client`` protocol: what a controller asks of the API server, and nothing more.

Controllers, the autoscaler's tools and provider controllers are typed against
:class:`Client`, not against the class that talks HTTP (:class:`KubeClient`), so
anything with the same verbs can stand in: :class:`~karpy.runtime.testing.FakeClient`
in unit tests, the tools' read-only client, a snapshot's client. It is structural
(``typing.Protocol``): nothing subclasses it and nothing is cast to it; mypy checks each
implementation where it is declared (see the checks at the bottom of ``_fakeclient`` and
``tests/runtime/test_client_protocol.py``).

It is controller-runtime's ``client.Client``: a reader (``get``, ``list``) and a writer
(``create``, ``update``, ``update_status``, ``patch``, ``patch_status``, ``apply``,
``delete``). The rest is named apart: :class:`ListerWatcher`, the two reads an informer
needs (``list_page``, ``watch``), as client-go's ``cache.ListerWatcher`` does;
:class:`ManagerClient`, what a Manager needs besides (``with_reader``,
``with_write_gate``), which the tools' read-only client implements too. What only a
connection to a real API server has (``api_client``, ``with_own_connections``,
``close``) stays on :class:`KubeClient`.

In earlier karpy releases ``Client`` was the concrete class: constructing it
(``Client(api_client)``, ``Client.from_kubeconfig()``, ``Client.in_cluster()``,
``Client.from_environment()``) still works and builds a :class:`KubeClient`, with a
``DeprecationWarning``; build a :class:`KubeClient` instead. ``isinstance(x, Client)``
still works too (the protocols are runtime-checkable: it checks the methods are there).
"""

# ruff: noqa: ASYNC109  # the verbs take a per-call timeout, as KubeClient's do

from __future__ import annotations

import builtins
import warnings
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._client import (
    KubeClient,
    ObjectList,
    PatchType,
    Reader,
    Selector,
    ServerVersion,
    WatchEvent,
)
from ._fence import WriteGate
from ._objects import Object
from .kinds import Kind

__all__ = ["Client", "ListerWatcher", "ManagerClient"]

_CONSTRUCTORS = frozenset({"from_kubeconfig", "in_cluster", "from_environment"})

if TYPE_CHECKING:
    _ProtocolMeta = type
else:
    _ProtocolMeta = type(Protocol)


def _deprecated(what: str) -> None:
    warnings.warn(
        f"karpy.runtime.Client is a protocol now; {what} builds a KubeClient: use "
        "karpy.runtime.KubeClient instead",
        DeprecationWarning,
        stacklevel=3,
    )


class _BuildsKubeClient(_ProtocolMeta):
    """Keeps ``Client(...)`` and ``Client.from_*()`` working for code written when
    ``Client`` was the concrete class (deprecated; see the module docstring)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self is Client:
            _deprecated("Client(...)")
            return KubeClient(*args, **kwargs)
        return super().__call__(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if self is Client and name in _CONSTRUCTORS:
            _deprecated(f"Client.{name}()")
            return getattr(KubeClient, name)
        raise AttributeError(name)


@runtime_checkable
class Client(Protocol, metaclass=_BuildsKubeClient):
    """Reads and writes of any :class:`Kind` on plain-dict objects (controller-runtime's
    ``client.Client``). :class:`KubeClient` implements it against an API server,
    :class:`~karpy.runtime.testing.FakeClient` in memory.

    Reads may come from a cache and are then read-only (``live=True`` asks the server);
    writes return the server's answer, yours to mutate. Failures are
    :mod:`karpy.runtime.errors`.
    """

    async def get(
        self,
        kind: Kind,
        name: str,
        *,
        namespace: str | None = None,
        live: bool = False,
        timeout: float | None = None,
    ) -> Object:
        """One object; ``errors.NotFound`` if absent."""
        ...

    async def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: str | None = None,
        live: bool = False,
        timeout: float | None = None,
    ) -> builtins.list[Object]:
        """Every matching object (a label selector as the server's text or a mapping)."""
        ...

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
        """Create ``obj`` (or post to a subresource, e.g. a pod's eviction)."""
        ...

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
        """Replace the object (PUT); its resourceVersion is a precondition."""
        ...

    async def update_status(
        self,
        kind: Kind,
        obj: Mapping[str, Any],
        *,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Object:
        """Replace the object's status."""
        ...

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
        """Patch the object (a JSON merge patch unless ``patch_type`` says otherwise)."""
        ...

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
        """Patch the object's status."""
        ...

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
        """Server-side apply ``obj`` as ``field_manager``."""
        ...

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
        """Delete the object (``uid``/``resource_version`` as preconditions): the object
        while finalizers hold it, else the server's Status (None when it sent nothing)."""
        ...


@runtime_checkable
class ListerWatcher(Protocol):
    """The two reads an informer makes (client-go's ``cache.ListerWatcher``): pages of a
    list, then a watch from the list's resourceVersion."""

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
        """One page of a list."""
        ...

    def watch(
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
        """Change events from ``resource_version`` on."""
        ...


@runtime_checkable
@runtime_checkable
class ReportsServerVersion(Protocol):
    """A client that can say the API server's version (client-go's discovery
    ``ServerVersion``): :class:`KubeClient` reads ``/version``; an embedder's client may
    answer it its own way. Providers that pick node images by the cluster's Kubernetes
    version ask this, not for a concrete client."""

    async def server_version(self) -> ServerVersion:
        """The API server's version."""
        ...


class ManagerClient(Client, ListerWatcher, Protocol):
    """What a :class:`~karpy.runtime.Manager` asks of its client: the verbs, the list and
    watch its cache's informers make, and the two views of itself it hands the
    controllers — one whose writes wait on leadership, one whose reads come from the
    cache. :class:`KubeClient` is one; so is the tools' read-only client, which a view's
    never-run manager wires the operator's controllers on. Leader election needs a
    :class:`KubeClient` (its Lease renewals use connections of their own)."""

    def with_write_gate(self, gate: WriteGate | None) -> ManagerClient:
        """This client with its writes asking ``gate`` first."""
        ...

    def with_reader(self, reader: Reader | None) -> ManagerClient:
        """This client with its reads of the kinds ``reader`` serves going there."""
        ...


if TYPE_CHECKING:  # mypy proves the real client implements the protocols

    def _conforms(
        client: KubeClient,
    ) -> tuple[Client, ListerWatcher, ManagerClient, ReportsServerVersion]:
        return client, client, client, client
