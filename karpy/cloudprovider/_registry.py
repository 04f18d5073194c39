"""Finding providers through the ``karpy.cloudproviders`` entry points and building them.

A distribution registers a provider with one line in its pyproject.toml::

    [project.entry-points."karpy.cloudproviders"]
    example = "karpy_example_provider:ExampleCloudProvider"

The entry point names the provider's *factory*: if the named object has a
``from_context`` attribute (typically a classmethod of the provider class), that is the
factory, otherwise the object itself is. The factory is called with a
:class:`ProviderContext` and returns the provider, or an awaitable of one (so that it
can await its cloud SDK's set-up). Every provider is built the same way, so the
operator needs to know nothing about any of them but the name.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from typing_extensions import get_protocol_members

from karpy.cloudprovider._overlays import LaunchOverlays, NoOverlays
from karpy.cloudprovider._protocol import (
    BuildsFromContext,
    ClosesOnShutdown,
    CloudProvider,
    ContributesControllers,
)
from karpy.cloudprovider.errors import (
    ProviderLoadError,
    ProviderRegistryError,
    UnknownProviderError,
)

if TYPE_CHECKING:
    from karpy.runtime import Client, Manager

ENTRY_POINT_GROUP = "karpy.cloudproviders"
"""The entry-point group providers register under."""

CLOUD_PROVIDER_ENV = "CLOUD_PROVIDER"
"""The environment variable naming the provider when ``--cloud-provider`` is not given."""


@dataclass(frozen=True, kw_only=True)
class ProviderContext:
    """Everything a provider factory gets from the operator.

    ``client`` talks to the cluster's API server (reads may be cached). ``settings`` are
    the provider's own options as strings, from the operator's configuration; each
    provider documents its keys and must reject keys it does not know, so that a typo
    fails at start-up rather than being ignored. ``feature_gates`` are the operator's
    Karpenter feature gates by Karpenter's name (``{"ReservedCapacity": True, ...}``), for
    providers whose behaviour a core gate changes (as Karpenter AWS's launch templates
    follow ReservedCapacity); a gate missing from it has Karpenter's default.
    ``overlays`` applies the NodeOverlays in force to the provider's instance types.
    """

    client: Client
    cluster_name: str = ""
    settings: Mapping[str, str] = field(default_factory=dict)
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    overlays: LaunchOverlays = field(default_factory=NoOverlays)
    """The NodeOverlays in force, for a provider that re-reads its catalogue in
    ``create`` (see :class:`LaunchOverlays`)."""


ProviderFactory: TypeAlias = Callable[
    [ProviderContext], "CloudProvider | Awaitable[CloudProvider]"
]
"""What an entry point names: ``factory(context) -> provider`` (sync or async)."""


def _entry_points() -> dict[str, list[EntryPoint]]:
    found: dict[str, list[EntryPoint]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, []).append(ep)
    return found


def _origin(ep: EntryPoint) -> str:
    dist = ep.dist.name if ep.dist is not None else "?"
    return f"{ep.value} from {dist}"


def installed_providers() -> dict[str, str]:
    """Map each installed provider's name to its entry point target, sorted by name."""
    return {name: eps[0].value for name, eps in sorted(_entry_points().items())}


def provider_name(flag: str | None, environ: Mapping[str, str]) -> str:
    """Pick the provider name: the ``--cloud-provider`` flag, else ``CLOUD_PROVIDER``.

    Raises UnknownProviderError (which lists what is installed) when neither is set.
    """
    name = flag or environ.get(CLOUD_PROVIDER_ENV, "")
    if not name:
        raise UnknownProviderError("", list(installed_providers()))
    return name


def load_factory(name: str) -> ProviderFactory:
    """Import the factory registered as ``name`` (its ``from_context`` if it has one).

    Raises UnknownProviderError (listing the installed names) if there is none,
    ProviderRegistryError if two distributions claim the name, and ProviderLoadError
    (with the provider's traceback) if importing it raises.
    """
    found = _entry_points()
    candidates = found.get(name)
    if not candidates:
        raise UnknownProviderError(name, list(found))
    # The same distribution can be seen twice (e.g. on sys.path twice); only distinct
    # targets are a real conflict.
    targets = {ep.value for ep in candidates}
    if len(targets) > 1:
        raise ProviderRegistryError(
            f"cloud provider {name!r} is registered more than once: "
            + "; ".join(sorted(_origin(ep) for ep in candidates))
            + ". Uninstall all but one of those distributions."
        )
    ep = candidates[0]
    try:
        target = ep.load()
    except Exception as exc:  # any import-time failure is the provider's bug: report it
        raise ProviderLoadError(name, ep.value, exc) from exc
    factory = target.from_context if isinstance(target, BuildsFromContext) else target
    if not callable(factory):
        raise ProviderLoadError(
            name, ep.value, TypeError(f"{ep.value} is a {type(factory).__name__}, not callable")
        )
    loaded: ProviderFactory = factory
    return loaded


async def build_provider(name: str, context: ProviderContext) -> CloudProvider:
    """Load the provider registered as ``name`` and build it with ``context``.

    Raises what :func:`load_factory` raises, and ProviderLoadError if the factory raises
    or returns something that is not a CloudProvider.
    """
    factory = load_factory(name)
    target = installed_providers().get(name, name)
    try:
        made: Any = factory(context)
        if inspect.isawaitable(made):
            made = await made
    except Exception as exc:
        raise ProviderLoadError(name, target, exc) from exc
    if not isinstance(made, CloudProvider):
        missing = _missing_members(made)
        raise ProviderLoadError(
            name,
            target,
            TypeError(
                f"the factory returned a {type(made).__name__}, which does not implement "
                f"the CloudProvider protocol (missing: {', '.join(missing)})"
            ),
        )
    return made


def _protocol_members() -> tuple[str, ...]:
    # read off the protocol itself, so a member added there is checked here too; in
    # its definition order, so the error lists them as the protocol reads
    order = {name: i for i, name in enumerate(vars(CloudProvider))}
    members = get_protocol_members(CloudProvider)
    return tuple(sorted(members, key=lambda m: (order.get(m, len(order)), m)))


_MEMBERS: Final = _protocol_members()


def _missing_members(obj: object) -> list[str]:
    return [m for m in _MEMBERS if not hasattr(obj, m)]


@asynccontextmanager
async def open_provider(name: str, context: ProviderContext) -> AsyncIterator[CloudProvider]:
    """Build the provider ``name`` and close it on exit.

    Closing awaits the provider's ``aclose()`` if it has one (an optional ability for
    providers that hold sessions or background tasks).
    """
    provider = await build_provider(name, context)
    try:
        yield provider
    finally:
        await close_provider(provider)


async def close_provider(provider: object) -> None:
    """Await ``provider.aclose()`` when the provider defines it (:class:`ClosesOnShutdown`)."""
    if isinstance(provider, ClosesOnShutdown):
        await provider.aclose()


def register_provider_controllers(provider: object, manager: Manager) -> bool:
    """Let ``provider`` add its own controllers to ``manager`` if it has any.

    Returns whether it did (see :class:`ContributesControllers`).
    """
    if isinstance(provider, ContributesControllers):
        provider.register_controllers(manager)
        return True
    return False
