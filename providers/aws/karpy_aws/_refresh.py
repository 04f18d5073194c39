"""How long resolved AMIs, subnets and security groups are reused: Karpenter AWS's
``AMI_REFRESH_INTERVAL``, ``SUBNET_REFRESH_INTERVAL`` and (v1.15.2)
``SECURITY_GROUP_REFRESH_INTERVAL`` (each 1m by default, never less).

Karpenter keeps the answers of its AMI and subnet providers in caches whose lifetime is
the interval (pkg/operator/operator.go, ``cache.New(interval, ...)``), keyed by the
query. :class:`RefreshCache` is that cache for the EC2NodeClass status controller: the
key is the class's selector terms (and, for AMIs, the Kubernetes version the aliases
name), so a changed selector is resolved at once and an unchanged one at most once per
interval — fewer DescribeImages / GetParameter / DescribeSubnets / DescribeSecurityGroups
calls for a longer interval, at the cost of seeing a new AMI, a retagged subnet or
security group later.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from karpy.runtime import Clock, SystemClock
from karpy_aws.apis.ec2nodeclass import AMI, SecurityGroup, Subnet

__all__ = ["RefreshCache", "ResolutionCaches", "selector_key"]

_T = TypeVar("_T")


def selector_key(terms: Any, *extra: str) -> str:
    """A cache key for selector ``terms`` (models with ``to_dict``) and ``extra`` parts."""
    plain = [t.to_dict() if hasattr(t, "to_dict") else t for t in terms]
    return json.dumps([plain, *extra], sort_keys=True, default=str)


@dataclass
class RefreshCache(Generic[_T]):
    """Answers kept ``ttl`` seconds per key (see the module docstring)."""

    ttl: float
    clock: Clock = field(default_factory=SystemClock)
    _entries: dict[str, tuple[float, _T]] = field(default_factory=dict)

    async def get_or_resolve(self, key: str, resolve: Callable[[], Awaitable[_T]]) -> _T:
        """The answer cached for ``key`` while fresh, else ``resolve()``'s (then kept).
        Errors are not kept: the next call asks again. A copy is returned, so a caller
        that edits it does not change the cached answer."""
        now = self.clock.monotonic()
        # expired entries go, so classes deleted long ago do not pile up
        self._entries = {k: v for k, v in self._entries.items() if now - v[0] < self.ttl}
        cached = self._entries.get(key)
        if cached is None:
            cached = (now, await resolve())
            self._entries[key] = cached
        return copy.deepcopy(cached[1])


class ResolutionCaches:
    """The provider's AMI, subnet and security group caches, with the settings' refresh
    intervals (``security_group_ttl`` defaults to Karpenter AWS's 1m)."""

    def __init__(
        self,
        *,
        ami_ttl: float,
        subnet_ttl: float,
        security_group_ttl: float = 60.0,
        clock: Clock | None = None,
    ) -> None:
        clock = clock or SystemClock()
        self.amis: RefreshCache[list[AMI]] = RefreshCache(ami_ttl, clock)
        self.subnets: RefreshCache[list[Subnet]] = RefreshCache(subnet_ttl, clock)
        self.security_groups: RefreshCache[list[SecurityGroup]] = RefreshCache(
            security_group_ttl, clock
        )
