"""Karpenter AWS's own metrics for launches, terminations and the CreateFleet batcher.

Registered on the manager's /metrics when karpy-aws runs (:func:`register_controllers`
calls :meth:`AWSCloudProvider.instrument`), under Karpenter AWS's names and labels
(pkg/providers/instance/metrics.go, pkg/batcher/metrics.go):

- ``karpenter_cloudprovider_instance_launch_failures_total{zone, zone_id,
  capacity_type, reason}``: one per *offering* CreateFleet refused (each entry of its
  ``Errors``, so one call may count several), ``reason`` as Karpenter AWS's
  ``ToReasonMessage`` names it (:func:`launch_failure_reason`: an insufficient-capacity
  code is ``LaunchFailed`` there too);
- ``karpenter_cloudprovider_instance_termination_failures_total{zone, zone_id}``: a
  TerminateInstances call of ``delete`` that failed;
- ``karpenter_cloudprovider_batcher_batch_time_seconds{batcher}`` and
  ``..._batch_size{batcher}``: how long a CreateFleet batch stayed open and how many
  requests it merged (``batcher="create_fleet"``; karpy-aws batches only CreateFleet).
"""

from __future__ import annotations

from typing import Final

from opentelemetry.metrics import Meter

__all__ = ["AWSMetrics", "launch_failure_reason"]

#: Karpenter's ``metrics.DurationBuckets()``: controller-runtime's reconcile buckets
#: plus 120 s .. 600 s.
DURATION_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
    0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0,
    10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 120.0, 150.0, 300.0, 450.0, 600.0,
)  # fmt: skip
#: Karpenter AWS's batcher ``SizeBuckets()``.
SIZE_BUCKETS: Final = (
    1.0, 2.0, 4.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0,
    100.0, 125.0, 150.0, 175.0, 200.0, 225.0, 250.0, 275.0, 300.0, 350.0, 400.0, 450.0,
    500.0, 550.0, 600.0, 700.0, 800.0, 900.0, 1000.0,
)  # fmt: skip

# Karpenter AWS's ToReasonMessage, in its order: the first texts all found in
# "code: message" name the reason; the capacity errors come last and fall through to
# LaunchFailed.
_AUTH: Final = ("UnauthorizedOperation", "AccessDenied", "AuthFailure")
_REASONS: Final[tuple[tuple[tuple[str, ...], str], ...]] = (
    (("AuthFailure.ServiceLinkedRoleCreationNotPermitted",), "SpotSLRCreationFailed"),
    (("InvalidParameter", "belong to different networks"), "SecurityGroupSubnetVPCMismatch"),
    (("iamInstanceProfile.name is invalid",), "InstanceProfileNameInvalid"),
    (("InvalidLaunchTemplateId.NotFound",), "LaunchTemplateNotFound"),
    (("User data is limited to",), "UserDataSizeLimitExceeded"),
    (("InvalidAMIID.Malformed",), "InvalidAMIID"),
    (("InvalidAMIID.NotFound",), "AMINotFound"),
    (("RequestLimitExceeded",), "RequestLimitExceeded"),
    (("InternalError",), "InternalError"),
    (("not eligible for Free Tier",), "FreeTierIneligible"),
    (("MaxFleetCountExceeded",), "FleetQuotaExceeded"),
    (("PendingVerification",), "AccountPendingVerification"),
    (("MaxSpotInstanceCountExceeded",), "SpotQuotaExceeded"),
    (("VcpuLimitExceeded",), "VCPULimitExceeded"),
    (("InsufficientFreeAddressesInSubnet",), "InsufficientFreeAddressesInSubnet"),
)


def launch_failure_reason(code: str, message: str) -> str:
    """The ``reason`` label of one CreateFleet error, as Karpenter AWS derives it."""
    text = f"{code}: {message}"
    first, *rest = _REASONS
    if first[0][0] in text:
        return first[1]
    if any(needle in text for needle in _AUTH):  # checked second in Karpenter AWS
        return "AMIAuthorizationFailure" if "Not authorized for images" in text else (
            "Unauthorized")
    for needles, reason in rest:
        if all(needle in text for needle in needles):
            return reason
    return "LaunchFailed"


class AWSMetrics:
    """The instruments of the module docstring, from the manager's meter."""

    def __init__(self, meter: Meter) -> None:
        self.launch_failures = meter.create_counter(
            "karpenter_cloudprovider_instance_launch_failures_total",
            description="Number of instance launch (CreateFleet offering) failures, "
            "dimensioned by availability zone, zone ID, capacity type, and launch failure "
            "reason.",
        )
        self.termination_failures = meter.create_counter(
            "karpenter_cloudprovider_instance_termination_failures_total",
            description="Number of instance termination (TerminateInstances) failures, "
            "dimensioned by availability zone and zone ID.",
        )
        self.batch_time = meter.create_histogram(
            "karpenter_cloudprovider_batcher_batch_time_seconds", unit="s",
            description="Duration of the batching window per batcher",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.batch_size = meter.create_histogram(
            "karpenter_cloudprovider_batcher_batch_size",
            description="Size of the request batch per batcher",
            explicit_bucket_boundaries_advisory=SIZE_BUCKETS,
        )
