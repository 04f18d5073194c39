"""``operatorpkg.<kind>.status``: the ``operator_*`` status-condition and termination
metrics Karpenter gets from operatorpkg's status controller, for NodeClaims, NodePools,
Nodes and each NodeClass kind the provider serves.

For every object of a kind, and every condition on it:

* ``operator_<kind>_status_condition_count{namespace,name,type,status,reason,...}`` is 1;
* ``operator_<kind>_status_condition_current_status_seconds{...}`` is the time since the
  condition's lastTransitionTime;
* ``operator_<kind>_status_condition_transitions_total{type,status,reason,...}`` counts
  the changes of status this controller saw, and
  ``operator_<kind>_status_condition_transition_seconds{type,status,...}`` observes how
  long the condition had kept its previous status;
* while the object is being deleted, ``operator_<kind>_termination_current_time_seconds``
  is the time since its deletionTimestamp, and when it is gone
  ``operator_<kind>_termination_duration_seconds`` observes the whole termination.

The kinds Karpenter registers with ``EmitDeprecatedMetrics`` (NodeClaim, NodePool, the
NodeClasses) also write the same values into the kind-less ``operator_status_condition_*``
and ``operator_termination_*`` families, labelled ``group`` and ``kind`` instead of the
extra labels. NodeClaims and Nodes carry as extra labels their ``karpenter.sh/nodepool``
label and one label per NodeClass kind (``karpenter.k8s.aws/ec2nodeclass``), Nodes also
``karpenter.sh/initialized``, each in snake_case, as Karpenter configures them.

Unlike operatorpkg, which requeues every object every 10 s to refresh the two "seconds"
gauges, the gauges here keep the timestamp and compute the age when ``/metrics`` is
read: exact at every scrape, and no reconcile per object per 10 s at a thousand nodes.
Transitions are observed as operatorpkg observes them: best effort, by comparing with
what this controller saw last (two writes between two reconciles count as one).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from opentelemetry.metrics import Histogram, Meter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from karpy.runtime import Client, Clock, Kind, Request, Result, errors, parse_time

__all__ = [
    "DEFAULT_BUCKETS",
    "EXPONENTIAL_BUCKETS",
    "StatusFamilies",
    "StatusGauges",
    "StatusMetrics",
    "prometheus_label",
]

#: prometheus.DefBuckets: operatorpkg's default (the NodeClasses and the kind-less family).
DEFAULT_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: prometheus.ExponentialBuckets(0.5, 2, 15): Karpenter's for NodeClaims, NodePools, Nodes.
EXPONENTIAL_BUCKETS: Final = tuple(0.5 * 2**i for i in range(15))

_COUNT = "status_condition_count"
_CURRENT = "status_condition_current_status_seconds"
_TERMINATING = "termination_current_time_seconds"
_CONDITION_LABELS: Final = ("namespace", "name", "type", "status", "reason")


def prometheus_label(key: str) -> str:
    """A Kubernetes label key as operatorpkg names its metric label ("/", ".", "-" → "_")."""
    return key.replace("/", "_").replace(".", "_").replace("-", "_")


def _parse_time(value: object) -> datetime | None:
    # Metrics must not fail on a malformed time: a sample is skipped instead.
    if not isinstance(value, str):
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class _Series:
    """A gauge sample whose value is either fixed or the age of ``since`` at scrape time."""

    name: str
    labels: tuple[str, ...]
    value: float
    since: datetime | None = None


class StatusGauges(Collector):
    """The ``operator_*`` gauges of every kind, as one Prometheus collector: samples are
    replaced per object, ages computed when collected (see the module docs)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._families: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._series: dict[tuple[str, str], tuple[_Series, ...]] = {}
        self._lock = threading.Lock()

    def declare(self, name: str, help_: str, labels: Sequence[str]) -> None:
        """Add a gauge family (idempotent: kinds share the kind-less families)."""
        with self._lock:
            self._families.setdefault(name, (help_, tuple(labels)))

    def labels_of(self, name: str) -> tuple[str, ...]:
        """The label names of family ``name``."""
        return self._families[name][1]

    def replace(self, owner: str, key: str, series: Sequence[_Series]) -> None:
        """Replace what ``owner`` (a kind) exports for object ``key``; nothing deletes it."""
        with self._lock:
            if series:
                self._series[(owner, key)] = tuple(series)
            else:
                self._series.pop((owner, key), None)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families, without samples."""
        with self._lock:
            families = dict(self._families)
        for name, (help_, labels) in families.items():
            yield GaugeMetricFamily(name, help_, labels=labels)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Every family with its current samples."""
        with self._lock:
            families = dict(self._families)
            held = list(self._series.values())
        now = self._clock.now()
        out = {
            name: GaugeMetricFamily(name, help_, labels=labels)
            for name, (help_, labels) in families.items()
        }
        for series in held:
            for one in series:
                value = one.value
                if one.since is not None:
                    value = max(0.0, (now - one.since).total_seconds())
                out[one.name].add_metric(list(one.labels), value)
        yield from out.values()


