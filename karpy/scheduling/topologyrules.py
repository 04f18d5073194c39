"""Topology rules during one solve: spread constraints and pod (anti-)affinity.

:class:`TopologyRules` builds the :class:`~karpy.scheduling.topology.TopologyGroup` of
every rule a pending pod (or a running pod's required anti-affinity) has, seeded with
the domains NodePools could create and the pods already running; narrows a
candidate's requirements to the domains the rules allow (:meth:`TopologyRules.check`);
and counts pods as they are placed (:meth:`TopologyRules.record`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import partial
from types import MappingProxyType
from typing import Any

from karpy.apis.labels import LABEL_HOSTNAME
from karpy.scheduling.capacity import Claim, Reject
from karpy.scheduling.catalog import Catalog
from karpy.scheduling.node import ExistingNode
from karpy.scheduling.pod import AffinityTerm, Pod, SpreadConstraint
from karpy.scheduling.reqcache import RequirementCache
from karpy.scheduling.requirements import Requirement, Requirements
from karpy.scheduling.signature import Signature
from karpy.scheduling.taints import NodeTaint
from karpy.scheduling.topology import (
    AFFINITY,
    ANTI_AFFINITY,
    SPREAD,
    UNLIMITED,
    GroupSpec,
    NodeFilter,
    TopologyGroup,
)

__all__ = ["TopologyRules", "node_domain"]

Universe = dict[str, dict[str, list[tuple[NodeTaint, ...]]]]


def _exists(key: str) -> Requirement:
    return Requirement(key, True, frozenset())


def node_domain(node: ExistingNode, key: str) -> str | None:
    """The node's domain for topology key ``key`` (None: the node has none)."""
    if key == LABEL_HOSTNAME:
        return node.hostname
    return node.labels.get(key)


def _pod_keys(node: ExistingNode) -> frozenset[str]:
    return frozenset(p.key for p in node.pods)


def _anti_affine_pods(node: ExistingNode) -> tuple[Pod, ...]:
    """The node's running pods with required pod anti-affinity (usually none)."""
    return tuple(p for p in node.pods if not p.terminal and p.pod_anti_affinity)


def _label_sets(
    node: ExistingNode, pending_keys: AbstractSet[str]
) -> dict[tuple[str, frozenset[tuple[str, str]]], int]:
    """How many of the node's running pods carry each (namespace, label set); a pod
    being deleted no longer counts (Karpenter's IgnoredForTopology)."""
    counts: dict[tuple[str, frozenset[tuple[str, str]]], int] = {}
    for pod in node.pods:
        if pod.terminal or pod.terminating or pod.key in pending_keys:
            continue
        key = (pod.namespace, frozenset(pod.labels.items()))
        counts[key] = counts.get(key, 0) + 1
    return counts


