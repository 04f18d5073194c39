"""An async controller runtime for Kubernetes: client, informers, cache, work queues,
controllers, manager and leader election. It imports nothing else from karpy, so it can
be used on its own to write any controller.

The pieces, bottom up:

* :class:`Client` — async get/list/create/update/patch/apply/delete for any :class:`Kind`
  (core or custom), plain-dict objects, a timeout on every request, typed errors
  (:mod:`karpy.runtime.errors`).
* :class:`Informer` and :class:`Cache` — list+watch into an indexed, read-only store, one
  shared informer per kind.
* :class:`WorkQueue` — client-go's de-duplicating, rate-limited queue.
* :class:`Controller` and :class:`Manager` — workers around a :class:`Reconciler`, and the
  lifecycle around them (cache sync, leader election, probes, metrics, shutdown).

See docs/runtime.md for a complete controller in under a page.
"""

from . import errors, kinds
from ._backoff import Backoff
from ._cache import Cache, InformerOptions
from ._client import Client, ObjectList, PatchType, Reader, WatchEvent
from ._clock import Clock, SystemClock
from ._controller import Controller, singleton_controller
from ._events import EventRecorder
from ._informer import Informer
from ._leaderelection import LeaderElectionConfig, LeaderElector
from ._logging import JsonFormatter, configure_logging, logging_context
from ._manager import Manager, Runnable
from ._metrics import Metrics
from ._objects import FrozenDict, FrozenList, Object, freeze, thaw
from ._predicates import (
    ANNOTATIONS_CHANGED,
    GENERATION_CHANGED,
    LABELS_CHANGED,
    RESOURCE_VERSION_CHANGED,
    EventHandler,
    FuncHandler,
    Predicate,
    predicate_from,
)
from ._ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from ._reconcile import Reconciler, Request, Result, SingletonReconciler
from ._run import run
from ._selectors import FieldSelector, LabelSelector
from ._sources import InformerSource, MapFunc, Source, enqueue_object, enqueue_owner
from ._store import (
    INDEX_NAMESPACE,
    INDEX_NODE_NAME,
    INDEX_OWNER,
    IndexFunc,
    Store,
    index_by_field,
    index_by_namespace,
    index_by_node_name,
    index_by_owner,
    object_key,
)
from ._workqueue import QueueMetrics, WorkQueue
from .kinds import Kind

__all__ = [
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
]