class StatusFamilies:
    """The instruments of one kind's ``operator_<kind>_*`` metrics (and, with
    ``deprecated``, of the kind-less family they are mirrored into)."""

    def __init__(
        self,
        *,
        kind: Kind,
        meter: Meter,
        gauges: StatusGauges,
        label_keys: Sequence[str] = (),
        buckets: Sequence[float] = DEFAULT_BUCKETS,
        deprecated: bool = False,
    ) -> None:
        self.kind = kind
        self.label_keys = tuple(label_keys)
        self.extra = tuple(prometheus_label(k) for k in label_keys)
        self.deprecated = deprecated
        self.gauges = gauges
        prefixes = [f"operator_{kind.kind.lower()}_"]
        if deprecated:
            prefixes.append("operator_")
        self.prefixes = tuple(prefixes)
        self._transitions = []
        self._durations: list[Histogram] = []
        self._terminations: list[Histogram] = []
        for i, prefix in enumerate(prefixes):
            extra = self.extra if i == 0 else ("group", "kind")
            bounds = buckets if i == 0 else DEFAULT_BUCKETS
            gauges.declare(
                prefix + _COUNT,
                "The number of a condition for a given object, type and status. e.g. "
                "Alarm := Available=False > 0",
                (*_CONDITION_LABELS, *extra),
            )
            gauges.declare(
                prefix + _CURRENT,
                "The current amount of time in seconds that a status condition has been "
                "in a specific state. Alarm := P99(Updated=Unknown) > 5 minutes",
                (*_CONDITION_LABELS, *extra),
            )
            gauges.declare(
                prefix + _TERMINATING,
                "The current amount of time in seconds that an object has been in "
                "terminating state.",
                ("namespace", "name", *extra),
            )
            self._transitions.append(meter.create_counter(
                prefix + "status_condition_transitions_total",
                description="The count of transitions of a given object, type and status.",
            ))
            self._durations.append(meter.create_histogram(
                prefix + "status_condition_transition_seconds", unit="s",
                description="The amount of time a condition was in a given state before "
                "transitioning. e.g. Alarm := P99(Updated=False) > 5 minutes",
                explicit_bucket_boundaries_advisory=bounds,
            ))
            self._terminations.append(meter.create_histogram(
                prefix + "termination_duration_seconds", unit="s",
                description="The amount of time taken by an object to terminate completely.",
                explicit_bucket_boundaries_advisory=bounds,
            ))

    def extra_labels(self, obj: Mapping[str, Any]) -> dict[str, str]:
        """The object's labels configured as metric labels ("" when absent)."""
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return {prometheus_label(k): str(labels.get(k, "")) for k in self.label_keys}

    def _variants(self, labels: Mapping[str, str], extra: Mapping[str, str]
                  ) -> Iterator[tuple[int, str, dict[str, str]]]:
        yield 0, self.prefixes[0], {**labels, **extra}
        if self.deprecated:
            gk = {"group": self.kind.group, "kind": self.kind.kind}
            yield 1, self.prefixes[1], {**labels, **gk}

    def transition(self, labels: Mapping[str, str], extra: Mapping[str, str]) -> None:
        """Count one observed transition."""
        for i, _, attrs in self._variants(labels, extra):
            self._transitions[i].add(1, attrs)

    def transition_duration(
        self, seconds: float, labels: Mapping[str, str], extra: Mapping[str, str]
    ) -> None:
        """Observe how long a condition kept its previous status."""
        for i, _, attrs in self._variants(labels, extra):
            self._durations[i].record(seconds, attrs)

    def terminated(self, seconds: float, extra: Mapping[str, str]) -> None:
        """Observe a finished termination."""
        for i, _, attrs in self._variants({}, extra):
            self._terminations[i].record(seconds, attrs)

    def series(self, name: str, labels: Mapping[str, str], extra: Mapping[str, str],
               *, value: float = 1.0, since: datetime | None = None) -> list[_Series]:
        """The gauge samples of ``name`` (a family suffix) in each variant."""
        out = []
        for _, prefix, attrs in self._variants(labels, extra):
            full = prefix + name
            order = self.gauges.labels_of(full)
            out.append(_Series(full, tuple(attrs.get(k, "") for k in order), value, since))
        return out