class TopologyRules:
    """The topology groups of one solve and the rules they enforce.

    ``universe`` gives every domain a NodePool could create per label key
    (:meth:`Simulator.universe`); it is only asked for once a group is needed.
    """

    def __init__(
        self,
        *,
        pods: Sequence[Pod],
        nodes: Sequence[ExistingNode],
        pending_keys: set[str],
        namespaces: Mapping[str, Mapping[str, str]],
        universe: Callable[[], Universe],
        prefer: bool,
        well_known: frozenset[str],
        requirements: RequirementCache,
    ) -> None:
        self.namespaces = namespaces
        self.universe = universe
        self.prefer = prefer
        self.well_known = well_known
        self.reqs = requirements
        self.groups: dict[GroupSpec, TopologyGroup] = {}
        self.inverse: dict[GroupSpec, TopologyGroup] = {}
        self.topology_keys: set[str] = set()
        self._setup(pods, nodes, pending_keys)

    # ------------------------------------------------------------------ setup

    def _namespaces_for(self, term: AffinityTerm) -> frozenset[str]:
        if term.namespace_selector is None:
            return term.namespaces
        selected = {
            name
            for name, labels in self.namespaces.items()
            if term.namespace_selector.matches(labels)
        }
        return frozenset(selected) | term.namespaces

    def spread_spec(self, pod: Pod, spread: SpreadConstraint) -> GroupSpec:
        """The group spec of one of the pod's spread constraints."""
        if pod.required_node_terms:
            terms = tuple(pod.node_selector.intersect(t) for t in pod.required_node_terms)
        elif pod.node_selector:
            terms = (pod.node_selector,)
        else:
            terms = ()
        node_filter = NodeFilter(
            terms=terms,
            tolerations=frozenset(pod.tolerations),
            affinity_honored=spread.node_affinity_policy != "Ignore",
            taints_honored=spread.node_taints_policy == "Honor",
        )
        return GroupSpec(
            kind=SPREAD,
            key=spread.topology_key,
            namespaces=frozenset((pod.namespace,)),
            selector=spread.selector,
            max_skew=spread.max_skew,
            min_domains=spread.min_domains,
            node_filter=node_filter,
            default=spread.default,
        )

    def term_spec(self, kind: str, term: AffinityTerm, inverse: bool = False) -> GroupSpec:
        """The group spec of a pod (anti-)affinity term."""
        return GroupSpec(
            kind=kind,
            key=term.topology_key,
            namespaces=self._namespaces_for(term),
            selector=term.selector,
            inverse=inverse,
        )

    def _group(self, spec: GroupSpec) -> TopologyGroup:
        registry = self.inverse if spec.inverse else self.groups
        group = registry.get(spec)
        if group is None:
            group = TopologyGroup(spec)
            registry[spec] = group
            self.topology_keys.add(spec.key)
            universe = self.universe().get(spec.key, {})
            node_filter = spec.node_filter
            for domain, taint_sets in universe.items():
                if (
                    node_filter is not None
                    and node_filter.taints_honored
                    and not any(node_filter.tolerates(ts) for ts in taint_sets)
                ):
                    continue
                group.register(domain)
            eligible: dict[str, str] = {}
            for node, node_req, domain_of_node in self._node_domains(spec.key):
                if node_filter is not None and not node_filter.matches(
                    node.effective_taints(), node_req
                ):
                    continue
                group.register(domain_of_node)
                eligible[node.name] = domain_of_node
            if not spec.inverse and eligible:
                for namespace, labels, placements in self._running_by_labels():
                    if not group.selects(namespace, labels):
                        continue
                    for node_name, count in placements:
                        found = eligible.get(node_name)
                        if found is not None:
                            group.record(found, count)
        return group

    def _node_domains(self, key: str) -> list[tuple[ExistingNode, Requirements, str]]:
        """Existing nodes that have a domain for ``key``, with their label requirements."""
        cached = self._domains_by_key.get(key)
        if cached is None:
            cached = []
            for node in self._nodes:
                domain = node_domain(node, key)
                if domain is not None:
                    cached.append((node, node.requirements, domain))
            self._domains_by_key[key] = cached
        return cached

    _existing_by_labels: list[tuple[str, Mapping[str, str], list[tuple[str, int]]]] | None

    def _running_by_labels(
        self,
    ) -> list[tuple[str, Mapping[str, str], list[tuple[str, int]]]]:
        """Running pods by (namespace, labels): a group matches each label set once.
        Counted when the first group needs it: pods without topology rules never do."""
        if self._existing_by_labels is None:
            by_labels: dict[tuple[str, frozenset[tuple[str, str]]], dict[str, int]] = {}
            pending_keys = self._pending_keys
            for node in self._nodes:
                if pending_keys.isdisjoint(node.memo("pod-keys", partial(_pod_keys, node))):
                    counts = node.memo("label-sets", partial(_label_sets, node, frozenset()))
                else:
                    counts = _label_sets(node, pending_keys)
                for label_key, count in counts.items():
                    per_node = by_labels.setdefault(label_key, {})
                    per_node[node.name] = per_node.get(node.name, 0) + count
            self._existing_by_labels = [
                (namespace, MappingProxyType(dict(labels)), list(per_node.items()))
                for (namespace, labels), per_node in by_labels.items()
            ]
        return self._existing_by_labels

    def _setup(
        self, pods: Sequence[Pod], nodes: Sequence[ExistingNode], pending_keys: set[str]
    ) -> None:
        self._domains_by_key: dict[str, list[tuple[ExistingNode, Requirements, str]]] = {}
        self._nodes = nodes
        self._pending_keys = pending_keys
        self._existing_by_labels = None
        # Groups for every rule a pending pod has (preferences included: they stay in
        # place while relaxed, so counts are complete whichever rules end up applying).
        seen: set[tuple[Any, ...]] = set()
        for pod in pods:
            if pod.signature in seen:
                continue
            seen.add(pod.signature)
            for spread in pod.spread_constraints:
                if spread.required or self.prefer:
                    self._group(self.spread_spec(pod, spread))
            affinity = pod.pod_affinity + (pod.preferred_pod_affinity if self.prefer else ())
            for term in affinity:
                self._group(self.term_spec(AFFINITY, term))
            anti = pod.pod_anti_affinity + (pod.preferred_pod_anti_affinity if self.prefer else ())
            for term in anti:
                self._group(self.term_spec(ANTI_AFFINITY, term))
            for term in pod.pod_anti_affinity:
                self._group(self.term_spec(ANTI_AFFINITY, term, inverse=True))
        # Existing pods' required anti-affinity keeps new pods out of their domains.
        for node in nodes:
            for pod in node.memo("anti-affine-pods", partial(_anti_affine_pods, node)):
                if pod.key in pending_keys:
                    continue
                for term in pod.pod_anti_affinity:
                    group = self._group(self.term_spec(ANTI_AFFINITY, term, inverse=True))
                    domain = node_domain(node, term.topology_key)
                    if domain is not None:
                        group.record(domain)

    def bind(self, sig: Signature) -> None:
        """Attach to ``sig`` the groups it owns, is kept out by, and is counted in."""
        pod = sig.pod
        namespace, labels = pod.namespace, pod.labels
        owned: list[tuple[TopologyGroup, bool]] = []
        for term in sig.affinity:
            group = self.groups[self.term_spec(AFFINITY, term)]
            owned.append((group, group.selects(namespace, labels)))
        for term in sig.anti_affinity:
            group = self.groups[self.term_spec(ANTI_AFFINITY, term)]
            owned.append((group, group.selects(namespace, labels)))
        for spread in sig.spreads:
            group = self.groups[self.spread_spec(pod, spread)]
            owned.append((group, group.selects(namespace, labels)))
        sig.owned = owned
        sig.inverse = [g for g in self.inverse.values() if g.selects(namespace, labels)]
        sig.inverse_owned = [
            self.inverse[self.term_spec(ANTI_AFFINITY, t, inverse=True)]
            for t in pod.pod_anti_affinity
        ]
        sig.counted = [g for g in self.groups.values() if g.selects(namespace, labels)]

    # ------------------------------------------------------------------ checking

    def check(
        self,
        sig: Signature,
        host: str,
        reqs: Requirements,
        catalog: Catalog | None,
        mask: int,
        explain: bool,
    ) -> tuple[Requirements, int] | Reject:
        """Narrow ``reqs`` by the signature's topology rules for a node with hostname
        ``host``; returns the narrowed requirements and how many pods of the signature
        the rules allow there, or why not. With a ``catalog``, a domain is only chosen
        if some instance type in ``mask`` still fits there."""
        kmax = UNLIMITED
        strict = sig.strict
        spreads: list[tuple[TopologyGroup, bool]] = []
        for group, self_sel in sig.owned:
            spec = group.spec
            kind = spec.kind
            if kind is SPREAD and not group.is_hostname:
                spreads.append((group, self_sel))
                continue
            if group.is_hostname:
                count = group.counts.get(host, 0)
                if kind is SPREAD:
                    if count + self_sel > spec.max_skew:
                        return Reject(self._why(group, explain), True)
                    if self_sel:
                        kmax = min(kmax, spec.max_skew - count)
                elif kind is AFFINITY:
                    pod_domains = strict.get(LABEL_HOSTNAME)
                    if pod_domains is not None and not pod_domains.has(host):
                        return Reject(self._why(group, explain), True)
                    if count == 0 and not (
                        self_sel
                        and not group.any_compatible_nonempty(
                            pod_domains or _exists(LABEL_HOSTNAME)
                        )
                    ):
                        return Reject(self._why(group, explain), False)
                else:
                    if count > 0:
                        return Reject(self._why(group, explain), True)
                    if self_sel:
                        kmax = 1
                continue
            result = self._domain_rule(group, self_sel, sig, reqs, catalog, mask, explain)
            if isinstance(result, Reject):
                return result
            reqs, limit = result
            kmax = min(kmax, limit)
        for group in sig.inverse:
            feeds = group in sig.inverse_owned
            if group.is_hostname:
                if group.counts.get(host, 0) > 0:
                    return Reject(self._why(group, explain, inverse=True), True)
                if feeds:
                    kmax = 1
                continue
            result = self._domain_rule(group, feeds, sig, reqs, catalog, mask, explain)
            if isinstance(result, Reject):
                return result
            reqs, limit = result
            kmax = min(kmax, limit)
        for group, self_sel in spreads:
            result = self._domain_rule(group, self_sel, sig, reqs, catalog, mask, explain)
            if isinstance(result, Reject):
                return result
            reqs, limit = result
            kmax = min(kmax, limit)
        return reqs, kmax

    def _domain_rule(
        self,
        group: TopologyGroup,
        self_sel: bool,
        sig: Signature,
        reqs: Requirements,
        catalog: Catalog | None,
        mask: int,
        explain: bool,
    ) -> tuple[Requirements, int] | Reject:
        key = group.spec.key
        counts = group.counts
        node_req = reqs.get(key)
        if node_req is None:
            candidates = sorted(counts)
        elif not node_req.complement:
            candidates = sorted(d for d in node_req.values if d in counts)
        else:
            candidates = sorted(d for d in counts if node_req.has(d))
        pod_domains = sig.strict.get(key) or _exists(key)
        kind = group.spec.kind
        if kind is SPREAD:
            spec = group.spec
            # nodeAffinityPolicy: Ignore counts every domain, not just the pod's.
            honored = spec.node_filter is None or spec.node_filter.affinity_honored
            lowest = group.min_count(pod_domains if honored else _exists(key))
            valid = sorted(
                (counts[d], d) for d in candidates if counts[d] + self_sel - lowest <= spec.max_skew
            )
            for count, domain in valid:
                narrowed = self._choose(reqs, node_req, key, (domain,), catalog, mask)
                if narrowed is not None:
                    limit = spec.max_skew + lowest - count if self_sel else UNLIMITED
                    return narrowed, limit
            return Reject(self._why(group, explain, domains=candidates), False)
        if kind is AFFINITY:
            options = tuple(d for d in candidates if counts[d] > 0 and pod_domains.has(d))
            if options:
                narrowed = self._choose(reqs, node_req, key, options, catalog, mask)
                if narrowed is not None:
                    return narrowed, UNLIMITED
                return Reject(self._why(group, explain, domains=candidates), False)
            if self_sel and not group.any_compatible_nonempty(pod_domains):
                for domain in candidates:
                    if not pod_domains.has(domain):
                        continue
                    narrowed = self._choose(reqs, node_req, key, (domain,), catalog, mask)
                    if narrowed is not None:
                        return narrowed, UNLIMITED
            return Reject(self._why(group, explain, domains=candidates), False)
        options = tuple(d for d in candidates if counts[d] == 0 and pod_domains.has(d))
        if not options:
            return Reject(self._why(group, explain, domains=candidates), True)
        if self_sel:
            # The pod will count in this group: commit it to one empty domain, so the
            # others stay free for its peers (Karpenter blocks every domain the
            # NodeClaim could still use, which launches one such pod per batch).
            for domain in options:
                narrowed = self._choose(reqs, node_req, key, (domain,), catalog, mask)
                if narrowed is not None:
                    return narrowed, 1
            return Reject(self._why(group, explain, domains=candidates), False)
        narrowed = self._choose(reqs, node_req, key, options, catalog, mask)
        if narrowed is None:
            return Reject(self._why(group, explain, domains=candidates), False)
        return narrowed, UNLIMITED

    def _choose(
        self,
        reqs: Requirements,
        node_req: Requirement | None,
        key: str,
        domains: tuple[str, ...],
        catalog: Catalog | None,
        mask: int,
    ) -> Requirements | None:
        if node_req is not None and not node_req.complement and node_req.values == set(domains):
            return reqs
        narrowed = self.reqs.narrow(reqs, key, domains)
        if catalog is not None and not (mask & catalog.compatible_mask(narrowed)):
            return None
        return narrowed

    def _why(
        self,
        group: TopologyGroup,
        explain: bool,
        *,
        inverse: bool = False,
        domains: Sequence[str] = (),
    ) -> str:
        if not explain:
            return ""
        if inverse:
            return (
                f"existing pods' {group.spec.kind} on {group.spec.key} "
                f"(selector {group.spec.selector}) keeps this pod out"
            )
        text = f"unsatisfiable {group.describe()}"
        if domains:
            text += f" for domains [{', '.join(domains[:10])}]"
        return text

    def allowed_domains(self, sig: Signature) -> list[tuple[str, frozenset[str]]]:
        """For the signature's zone-like spread and affinity rules, the domains an
        existing node may be in right now: a cheap filter before the full check."""
        out = []
        for group, self_sel in sig.owned:
            kind = group.spec.kind
            if group.is_hostname or kind is ANTI_AFFINITY:
                continue
            key = group.spec.key
            counts = group.counts
            pod_domains = sig.strict.get(key) or _exists(key)
            if kind is SPREAD:
                spec = group.spec
                honored = spec.node_filter is None or spec.node_filter.affinity_honored
                lowest = group.min_count(pod_domains if honored else _exists(key))
                allowed = frozenset(
                    d for d, c in counts.items() if c + self_sel - lowest <= spec.max_skew
                )
            else:
                allowed = frozenset(d for d, c in counts.items() if c > 0 and pod_domains.has(d))
                if not allowed:
                    if not (self_sel and not group.any_compatible_nonempty(pod_domains)):
                        continue
                    allowed = frozenset(d for d in counts if pod_domains.has(d))
            out.append((key, allowed))
        return out

    # ------------------------------------------------------------------ recording

    def record(
        self,
        sig: Signature,
        count: int,
        host: str,
        reqs: Requirements,
        taints: Sequence[NodeTaint],
        claim: bool,
    ) -> None:
        """Count ``count`` pods of ``sig`` placed on the node or NodeClaim ``host``."""
        allow = self.well_known if claim else frozenset()
        for group in sig.counted:
            node_filter = group.spec.node_filter
            if node_filter is not None and not node_filter.matches(taints, reqs, allow):
                continue
            if group.is_hostname:
                group.record(host, count)
            elif group.spec.kind is ANTI_AFFINITY:
                self._record_possible(group, reqs, count)
            else:
                requirement = reqs.get(group.spec.key)
                domain = None if requirement is None else requirement.single()
                if domain is not None:
                    group.record(domain, count)
        for group in sig.inverse_owned:
            if group.is_hostname:
                group.record(host, count)
            else:
                self._record_possible(group, reqs, count)

    @staticmethod
    def _record_possible(group: TopologyGroup, reqs: Requirements, count: int) -> None:
        # Anti-affinity must block every domain the pod may still end up in.
        requirement = reqs.get(group.spec.key)
        if requirement is None:
            domains: Iterable[str] = list(group.counts)
        elif requirement.complement:
            domains = [d for d in group.counts if requirement.has(d)]
        else:
            domains = requirement.values
        for domain in domains:
            group.record(domain, count)

    def record_narrowed(self, claim: Claim, old: Requirements, new: Requirements) -> None:
        """Count the claim's earlier pods in the domain a key just narrowed down to
        (they could not be counted while the domain was open)."""
        if not claim.sig_counts:
            return
        for key in self.topology_keys:
            after = new.get(key)
            if after is None or after is old.get(key):
                continue
            domain = after.single()
            if domain is None:
                continue
            before = old.get(key)
            if before is not None and before.single() is not None:
                continue
            taints = claim.template.taints
            for sig, count in claim.sig_counts.items():
                for group in sig.counted:
                    if group.spec.key != key or group.spec.kind is ANTI_AFFINITY:
                        continue
                    node_filter = group.spec.node_filter
                    if node_filter is not None and not node_filter.matches(
                        taints, new, self.well_known
                    ):
                        continue
                    group.record(domain, count)
