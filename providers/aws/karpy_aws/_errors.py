"""EC2/IAM/SSM/SQS error codes and what the provider makes of them (Karpenter AWS's
pkg/errors/errors.go): which codes mean "not found", which mean "no capacity for this
offering right now", and the CamelCase reason a failed launch shows on the NodeClaim.
"""

from __future__ import annotations

from typing import Final

from botocore.exceptions import BotoCoreError, ClientError

__all__ = [
    "ALREADY_EXISTS_CODES",
    "NOT_FOUND_CODES",
    "SUBNET_FULL_CODE",
    "UNFULFILLABLE_CAPACITY_CODES",
    "error_code",
    "is_already_exists",
    "is_launch_template_not_found",
    "is_not_found",
    "is_unfulfillable_capacity",
    "reason_message",
]

NOT_FOUND_CODES: Final = frozenset(
    {
        "InvalidCapacityReservationId.NotFound",
        "InvalidInstanceID.NotFound",
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.NotFound",
        "QueueDoesNotExist",
        "AWS.SimpleQueueService.NonExistentQueue",
        "NoSuchEntity",
        "ParameterNotFound",
    }
)
ALREADY_EXISTS_CODES: Final = frozenset(
    {"EntityAlreadyExists", "InvalidLaunchTemplateName.AlreadyExistsException"}
)
#: CreateFleet error codes that mean "this offering has no capacity right now"
UNFULFILLABLE_CAPACITY_CODES: Final = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        "MaxFleetCountExceeded",
        "ReservationCapacityExceeded",
    }
)
#: the CreateFleet error of a subnet with no free address left: the subnet, not the
#: offering, is unavailable (Karpenter marks it so and launches into another subnet)
SUBNET_FULL_CODE: Final = "InsufficientFreeAddressesInSubnet"
SPOT_SERVICE_LINKED_ROLE_CODE: Final = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError ("" for anything else)."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def is_not_found(exc: BaseException) -> bool:
    """Whether ``exc`` says the thing asked about does not exist."""
    return error_code(exc) in NOT_FOUND_CODES


def is_already_exists(exc: BaseException) -> bool:
    """Whether ``exc`` says the thing being created exists already."""
    return error_code(exc) in ALREADY_EXISTS_CODES


def is_launch_template_not_found(exc: BaseException) -> bool:
    """Whether a launch template named in a request is gone (the cache was stale)."""
    return error_code(exc) in (
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.NotFound",
    )


def is_unfulfillable_capacity(code: str) -> bool:
    """Whether a CreateFleet error code means no capacity for that offering."""
    return code in UNFULFILLABLE_CAPACITY_CODES


def reason_message(exc: BaseException) -> tuple[str, str]:
    """A CamelCase reason and a message for a NodeClaim condition."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "")) or "AWSError"
        reason = "".join(part[:1].upper() + part[1:] for part in code.replace(".", " ").split())
        return reason, str(error.get("Message", "")) or str(exc)
    if isinstance(exc, BotoCoreError):
        return "AWSClientError", str(exc)
    return "LaunchFailed", str(exc)
