"""kube-scheduler's default topology spread constraints (``SCHEDULER_CONFIG``, Karpenter
v1.15.0), per scheduler.

kube-scheduler's PodTopologySpread plugin gives a pod that declares no
``topologySpreadConstraints`` of its own the profile's ``defaultConstraints``, each with
a label selector it deduces for the pod (helper.DefaultSelector): the selectors of the
Services in the pod's namespace that select it, merged as equality matches, then the
selector of its controller if that is a ReplicationController (merged the same way) or
a ReplicaSet or StatefulSet (ANDed on). A pod for which nothing can be deduced gets no
default. Capacity planned without those constraints would be packed where
kube-scheduler spreads, and the pods left pending.

Karpenter v1.15 reads the defaults from ``podTopologySpread.defaultConstraints`` and
gives them to every pod. A kube-scheduler profile only spreads the pods that name it
(``spec.schedulerName``), though, and a cluster running a second scheduler has pods the
default profile never sees. So here Karpenter's field is the default profile's
(``default-scheduler``), and karpy's own ``profiles`` list gives any other scheduler's:
``profiles: [{schedulerName: batch, podTopologySpread: {defaultConstraints: [...]}}]``.
A pod of a scheduler with no entry gets no default constraints.

:func:`parse_scheduler_config` validates the document as Karpenter does
(ValidatePodTopologySpreadArgs); :func:`default_selector` deduces a pod's selector from
what the caller found; :func:`with_defaults` gives a parsed pod its default constraints.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

import yaml

from karpy.scheduling.pod import (
    DO_NOT_SCHEDULE,
    HONOR,
    IGNORE,
    SCHEDULE_ANYWAY,
    Pod,
    SpreadConstraint,
)
from karpy.scheduling.selectors import LabelMatcher

__all__ = [
    "DEFAULT_SCHEDULER",
    "SchedulerConfig",
    "default_selector",
    "parse_scheduler_config",
    "with_defaults",
]

DEFAULT_SCHEDULER: Final = "default-scheduler"
"""The scheduler name of a pod that names none (and of kube-scheduler's default profile)."""

# k8s.io/apimachinery validation.IsQualifiedName: an optional DNS-subdomain prefix and a
# name of at most 63 characters.
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CONSTRAINT_FIELDS: Final = frozenset({
    "maxSkew", "topologyKey", "whenUnsatisfiable", "labelSelector", "minDomains",
    "nodeAffinityPolicy", "nodeTaintsPolicy", "matchLabelKeys",
})


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """The default constraints of each scheduler, by ``schedulerName``."""

    defaults: Mapping[str, tuple[SpreadConstraint, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))

    def __bool__(self) -> bool:
        return any(self.defaults.values())

    def for_scheduler(self, name: str) -> tuple[SpreadConstraint, ...]:
        """The defaults for pods of scheduler ``name`` ("" is the default scheduler)."""
        return self.defaults.get(name or DEFAULT_SCHEDULER, ())


def _qualified(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _PREFIX.match(prefix)):
        return "prefix part must be a lowercase DNS subdomain"
    if not name or len(name) > 63 or not _NAME.match(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character (at most 63)")
    return None


def _constraint(raw: Any, where: str) -> SpreadConstraint:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be a mapping")
    unknown = sorted(set(raw) - _CONSTRAINT_FIELDS)
    if unknown:
        raise ValueError(f"{where}: unknown field {unknown[0]!r}")
    skew = raw.get("maxSkew")
    if not isinstance(skew, int) or isinstance(skew, bool) or skew <= 0:
        raise ValueError(f"{where}.maxSkew must be greater than 0")
    key = raw.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise ValueError(f"{where}.topologyKey must be set")
    problem = _qualified(key)
    if problem is not None:
        raise ValueError(f"{where}.topologyKey {key!r} is not a valid label name, {problem}")
    when = raw.get("whenUnsatisfiable")
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise ValueError(f"{where}.whenUnsatisfiable {when!r} must be one of "
                         f"{DO_NOT_SCHEDULE!r} or {SCHEDULE_ANYWAY!r}")
    if raw.get("labelSelector") is not None:
        raise ValueError(f"{where}.labelSelector must not be set, as selectors are deduced "
                         "for each pod")
    if raw.get("matchLabelKeys"):
        raise ValueError(f"{where}.matchLabelKeys must not be set, as it has no effect on "
                         "default constraints")
    min_domains = raw.get("minDomains")
    if min_domains is not None and (not isinstance(min_domains, int) or min_domains <= 0):
        raise ValueError(f"{where}.minDomains must be greater than 0")
    if min_domains is not None and when != DO_NOT_SCHEDULE:
        raise ValueError(f"{where}.minDomains can only be set when whenUnsatisfiable is "
                         f"{DO_NOT_SCHEDULE!r}")
    return SpreadConstraint(
        topology_key=key, max_skew=skew, selector=LabelMatcher(nothing=True),
        when_unsatisfiable=when, min_domains=min_domains,
        node_affinity_policy=str(raw.get("nodeAffinityPolicy") or HONOR),
        node_taints_policy=str(raw.get("nodeTaintsPolicy") or IGNORE),
        default=True,
    )


def _spread(raw: Any, where: str) -> tuple[SpreadConstraint, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be a mapping with the field defaultConstraints")
    unknown = sorted(set(raw) - {"defaultConstraints"})
    if unknown:
        raise ValueError(f"unknown field {where}.{unknown[0]} (known: defaultConstraints)")
    listed = raw.get("defaultConstraints") or []
    if not isinstance(listed, list):
        raise ValueError(f"{where}.defaultConstraints must be a list")
    out: list[SpreadConstraint] = []
    for i, item in enumerate(listed):
        constraint = _constraint(item, f"{where}.defaultConstraints[{i}]")
        for j, earlier in enumerate(out):
            if (earlier.topology_key, earlier.when_unsatisfiable) == (
                    constraint.topology_key, constraint.when_unsatisfiable):
                raise ValueError(
                    f"{where}.defaultConstraints[{i}] is a duplicate of [{j}], "
                    f"{{{constraint.topology_key}, {constraint.when_unsatisfiable}}}")
        out.append(constraint)
    return tuple(out)


def parse_scheduler_config(text: str) -> SchedulerConfig:
    """``SCHEDULER_CONFIG`` read and validated (an empty text: no defaults). Raises
    ValueError naming the field, as Karpenter's strict decoding and validation do."""
    if not text.strip():
        return SchedulerConfig()
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"is not a YAML/JSON document ({' '.join(str(exc).split())})") from None
    if doc is None:
        return SchedulerConfig()
    if not isinstance(doc, Mapping):
        raise ValueError("must be a mapping with the field podTopologySpread")
    unknown = sorted(set(doc) - {"podTopologySpread", "profiles"})
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r} (known: podTopologySpread, profiles)")
    defaults = {DEFAULT_SCHEDULER: _spread(doc.get("podTopologySpread"), "podTopologySpread")}
    profiles = doc.get("profiles") or []
    if not isinstance(profiles, list):
        raise ValueError("profiles must be a list of {schedulerName, podTopologySpread}")
    for i, profile in enumerate(profiles):
        where = f"profiles[{i}]"
        if not isinstance(profile, Mapping):
            raise ValueError(f"{where} must be a mapping")
        unknown = sorted(set(profile) - {"schedulerName", "podTopologySpread"})
        if unknown:
            raise ValueError(f"unknown field {where}.{unknown[0]} "
                             "(known: schedulerName, podTopologySpread)")
        name = profile.get("schedulerName")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.schedulerName must be set")
        if name == DEFAULT_SCHEDULER:
            raise ValueError(f"{where}.schedulerName {name!r}: the default scheduler's "
                             "defaults are podTopologySpread's")
        if name in defaults:
            raise ValueError(f"{where}.schedulerName {name!r} is listed twice")
        defaults[name] = _spread(profile.get("podTopologySpread"),
                                 f"{where}.podTopologySpread")
    return SchedulerConfig(defaults)


def default_selector(
    labels: Mapping[str, str],
    services: Iterable[Mapping[str, str] | None],
    owner: tuple[str, Mapping[str, Any]] | None,
) -> Mapping[str, Any] | None:
    """The label selector kube-scheduler deduces for a pod with ``labels``: from the
    ``spec.selector`` of every Service of its namespace (None: a Service without one,
    which selects nothing), and from its controller as (kind, ``spec.selector``); None
    when nothing can be deduced (the pod then gets no default constraint)."""
    match_labels: dict[str, str] = {}
    for selector in services:
        if selector is None:
            continue
        if all(labels.get(k) == v for k, v in selector.items()):
            match_labels.update(selector)  # a later Service wins a key, as labels.Merge
    expressions: list[dict[str, Any]] = []
    if owner is not None:
        kind, owned = owner
        if kind == "ReplicationController":
            match_labels.update({str(k): str(v) for k, v in (owned or {}).items()})
        elif kind in ("ReplicaSet", "StatefulSet") and owned:
            pairs: Mapping[str, str] = owned.get("matchLabels") or {}
            for key, value in pairs.items():
                expressions.append({"key": key, "operator": "In", "values": [value]})
            listed: Sequence[Mapping[str, Any]] = owned.get("matchExpressions") or ()
            expressions.extend(dict(e) for e in listed)
    if not match_labels and not expressions:
        return None
    return {"matchLabels": match_labels, "matchExpressions": expressions}


def with_defaults(
    pod: Pod, constraints: Sequence[SpreadConstraint], selector: Mapping[str, Any] | None
) -> Pod:
    """``pod`` with ``constraints`` selecting ``selector``, if it has no spread
    constraints of its own and a selector was deduced; else ``pod`` itself."""
    if not constraints or pod.spread_constraints or selector is None:
        return pod
    matcher = LabelMatcher.from_dict(selector)
    return dataclasses.replace(pod, spread_constraints=tuple(
        dataclasses.replace(c, selector=matcher) for c in constraints))
