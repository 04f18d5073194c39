"""Talking to Azure Resource Manager: the async SDK clients, the credential, and what an
ARM error code means to karpy.

The clients are ``azure.mgmt.compute.aio`` and ``azure.mgmt.network.aio``; azure-core's
retry policy already retries 408/429/5xx with exponential backoff (honouring
Retry-After), so karpy adds none of its own — except one bound: azure-core sleeps as long
as any Retry-After says, where the Go SDK Karpenter-Azure uses does not retry at all when
Retry-After exceeds its maximum retry delay (60 s). :class:`CappedRetryPolicy` does the
same, so a throttled call fails at once and the reconcile's own backoff takes over
instead of a worker sleeping for an hour. ``base_url``, ``connection_verify`` and the
poll interval are settings, which is how the tests point the real SDK at an ARM-shaped
test server.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final, Protocol

from azure.core.credentials import AccessToken
from azure.core.credentials_async import AsyncTokenCredential
from azure.core.exceptions import HttpResponseError
from azure.core.pipeline import PipelineResponse
from azure.core.pipeline.policies import AsyncRetryPolicy
from azure.mgmt.compute.aio import ComputeManagementClient
from azure.mgmt.network.aio import NetworkManagementClient

from karpy_azure._settings import AzureSettings

__all__ = [
    "ArmAccess",
    "ArmClients",
    "CapacityError",
    "CappedRetryPolicy",
    "StaticTokenCredential",
    "classify_capacity_error",
    "error_code",
    "is_not_found",
    "make_credential",
]

# ARM error codes that mean "no capacity for this offering".
SKU_NOT_AVAILABLE: Final = "SkuNotAvailable"
ZONAL_ALLOCATION_FAILED: Final = "ZonalAllocationFailed"
ALLOCATION_FAILED: Final = "AllocationFailed"
OVERCONSTRAINED_ZONAL: Final = "OverconstrainedZonalAllocationRequest"
OVERCONSTRAINED: Final = "OverconstrainedAllocationRequest"
OPERATION_NOT_ALLOWED: Final = "OperationNotAllowed"
#: the longest a retry waits, for a Retry-After too (the Go SDK's default MaxRetryDelay)
RETRY_DELAY_MAX: Final = 60


class StaticTokenCredential:
    """A credential whose ``get_token`` returns a fixed token. Only for test servers:
    settings refuse it with the public ARM endpoint."""

    def __init__(self, token: str = "karpy-test-token") -> None:
        self._token = token

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self._token, int(time.time()) + 3600)

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> StaticTokenCredential:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


def make_credential(settings: AzureSettings) -> AsyncTokenCredential:
    """DefaultAzureCredential (workload identity in a cluster, managed identity,
    environment, CLI ...), or the static test credential."""
    if settings.credential == "static":
        return StaticTokenCredential()
    from azure.identity.aio import DefaultAzureCredential

    return DefaultAzureCredential()


class CappedRetryPolicy(AsyncRetryPolicy[Any, Any]):
    """azure-core's retry policy, except that a response whose Retry-After is longer than
    ``retry_backoff_max`` is not retried (as the Go SDK's ``MaxRetryDelay``): the caller
    gets the error now."""

    def is_retry(self, settings: dict[str, Any], response: PipelineResponse[Any, Any]) -> bool:
        if not super().is_retry(settings, response):
            return False
        retry_after = self.get_retry_after(response)
        return retry_after is None or retry_after <= self.backoff_max


@dataclass
class ArmClients:
    """The compute and network clients of one subscription."""

    compute: ComputeManagementClient
    network: NetworkManagementClient
    poll_interval: float | None

    @classmethod
    def create(
        cls,
        settings: AzureSettings,
        credential: AsyncTokenCredential,
        *,
        retry_backoff_factor: float = 0.8,
        retry_total: int = 6,
    ) -> ArmClients:
        """Clients for ``settings.arm_endpoint``, verifying TLS with ``caBundle`` if set."""
        retry = {
            "retry_backoff_factor": retry_backoff_factor,
            "retry_total": retry_total,
            "retry_backoff_max": RETRY_DELAY_MAX,
        }
        options: dict[str, Any] = {
            "base_url": settings.arm_endpoint,
            **retry,
            "retry_policy": CappedRetryPolicy(**retry),
        }
        if settings.ca_bundle:
            options["connection_verify"] = settings.ca_bundle
        return cls(
            compute=ComputeManagementClient(credential, settings.subscription_id, **options),
            network=NetworkManagementClient(credential, settings.subscription_id, **options),
            poll_interval=settings.poll_interval,
        )

    def lro(self) -> dict[str, Any]:
        """Keyword arguments for ``begin_*`` calls (the poll interval, when set)."""
        return {} if self.poll_interval is None else {"polling_interval": self.poll_interval}

    async def close(self) -> None:
        """Close both clients' sessions."""
        await self.compute.close()
        await self.network.close()


class ArmAccess(Protocol):
    """What the provider's controllers need of it to call ARM: its settings and clients
    (the provider is one; they take this, not the provider class)."""

    @property
    def settings(self) -> AzureSettings:
        """The provider's settings (resource group, location, cluster name ...)."""
        ...

    @property
    def arm(self) -> ArmClients:
        """The ARM clients."""
        ...


def error_code(exc: HttpResponseError) -> str:
    """The ARM error code of ``exc`` ("" when the body had none)."""
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None) if error is not None else None
    return str(code or "")


