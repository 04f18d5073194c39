"""Common Expression Language (CEL): compile once, evaluate many times, one error type.

Kubernetes writes selectors and validation rules in CEL (DeviceClass and ResourceClaim
selectors, CRD ``x-kubernetes-validations``). This module is the one place karpy
touches a CEL implementation, so the choice can change without touching its users:
:mod:`karpy.scheduling.devicecel` builds Kubernetes' DRA environment on it, and a CRD
rule checker can build its own (``self``, ``oldSelf``) the same way.

Why ``common-expression-language`` (the ``cel`` module, Rust's cel-interpreter behind
PyO3), measured 2026-12-02 on this 2-core machine, Python 3.11, for
``device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model ==
"A100"`` and a ``quantity(...).compareTo(...)`` selector:

* common-expression-language 0.10.0: compile 0.24 ms; evaluate 5-17 us reusing a
  context, 90-175 us building a fresh one per device. A member call ``x.f(y)`` resolves
  to a registered Python function ``f(x, y)``, which is how Kubernetes' ``quantity``
  and ``semver`` receiver functions (``compareTo``, ``isGreaterThan``...) are provided.
  Runtime errors (a missing map key) raise, which we translate.
* cel-expr-python 0.1.3 (Google's cel-cpp): compile 0.78 ms, evaluate 53 us; custom
  member functions need typed overloads per CEL type, and a ``(map).compareTo(map)``
  overload on ``dyn`` is refused at run time, so Kubernetes' Quantity and Semver types
  would need a protobuf message or an abstract type each.
* cel-python 0.5.0 (pure Python): compile 2.2 ms, evaluate 2.9 ms: 200 times slower.

The allocator evaluates each (selector, device) pair once per solve and caches the
answer (as Karpenter caches ``deviceMatchesRequest``), so the fresh-context cost is paid
per distinct device, not per pod.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import cel

__all__ = ["CelError", "Program", "compile_expression"]


class CelError(ValueError):
    """An expression does not compile, or its evaluation failed (a missing key, a type
    mismatch, division by zero). The message names the expression."""


class Program:
    """A compiled expression; :meth:`evaluate` runs it against variables and functions."""

    __slots__ = ("_program", "source")

    def __init__(self, source: str, program: cel.Program) -> None:
        self.source = source
        self._program = program

    def evaluate(
        self,
        variables: Mapping[str, Any],
        functions: Mapping[str, Callable[..., Any]] | None = None,
    ) -> Any:
        """The expression's value; :class:`CelError` when evaluation fails."""
        context = cel.Context(dict(variables), dict(functions or {}))
        try:
            return self._program.execute(context)
        # The binding raises KeyError, TypeError, ValueError or RuntimeError by kind of
        # failure; to every caller they are one thing: this expression failed here.
        except (KeyError, TypeError, ValueError, RuntimeError, OverflowError) as exc:
            raise CelError(f"CEL expression {self.source!r} evaluation failed: {exc}") from exc


@lru_cache(maxsize=4096)
def compile_expression(source: str) -> Program:
    """``source`` compiled (cached: selectors repeat across claims and solves);
    :class:`CelError` names the expression when it does not compile."""
    try:
        return Program(source, cel.compile(source))
    except (ValueError, RuntimeError) as exc:
        raise CelError(f"CEL expression {source!r} failed to compile: {exc}") from exc
