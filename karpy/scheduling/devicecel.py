"""Kubernetes' CEL environment for device selectors, on :mod:`karpy.apis.cel`.

A DeviceClass or a claim's request selects devices with expressions over one variable,
``device``, as k8s.io/dynamic-resource-allocation/cel (v0.34, the version Karpenter
v1.14.1 builds against) defines it:

* ``device.driver``: the driver's name;
* ``device.attributes[domain][id]`` and ``device.capacity[domain][id]``: attributes and
  capacities grouped by the domain of their qualified name (an unqualified name belongs
  to the driver's domain). A domain the device lacks reads as an empty map, so
  ``"model" in device.attributes["other.example.com"]`` is false, not an error;
* ``device.allowMultipleAllocations``;
* ``quantity("40Gi")`` and ``semver("1.2.3")`` with their receiver functions
  (``compareTo``, ``isGreaterThan``, ``isLessThan``, ``add``, ``sub``, ``asInteger``,
  ``isInteger``, ``sign``, ``major``, ``minor``, ``patch``); capacities are quantities and
  version attributes are semvers.

The CEL library carries no user types, so a quantity travels as the map
``{"k8s.io/quantity": "<exact fraction>"}`` and a semver as ``{"k8s.io/semver": "1.2.3"}``;
the receiver functions unwrap them. Equality of two quantities with the same value
therefore holds, as in Kubernetes.

A selector that fails to evaluate for a device (a missing attribute, a type mismatch)
does not select it: Karpenter's allocator (allocator.go, ``deviceMatchesRequest``)
treats the error as no match, and so does :meth:`DeviceSelector.matches`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, Final

from karpy.apis.cel import CelError, Program, compile_expression
from karpy.apis.quantity import parse_quantity

__all__ = ["DeviceSelector", "Semver", "device_variable", "quantity_value"]

_QUANTITY: Final = "k8s.io/quantity"
_SEMVER: Final = "k8s.io/semver"
_SEMVER_SYNTAX: Final = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
# Domains a selector names literally: each gets an empty map when the device lacks it
# (Kubernetes' newStringInterfaceMapWithDefault), so `in` tests read false.
_DOMAIN_LOOKUP: Final = re.compile(
    r"""\b(attributes|capacity)\s*\[\s*(?:"([^"]*)"|'([^']*)')\s*\]"""
)


class Semver(str):
    """A version attribute's value (``version`` in a ResourceSlice), kept apart from a
    plain string so the CEL environment hands it over as a semver."""

    __slots__ = ()


def _quantity(value: Fraction) -> dict[str, str]:
    return {_QUANTITY: str(value)}


def quantity_value(value: Any) -> Fraction:
    """The exact value of a CEL quantity; TypeError for anything else."""
    if isinstance(value, Mapping) and _QUANTITY in value:
        return Fraction(value[_QUANTITY])
    raise TypeError(f"expected a quantity, got {value!r}")


def _semver_key(value: Any) -> tuple[int, int, int, tuple[tuple[int, int | str], ...]]:
    if not (isinstance(value, Mapping) and _SEMVER in value):
        raise TypeError(f"expected a semver, got {value!r}")
    match = _SEMVER_SYNTAX.fullmatch(value[_SEMVER])
    if match is None:
        raise ValueError(f"invalid semver {value[_SEMVER]!r}")
    major, minor, patch, pre = int(match[1]), int(match[2]), int(match[3]), match[4]
    # Semver precedence: a pre-release sorts before the release; numeric identifiers
    # before alphanumeric ones. (4, "") stands for "no pre-release" and sorts last.
    parts: tuple[tuple[int, int | str], ...] = ((4, ""),)
    if pre:
        parts = tuple((0, int(p)) if p.isdigit() else (1, p) for p in pre.split("."))
    return major, minor, patch, parts


