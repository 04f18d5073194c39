"""Errors a cloud provider raises, and the errors of finding and loading a provider.

The core acts on the *type* of a provider error, so a provider translates its cloud's
exceptions into these at its boundary (``raise InsufficientCapacityError(...) from exc``).
Anything else a provider raises is treated as a transient launch failure and retried.

::

    CloudProviderError                  base of everything below
    ├── NodeClaimNotFoundError          the instance is gone (get / delete)
    ├── InsufficientCapacityError       no capacity for these offerings; the NodeClaim is
    │                                   deleted and the offerings marked unavailable
    ├── NodeClassNotReadyError          the NodeClaim's NodeClass is missing or not Ready;
    │                                   the NodeClaim is deleted
    ├── CreateError                     launch failed; reason + message go on the
    │                                   NodeClaim's Launched condition and it is retried
    ├── OfflineError                    a provider built to price only (offline) was
    │                                   asked to launch, delete or read a machine
    └── ProviderRegistryError           finding or building a provider failed
        ├── UnknownProviderError        no provider of that name is installed
        └── ProviderLoadError           a provider's entry point failed to import/build
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Sequence

from karpy.cloudprovider._types import OfferingKey

__all__ = [
    "CloudProviderError",
    "CreateError",
    "InsufficientCapacityError",
    "NodeClaimNotFoundError",
    "NodeClassNotReadyError",
    "OfflineError",
    "ProviderLoadError",
    "ProviderRegistryError",
    "UnknownProviderError",
]


class CloudProviderError(Exception):
    """Base class of every error defined by :mod:`karpy.cloudprovider`."""


class NodeClaimNotFoundError(CloudProviderError):
    """The instance behind a NodeClaim does not exist (any more).

    ``get`` raises it for an unknown provider ID. ``delete`` raises it once the instance
    is gone: the termination controller calls ``delete`` until it sees this error, so
    raising it is how a provider says "deletion is complete".
    """

    def __init__(self, message: str, *, provider_id: str = "") -> None:
        super().__init__(message)
        self.provider_id = provider_id


class InsufficientCapacityError(CloudProviderError):
    """The cloud has no capacity for the offerings a launch could use.

    ``offerings`` names what to mark unavailable (for a while) so the next scheduling
    round picks something else; it may be empty when the provider cannot tell which
    offering failed, and then nothing is marked.
    """

    def __init__(self, message: str, *, offerings: Iterable[OfferingKey] = ()) -> None:
        super().__init__(message)
        self.offerings: tuple[OfferingKey, ...] = tuple(offerings)


class NodeClassNotReadyError(CloudProviderError):
    """The NodeClass a NodeClaim refers to does not exist or is not Ready."""


class CreateError(CloudProviderError):
    """A launch failed for a reason to show on the NodeClaim's ``Launched`` condition.

    ``reason`` is a CamelCase condition reason (``"LaunchTemplateNotFound"``), ``message``
    a sentence for humans. The launch is retried with backoff.
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class OfflineError(CloudProviderError):
    """A provider built offline, as a price list for ``karpy simulate``, ``explain`` and
    ``top`` (the ``offline`` setting of karpy-aws and karpy-azure), was asked to do what
    needs its cloud. ``karpy run`` never builds one, so the core never sees this."""

    def __init__(self, provider: str, action: str) -> None:
        super().__init__(
            f"the {provider} provider is offline (setting offline=true, env KARPY_OFFLINE): "
            f"it only prices instance types and cannot {action}; unset offline to use "
            f"the cloud"
        )
        self.provider = provider
        self.action = action


class ProviderRegistryError(CloudProviderError):
    """Finding or constructing the configured cloud provider failed."""


class UnknownProviderError(ProviderRegistryError):
    """No installed distribution registers a provider of the requested name."""

    def __init__(self, name: str, installed: Sequence[str]) -> None:
        listed = ", ".join(sorted(installed)) or "none"
        if name:
            problem = f"no cloud provider named {name!r} is installed"
        else:
            problem = "no cloud provider was chosen"
        super().__init__(
            f"{problem} (installed: {listed}); set --cloud-provider or CLOUD_PROVIDER to "
            "one of those, or install the distribution that registers it under the "
            "'karpy.cloudproviders' entry points"
        )
        self.name = name
        self.installed = tuple(sorted(installed))


class ProviderLoadError(ProviderRegistryError):
    """A provider's entry point raised while being imported or constructed.

    The message carries the original traceback so that the operator's start-up log
    shows where the provider broke; the original exception is also ``__cause__``.
    """

    def __init__(self, name: str, target: str, cause: BaseException) -> None:
        detail = "".join(traceback.format_exception(cause)).rstrip()
        super().__init__(
            f"cloud provider {name!r} ({target}) failed to load: {cause!r}\n{detail}"
        )
        self.name = name
        self.target = target
