"""Topology groups: pod counts per domain for spread constraints and pod (anti-)affinity.

A :class:`TopologyGroup` answers "how many pods matching this selector (in these
namespaces) are in each domain of this topology key" -- the ``SELECT COUNT(*) ... GROUP
BY domain`` behind every spread constraint and affinity term. Pods with the same rule
share one group, so a 500-replica deployment with self anti-affinity keeps one group,
not 500 (as in Karpenter's topologygroup.go).

Three kinds:

* ``spread`` -- a topology spread constraint; counts the selected pods on nodes that pass
  the constraint's node filter (nodeAffinityPolicy / nodeTaintsPolicy).
* ``affinity`` / ``anti-affinity`` -- a pod's own affinity term; counts selected pods.
* inverse ``anti-affinity`` -- counts the pods that *carry* a required anti-affinity term,
  so that pods they select stay out of their domains (anti-affinity works both ways).

Counting only ever goes up during a simulation, which is what lets the simulator treat
some rejections as permanent (see ``Allowed.permanent``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from karpy.apis.labels import LABEL_HOSTNAME
from karpy.scheduling.requirements import Requirement, Requirements
from karpy.scheduling.selectors import LabelMatcher
from karpy.scheduling.taints import NodeTaint, Toleration, untolerated

__all__ = ["AFFINITY", "ANTI_AFFINITY", "SPREAD", "NodeFilter", "TopologyGroup"]

SPREAD: Final = "topology spread"
AFFINITY: Final = "pod affinity"
ANTI_AFFINITY: Final = "pod anti-affinity"

UNLIMITED: Final = 1 << 30


@dataclass(frozen=True, slots=True)
class NodeFilter:
    """Which nodes a spread constraint counts (kube-scheduler's nodeInclusionPolicy).

    With ``affinity_honored`` only nodes matching the pod's nodeSelector and one of its
    required node-affinity terms count; with ``taints_honored`` only nodes whose taints
    the pod tolerates.
    """

    terms: tuple[Requirements, ...]
    tolerations: frozenset[Toleration]
    affinity_honored: bool = True
    taints_honored: bool = False

    def matches(
        self,
        taints: Iterable[NodeTaint],
        requirements: Requirements,
        allow_undefined: frozenset[str] = frozenset(),
    ) -> bool:
        """Whether a node with these taints and label requirements counts."""
        if (
            self.affinity_honored
            and self.terms
            and not any(requirements.compatible(t, allow_undefined) is None for t in self.terms)
        ):
            return False
        if self.taints_honored:
            tolerations = tuple(self.tolerations)
            if untolerated(taints, tolerations, prefer=False) is not None:
                return False
        return True

    def tolerates(self, taints: Iterable[NodeTaint]) -> bool:
        """Whether the pod tolerates ``taints`` (only asked when taints are honoured)."""
        return untolerated(taints, tuple(self.tolerations), prefer=False) is None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """The identity of a topology group: pods with equal specs share the group."""

    kind: str
    key: str
    namespaces: frozenset[str]
    selector: LabelMatcher
    max_skew: int = UNLIMITED
    min_domains: int | None = None
    node_filter: NodeFilter | None = None
    inverse: bool = False
    default: bool = False
    """A spread the pods' scheduler gives them by default (SCHEDULER_CONFIG)."""


@dataclass(slots=True, eq=False)
class TopologyGroup:
    """Pod counts per domain for one rule. ``counts`` holds every known domain, empty
    ones included (they matter for a spread's minimum)."""

    spec: GroupSpec
    counts: dict[str, int] = field(default_factory=dict)
    nonzero: int = 0
    version: int = 0
    _min_cache: dict[Requirement, tuple[int, int]] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """SPREAD, AFFINITY or ANTI_AFFINITY."""
        return self.spec.kind

    @property
    def key(self) -> str:
        """The topology key."""
        return self.spec.key

    @property
    def is_hostname(self) -> bool:
        """Whether each node is its own domain (``kubernetes.io/hostname``)."""
        return self.spec.key == LABEL_HOSTNAME

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod in ``namespace`` with ``labels`` is counted by this group."""
        if namespace not in self.spec.namespaces:
            return False
        return self.spec.selector.matches(labels)

    def register(self, domain: str) -> None:
        """Make a domain known (with no pods yet)."""
        if domain not in self.counts:
            self.counts[domain] = 0
            self.version += 1

    def record(self, domain: str, count: int = 1) -> None:
        """Count ``count`` more pods in ``domain``."""
        if count <= 0:
            return
        before = self.counts.get(domain, 0)
        if before == 0:
            self.nonzero += 1
        self.counts[domain] = before + count
        self.version += 1

    def count(self, domain: str) -> int:
        """Pods counted in ``domain``."""
        return self.counts.get(domain, 0)

    def min_count(self, pod_domains: Requirement) -> int:
        """The global minimum a spread's skew is measured against: the smallest count
        over the domains the pod may use; 0 for hostname (a new node is an empty domain)
        and when fewer than ``minDomains`` domains are eligible."""
        if self.is_hostname:
            return 0
        cached = self._min_cache.get(pod_domains)
        if cached is not None and cached[0] == self.version:
            return cached[1]
        eligible = 0
        lowest = UNLIMITED
        for domain, count in self.counts.items():
            if pod_domains.has(domain):
                eligible += 1
                if count < lowest:
                    lowest = count
        if lowest == UNLIMITED:
            lowest = 0
        min_domains = self.spec.min_domains
        if min_domains is not None and eligible < min_domains:
            lowest = 0
        self._min_cache[pod_domains] = (self.version, lowest)
        return lowest

    def any_compatible_nonempty(self, pod_domains: Requirement) -> bool:
        """Whether some domain the pod may use already has a selected pod."""
        if self.nonzero == 0:
            return False
        if pod_domains.complement and not pod_domains.values and pod_domains.gte is None:
            return True
        return any(c > 0 and pod_domains.has(d) for d, c in self.counts.items())

    def describe(self) -> str:
        """For error messages: the rule and the current counts."""
        spec = self.spec
        rule = f"{spec.kind} on {spec.key} (selector {spec.selector}"
        if spec.kind == SPREAD:
            rule += f", maxSkew {spec.max_skew}"
            if spec.min_domains is not None:
                rule += f", minDomains {spec.min_domains}"
            if spec.default:
                rule += ", a default constraint of SCHEDULER_CONFIG"
        rule += ")"
        if spec.key != LABEL_HOSTNAME:
            shown = ", ".join(f"{d}={c}" for d, c in sorted(self.counts.items())[:10])
            rule += f", counts {{{shown}}}"
        return rule
