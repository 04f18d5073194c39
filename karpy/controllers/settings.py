"""The autoscaler's settings: one frozen value passed explicitly to every controller.

Names and defaults follow Karpenter's settings (BATCH_IDLE_DURATION, BATCH_MAX_DURATION,
CLUSTER_NAME, ...). Durations are seconds. The lifecycle timeouts that Karpenter
hard-codes (launch 5 min, registration 15 min) are settings here so tests can shorten them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Settings"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    """Everything the controllers read from configuration."""

    cluster_name: str = ""
    batch_idle_duration: float = 1.0
    """The provisioning batch closes after this long without a new pending pod."""
    batch_max_duration: float = 10.0
    """...or after this long in all."""
    launch_ttl: float = 300.0
    """A NodeClaim not launched within this long is deleted (liveness)."""
    registration_ttl: float = 900.0
    """A launched NodeClaim whose Node has not registered within this long is deleted."""
    insufficient_capacity_ttl: float = 180.0
    """How long an offering that failed with insufficient capacity stays unavailable."""
    garbage_collection_grace: float = 30.0
    """A cloud instance with no NodeClaim is deleted once it is older than this."""
    garbage_collection_period: float = 120.0
    """How often the garbage collector lists the provider's instances."""
    eviction_retry: float = 5.0
    """Seconds before retrying an eviction that a PodDisruptionBudget refused."""
    pod_nomination_ttl: float = 20.0
    """How long a pod nominated to an in-flight NodeClaim is not provisioned again."""
