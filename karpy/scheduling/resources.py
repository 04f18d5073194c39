"""Kubernetes resource quantities as plain integers, and resource lists built on them.

Quantities are parsed by :mod:`karpy.apis.quantity` (bounded work, Kubernetes' int64
bounds) instead of with the kubernetes client's helpers for two reasons: the scheduling
layer may not import the client (import-linter keeps ``karpy.scheduling`` free of it),
and the simulator's hot path adds and compares requests millions of times, which plain
``int`` does at C speed while a quantity object would not.

Canonical units: ``cpu`` in millicores; ``memory``, ``ephemeral-storage`` and
``hugepages-*`` in bytes; every other resource (``pods``, ``nvidia.com/gpu`` ...) as an
integer count. Fractions are rounded up, as the kubelet does when it reserves them.

A resource list is a plain ``dict[str, int]`` (:data:`ResourceList`); the functions
below never mutate their arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from functools import lru_cache
from math import ceil
from typing import Final, TypeAlias

from karpy.apis.quantity import BINARY_SUFFIXES, MAX_QUANTITY, parse_quantity

__all__ = [
    "CPU",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "PODS",
    "ResourceList",
    "add",
    "describe",
    "exceeded",
    "fits",
    "format_quantity",
    "format_resource_list",
    "maximum",
    "minimum",
    "parse_quantity",
    "parse_resource_list",
    "scale",
    "subtract",
    "to_canonical",
]

CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
PODS: Final = "pods"

ResourceList: TypeAlias = dict[str, int]
"""Resource name to canonical integer amount (see the module docstring)."""

_BINARY: Final[Mapping[str, int]] = {
    suffix: 1 << power for suffix, power in BINARY_SUFFIXES.items()
}


def _canonical(resource: str, quantity: Fraction) -> int:
    if resource == CPU:
        quantity *= 1000
    # Within int64 like the quantity itself: a cpu limit of "1e30" is as unlimited as
    # int64 millicores, and nothing downstream ever meets a bigger number.
    return max(-MAX_QUANTITY, min(ceil(quantity), MAX_QUANTITY))


def _is_bytes(resource: str) -> bool:
    return resource in (MEMORY, EPHEMERAL_STORAGE) or resource.startswith("hugepages-")


def to_canonical(resource: str, value: str | int | float) -> int:
    """``value`` of ``resource`` in canonical units: millicores for cpu, else base units
    (rounded up; within ±int64, see :mod:`karpy.apis.quantity`)."""
    if type(value) is str:
        # Pods of one workload repeat the same few strings: parse each once.
        return _canonical_str(resource, value)
    return _canonical(resource, parse_quantity(value))


@lru_cache(maxsize=4096)
def _canonical_str(resource: str, text: str) -> int:
    return _canonical(resource, parse_quantity(text))


def format_quantity(resource: str, amount: int) -> str:
    """A canonical amount back as a quantity string: ``1500`` cpu is ``"1500m"``,
    ``2`` vCPU is ``"2"``, memory uses the largest binary suffix that divides evenly."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if _is_bytes(resource) and amount:
        for suffix, factor in reversed(list(_BINARY.items())):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


def parse_resource_list(resources: Mapping[str, str | int | float] | None) -> ResourceList:
    """A Kubernetes ResourceList (``{"cpu": "500m", ...}``) in canonical units."""
    if not resources:
        return {}
    return {name: to_canonical(name, value) for name, value in resources.items()}


def format_resource_list(resources: Mapping[str, int]) -> dict[str, str]:
    """A canonical resource list back as Kubernetes quantity strings, sorted by name."""
    return {name: format_quantity(name, resources[name]) for name in sorted(resources)}


def add(*lists: Mapping[str, int]) -> ResourceList:
    """The sum of resource lists; a resource missing from a list counts as zero."""
    total: ResourceList = {}
    for resources in lists:
        for name, amount in resources.items():
            total[name] = total.get(name, 0) + amount
    return total


def subtract(lhs: Mapping[str, int], rhs: Mapping[str, int]) -> ResourceList:
    """``lhs - rhs`` per resource; may go negative (callers decide what that means)."""
    result = dict(lhs)
    for name, amount in rhs.items():
        result[name] = result.get(name, 0) - amount
    return result


def scale(resources: Mapping[str, int], factor: int) -> ResourceList:
    """Every amount multiplied by ``factor`` (the requests of ``factor`` identical pods)."""
    return {name: amount * factor for name, amount in resources.items()}


def fits(requests: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """Whether every requested amount is at most what is available (missing = zero).

    Zero requests always fit, so a pod asking for ``0`` GPUs fits a node with none.
    """
    for name, amount in requests.items():
        if amount > 0 and amount > available.get(name, 0):
            return False
    return True


def exceeded(requests: Mapping[str, int], available: Mapping[str, int]) -> list[str]:
    """The names of the resources whose request exceeds what is available, sorted."""
    return sorted(
        name for name, amount in requests.items() if amount > 0 and amount > available.get(name, 0)
    )


def maximum(*lists: Mapping[str, int]) -> ResourceList:
    """The per-resource maximum over all lists (union of resource names)."""
    result: ResourceList = {}
    for resources in lists:
        for name, amount in resources.items():
            if name not in result or amount > result[name]:
                result[name] = amount
    return result


def minimum(*lists: Mapping[str, int]) -> ResourceList:
    """The per-resource minimum over the resources present in every list."""
    if not lists:
        return {}
    result = dict(lists[0])
    for resources in lists[1:]:
        for name in list(result):
            if name in resources:
                result[name] = min(result[name], resources[name])
            else:
                del result[name]
    return result


def describe(resources: Mapping[str, int], names: Iterable[str] | None = None) -> str:
    """A short human-readable form: ``cpu=1500m, memory=4Gi, pods=1``."""
    keys = sorted(resources) if names is None else list(names)
    return ", ".join(f"{name}={format_quantity(name, resources.get(name, 0))}" for name in keys)