@dataclass(frozen=True, slots=True)
class _Condition:
    type: str
    status: str
    reason: str
    last_transition: datetime | None


@dataclass(frozen=True, slots=True)
class _Seen:
    conditions: Mapping[str, _Condition]
    extra: Mapping[str, str]
    deleting_since: datetime | None


def _conditions(obj: Mapping[str, Any]) -> dict[str, _Condition]:
    out = {}
    for c in (obj.get("status") or {}).get("conditions") or []:
        if not isinstance(c, Mapping) or not c.get("type"):
            continue
        out[str(c["type"])] = _Condition(
            str(c["type"]), str(c.get("status", "")), str(c.get("reason") or ""),
            _parse_time(c.get("lastTransitionTime")),
        )
    return out


class StatusMetrics:
    """The ``operatorpkg.<kind>.status`` reconciler of one kind."""

    def __init__(self, *, client: Client, clock: Clock, families: StatusFamilies) -> None:
        self._client = client
        self._clock = clock
        self._families = families
        self._owner = families.kind.kind
        self.name = f"operatorpkg.{families.kind.kind.lower()}.status"
        self._seen: dict[Request, _Seen] = {}

    async def reconcile(self, request: Request) -> Result:
        """Export the object's conditions, count what changed since last seen, and time
        its termination."""
        fam = self._families
        key = f"{request.namespace}/{request.name}"
        try:
            obj = await self._client.get(self._families.kind, request.name,
                                         namespace=request.namespace or None)
        except errors.NotFound:
            seen = self._seen.pop(request, None)
            fam.gauges.replace(self._owner, key, ())
            if seen is not None and seen.deleting_since is not None:
                elapsed = (self._clock.now() - seen.deleting_since).total_seconds()
                fam.terminated(max(0.0, elapsed), seen.extra)
            return Result()
        current = _conditions(obj)
        extra = fam.extra_labels(obj)
        deleting = _parse_time((obj.get("metadata") or {}).get("deletionTimestamp"))
        ident = {"namespace": request.namespace, "name": request.name}
        series = []
        for c in current.values():
            labels = {**ident, "type": c.type, "status": c.status, "reason": c.reason}
            series += fam.series(_COUNT, labels, extra)
            if c.last_transition is not None:
                series += fam.series(_CURRENT, labels, extra, since=c.last_transition)
        if deleting is not None:
            series += fam.series(_TERMINATING, ident, extra, since=deleting)
        fam.gauges.replace(self._owner, key, series)

        previous = self._seen.get(request)
        before = previous.conditions if previous is not None else {}
        for c in current.values():
            old = before.get(c.type)
            if old is not None and old.status == c.status:
                continue
            fam.transition({"type": c.type, "status": c.status, "reason": c.reason}, extra)
            if old is not None and old.last_transition and c.last_transition:
                fam.transition_duration(
                    (c.last_transition - old.last_transition).total_seconds(),
                    {"type": old.type, "status": old.status}, extra,
                )
        self._seen[request] = _Seen(current, extra, deleting)
        return Result()