def is_not_found(exc: BaseException) -> bool:
    """True for ARM's 404 (ResourceNotFound, NotFound)."""
    return isinstance(exc, HttpResponseError) and exc.status_code == 404


@dataclass(frozen=True, slots=True)
class CapacityError:
    """What an ARM capacity error marks unavailable.

    ``scope`` is ``"offering"`` (this zone and capacity type), ``"zone"`` (this zone, both
    capacity types), ``"placement"`` (every zone of the same placement scope, both
    capacity types), ``"capacity-type"`` (every zone, this capacity type) or
    ``"instance-type"`` (every offering of the type).
    """

    reason: str
    scope: str
    message: str


def classify_capacity_error(code: str, message: str, *, instance_type: str, zone: str,
                            capacity_type: str) -> CapacityError | None:
    """The capacity meaning of an ARM error code, as Karpenter's Azure provider reads it;
    None when ``code`` is not a capacity error."""
    if code == SKU_NOT_AVAILABLE:
        return CapacityError(
            "SKUNotAvailable",
            "offering",
            f"the requested SKU is unavailable for instance type {instance_type} in zone "
            f"{zone} with capacity type {capacity_type}",
        )
    if code == ZONAL_ALLOCATION_FAILED:
        return CapacityError(
            "ZonalAllocationFailure",
            "zone",
            f"unable to allocate resources in the selected zone ({zone}); will try a "
            "different zone",
        )
    if code == ALLOCATION_FAILED:
        return CapacityError(
            "AllocationFailure",
            "placement",
            f"unable to allocate resources with selected VM size ({instance_type}); will "
            "try a different VM size",
        )
    if code == OVERCONSTRAINED_ZONAL:
        return CapacityError(
            "OverconstrainedZonalAllocationFailure",
            "zone",
            f"zonal allocation of {instance_type} in {zone} is overconstrained",
        )
    if code == OVERCONSTRAINED:
        return CapacityError(
            "OverconstrainedAllocationFailure",
            "placement",
            f"allocation of {instance_type} is overconstrained",
        )
    if code == OPERATION_NOT_ALLOWED:
        lowered = message.lower()
        if "low priority cores" in lowered or "lowprioritycores" in lowered:
            return CapacityError(
                "SubscriptionQuotaReached",
                "spot",
                "this subscription has reached the regional vCPU quota for spot "
                "(LowPriorityCores)",
            )
        if "family cores quota" in lowered:
            return CapacityError(
                "SubscriptionQuotaReached",
                "capacity-type",
                f"subscription level {capacity_type} vCPU quota for {instance_type} has been "
                "reached",
            )
        if "regional cores quota" in lowered:
            return CapacityError(
                "SubscriptionQuotaReached",
                "capacity-type",
                "this subscription has reached the regional vCPU quota",
            )
    return None
