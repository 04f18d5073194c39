"""The public surface of karpy.runtime: exactly these names, sorted, documented, and
importable without the rest of karpy."""

from __future__ import annotations

import inspect
import subprocess
import sys

import karpy.runtime as runtime

EXPECTED = {
    "ANNOTATIONS_CHANGED",
    "GENERATION_CHANGED",
    "INDEX_NAMESPACE",
    "INDEX_NODE_NAME",
    "INDEX_OWNER",
    "LABELS_CHANGED",
    "RESOURCE_VERSION_CHANGED",
    "Backoff",
    "BucketRateLimiter",
    "Cache",
    "Client",
    "Clock",
    "Controller",
    "EventHandler",
    "EventRecorder",
    "FieldSelector",
    "FrozenDict",
    "FrozenList",
    "FuncHandler",
    "IndexFunc",
    "Informer",
    "InformerOptions",
    "InformerSource",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "JsonFormatter",
    "Kind",
    "LabelSelector",
    "LeaderElectionConfig",
    "LeaderElector",
    "Manager",
    "MapFunc",
    "MaxOfRateLimiter",
    "Metrics",
    "Object",
    "ObjectList",
    "PatchType",
    "Predicate",
    "QueueMetrics",
    "RateLimiter",
    "Reader",
    "Reconciler",
    "Request",
    "Result",
    "Runnable",
    "SingletonReconciler",
    "Source",
    "Store",
    "SystemClock",
    "WatchEvent",
    "WorkQueue",
    "configure_logging",
    "default_controller_rate_limiter",
    "enqueue_object",
    "enqueue_owner",
    "errors",
    "freeze",
    "index_by_field",
    "index_by_namespace",
    "index_by_node_name",
    "index_by_owner",
    "kinds",
    "logging_context",
    "object_key",
    "predicate_from",
    "run",
    "singleton_controller",
    "thaw",
}


def _isort_key(name: str) -> tuple[int, str]:
    # ruff's RUF022 order: CONSTANTS, then Classes, then functions/modules.
    kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return kind, name


def test_all_is_exactly_the_documented_surface_and_sorted() -> None:
    assert set(runtime.__all__) == EXPECTED
    assert runtime.__all__ == sorted(runtime.__all__, key=_isort_key)
    assert len(runtime.__all__) == len(set(runtime.__all__))


def test_every_export_resolves_and_public_callables_are_documented() -> None:
    for name in runtime.__all__:
        value = getattr(runtime, name)
        if inspect.isclass(value) or inspect.isfunction(value) or inspect.ismodule(value):
            assert inspect.getdoc(value), f"karpy.runtime.{name} has no docstring"


def test_runtime_imports_nothing_else_from_karpy() -> None:
    code = (
        "import sys, karpy.runtime, karpy.runtime.testing;"
        "print(sorted(m for m in sys.modules if m.startswith('karpy.')"
        " and not m.startswith('karpy.runtime')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_errors_module_exports_its_tree() -> None:
    from karpy.runtime import errors

    assert issubclass(errors.AlreadyExists, errors.Conflict)
    assert issubclass(errors.RequestTimeout, errors.TransportError)
    assert issubclass(errors.ServiceUnavailable, errors.ServerError)
    for name in errors.__all__:
        assert getattr(errors, name).__doc__