def _parse_semver(text: str) -> dict[str, str]:
    if _SEMVER_SYNTAX.fullmatch(text) is None:
        raise ValueError(f"invalid semver {text!r}")
    return {_SEMVER: text}


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Mapping) and _SEMVER in a:
        sa, sb = _semver_key(a), _semver_key(b)
        return (sa > sb) - (sa < sb)
    qa, qb = quantity_value(a), quantity_value(b)
    return (qa > qb) - (qa < qb)


def _as_integer(q: Any) -> int:
    value = quantity_value(q)
    if value.denominator != 1:
        raise ValueError(f"quantity {value} is not an integer")
    return int(value)


_FUNCTIONS: Final[Mapping[str, Callable[..., Any]]] = {
    "quantity": lambda text: _quantity(parse_quantity(text)),
    "isQuantity": lambda text: _is(parse_quantity, text),
    "semver": _parse_semver,
    "isSemver": lambda text: _is(_parse_semver, text),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "add": lambda a, b: _quantity(quantity_value(a) + _addend(b)),
    "sub": lambda a, b: _quantity(quantity_value(a) - _addend(b)),
    "asInteger": _as_integer,
    "isInteger": lambda q: quantity_value(q).denominator == 1,
    "asApproximateFloat": lambda q: float(quantity_value(q)),
    "sign": lambda q: (quantity_value(q) > 0) - (quantity_value(q) < 0),
    "major": lambda v: _semver_key(v)[0],
    "minor": lambda v: _semver_key(v)[1],
    "patch": lambda v: _semver_key(v)[2],
}


def _addend(b: Any) -> Fraction:
    return Fraction(b) if isinstance(b, int) and not isinstance(b, bool) else quantity_value(b)


def _is(parse: Callable[[str], Any], text: str) -> bool:
    try:
        parse(text)
    except ValueError:
        return False
    return True


def _cel_value(value: object) -> object:
    if isinstance(value, Semver):
        return {_SEMVER: str(value)}
    return value


def device_variable(
    driver: str,
    attributes: Mapping[str, object],
    capacity: Mapping[str, Fraction],
    allow_multiple_allocations: bool = False,
) -> dict[str, Any]:
    """The ``device`` variable for a device of ``driver`` whose attributes and
    capacities are keyed by (qualified or driver-relative) name."""
    attrs: dict[str, dict[str, object]] = {}
    for name, value in attributes.items():
        domain, _, ident = name.rpartition("/")
        attrs.setdefault(domain or driver, {})[ident] = _cel_value(value)
    caps: dict[str, dict[str, object]] = {}
    for name, amount in capacity.items():
        domain, _, ident = name.rpartition("/")
        caps.setdefault(domain or driver, {})[ident] = _quantity(amount)
    return {
        "driver": driver,
        "attributes": attrs,
        "capacity": caps,
        "allowMultipleAllocations": allow_multiple_allocations,
    }


class DeviceSelector:
    """One compiled CEL selector (``selectors[].cel.expression``)."""

    __slots__ = ("_domains", "_program", "expression")

    def __init__(self, expression: str) -> None:
        """Compile ``expression``; :class:`~karpy.apis.cel.CelError` when it does not."""
        self.expression = expression
        self._program: Program = compile_expression(expression)
        found = _DOMAIN_LOOKUP.findall(expression)
        self._domains = tuple((kind, a or b) for kind, a, b in found)

    def matches(self, device: Mapping[str, Any]) -> bool:
        """Whether ``device`` (a :func:`device_variable`) is selected; an evaluation
        error or a non-boolean answer selects nothing (see the module docstring)."""
        variable = device
        if self._domains:
            variable = {**device, "attributes": dict(device["attributes"]),
                        "capacity": dict(device["capacity"])}
            for kind, domain in self._domains:
                variable[kind].setdefault(domain, {})
        try:
            answer = self._program.evaluate({"device": variable}, _FUNCTIONS)
        except CelError:
            return False
        return answer is True
