"""An async controller runtime for Kubernetes: client, informers, cache, work queues,
controllers, manager and leader election. It imports nothing else from karpy, so it can
be used on its own to write any controller.

The pieces, bottom up:

* :class:`Client` — the protocol controllers are typed against: async
  get/list/create/update/patch/apply/delete for any :class:`Kind` (core or custom) on
  plain-dict objects, typed errors (:mod:`karpy.runtime.errors`). :class:`KubeClient`
  implements it against an API server (a timeout on every request);
  ``testing.FakeClient`` in memory.
* :class:`Informer` and :class:`Cache` — list+watch into an indexed, read-only store, one
  shared informer per kind.
* :class:`WorkQueue` — client-go's de-duplicating, rate-limited queue.
* :class:`Controller` and :class:`Manager` — workers around a :class:`Reconciler`, and the
  lifecycle around them (cache sync, leader election, probes, metrics, shutdown).

This module's names are what a controller author needs, on one page (docs/runtime.md has
a complete controller in under a page). The rest sits in named submodules:
:mod:`~karpy.runtime.errors` (the error tree), :mod:`~karpy.runtime.kinds` (built-in
kinds), :mod:`~karpy.runtime.ratelimit` (work-queue rate limiters, backoff),
:mod:`~karpy.runtime.indexes` (cache indexes, parsed selector queries),
:mod:`~karpy.runtime.telemetry` (metrics registry, JSON log formatter),
:mod:`~karpy.runtime.leaderelection` (a leader elector without a manager),
:mod:`~karpy.runtime.objects` (the read-only object containers) and
:mod:`~karpy.runtime.testing` (fakes and test aids).
"""

from . import errors, kinds
from ._cache import Cache, InformerOptions
from ._client import KubeClient, ObjectList, PatchType, Reader, ServerVersion, WatchEvent
from ._clock import Clock, SystemClock
from ._controller import Controller, singleton_controller
from ._events import EventRecorder
from ._informer import Informer
from ._leaderelection import LeaderElectionConfig
from ._logging import configure_logging, logging_context
from ._manager import Manager, Runnable
from ._objects import Object, freeze, thaw
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
from ._protocol import Client, ListerWatcher, ManagerClient, ReportsServerVersion
from ._reconcile import Reconciler, Request, Result, SingletonReconciler
from ._run import run
from ._sources import InformerSource, MapFunc, Source, enqueue_object, enqueue_owner
from ._timestamps import format_micro_time, format_time, parse_time
from ._workqueue import WorkQueue
from .kinds import Kind

__all__ = [
    "ANNOTATIONS_CHANGED",
    "GENERATION_CHANGED",
    "LABELS_CHANGED",
    "RESOURCE_VERSION_CHANGED",
    "Cache",
    "Client",
    "Clock",
    "Controller",
    "EventHandler",
    "EventRecorder",
    "FuncHandler",
    "Informer",
    "InformerOptions",
    "InformerSource",
    "Kind",
    "KubeClient",
    "LeaderElectionConfig",
    "ListerWatcher",
    "Manager",
    "ManagerClient",
    "MapFunc",
    "Object",
    "ObjectList",
    "PatchType",
    "Predicate",
    "Reader",
    "Reconciler",
    "ReportsServerVersion",
    "Request",
    "Result",
    "Runnable",
    "ServerVersion",
    "SingletonReconciler",
    "Source",
    "SystemClock",
    "WatchEvent",
    "WorkQueue",
    "configure_logging",
    "enqueue_object",
    "enqueue_owner",
    "errors",
    "format_micro_time",
    "format_time",
    "freeze",
    "kinds",
    "logging_context",
    "parse_time",
    "predicate_from",
    "run",
    "singleton_controller",
    "thaw",
]
