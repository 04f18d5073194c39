"""Whether pods of one signature fit a candidate -- an existing node or a NodeClaim being
planned -- how many of them, with what narrowed requirements and instance types, or why
not (:class:`~karpy.scheduling.capacity.Reject`, permanent when the answer can only get
worse for that signature).

Checks never change anything; committing a placement is the solve's job.
"""

from __future__ import annotations

from collections.abc import Sequence

from karpy.apis.labels import LABEL_HOSTNAME
from karpy.scheduling import resources as res
from karpy.scheduling.assembly import SIMULATION_ONLY
from karpy.scheduling.capacity import PERM, TEMP, Claim, Node, Reject, Template
from karpy.scheduling.catalog import Catalog, iter_bits
from karpy.scheduling.pod import HostPort
from karpy.scheduling.reqcache import RequirementCache
from karpy.scheduling.requirements import Requirements
from karpy.scheduling.signature import Signature
from karpy.scheduling.taints import NodeTaint, untolerated
from karpy.scheduling.topology import UNLIMITED
from karpy.scheduling.topologyrules import TopologyRules

__all__ = ["Checker", "taint_reason"]


def taint_reason(sig: Signature, taints: Sequence[NodeTaint]) -> str | None:
    """The first of ``taints`` the signature does not tolerate, as a reason."""
    tolerations = sig.tolerations
    prefer = not sig.relaxation.tolerate_prefer_no_schedule
    taint = untolerated(taints, tolerations, prefer=prefer)
    return None if taint is None else f"did not tolerate taint {taint}"


def _ports_clash(ours: Sequence[HostPort], theirs: Sequence[HostPort]) -> bool:
    return any(p.conflicts(q) for p in ours for q in theirs)


class Checker:
    """Fit checks for one solve.

    ``min_vec`` gives each signature's smallest pod requests (to tell "no room for this
    pod" from "no room for any pod of the signature"); ``names`` the resource names of
    the solve's vectors.
    """

    def __init__(
        self,
        *,
        requirements: RequirementCache,
        topology: TopologyRules,
        min_vec: dict[Signature, list[int]],
        names: tuple[str, ...],
        strict_min_values: bool,
    ) -> None:
        self.reqs = requirements
        self.topology = topology
        self.min_vec = min_vec
        self.names = names
        self.strict_min_values = strict_min_values
        self._min_values_cache: dict[tuple[int, Requirements, int], str | None] = {}

    def _fit(self, template: Template, need: list[int], sig: Signature) -> int:
        catalog = template.catalog
        if template.simple_fit:
            return catalog.fit_mask(need)
        mask = 0
        for group in template.groups:
            if sig.host_ports and any(
                p.conflicts(q) for p in sig.host_ports for q in group.host_ports
            ):
                continue
            total = [a + b for a, b in zip(need, group.overhead, strict=True)]
            mask |= group.mask & catalog.fit_mask(total)
        return mask

    def check_node(
        self, node: Node, sig: Signature, vec: list[int], want: int
    ) -> tuple[int, Requirements] | Reject:
        """How many (at most ``want``) pods of ``sig`` fit on an existing node, and the
        node's requirements narrowed by their topology rules; or a bare :class:`Reject`."""
        # Room first: it is the cheapest test and the most common "no" on a busy node.
        available = node.available
        room = UNLIMITED
        for i, amount in enumerate(vec):
            if amount > 0:
                fit = available[i] // amount
                if fit < room:
                    room = fit
                    if fit <= 0:
                        break
        if room <= 0:
            minimum = self.min_vec[sig]
            permanent = any(a > 0 and a > available[i] for i, a in enumerate(minimum))
            return PERM if permanent else TEMP
        taints = node.taints
        if taints:
            reason = taint_reason(sig, taints)
            if reason is not None:
                return PERM
        if sig.host_ports and _ports_clash(sig.host_ports, node.ports):
            return PERM
        merged = self.reqs.merge_node(node.req, sig.requirements)
        if isinstance(merged, str):
            return PERM
        alternatives = sig.pod.volume_requirements or (None,)
        permanent = True
        for volume in alternatives:
            reqs = merged
            if volume is not None:
                combined = self.reqs.merge_node(merged, volume)
                if isinstance(combined, str):
                    continue
                reqs = combined
            limit = room
            if sig.owned or sig.inverse:
                result = self.topology.check(sig, node.hostname, reqs, None, 0, False)
                if isinstance(result, Reject):
                    permanent = permanent and result.permanent
                    continue
                reqs, topology_limit = result
                limit = min(limit, topology_limit)
            if sig.host_ports:
                limit = 1
            return min(limit, want), reqs
        return PERM if permanent else TEMP

    def check_claim(
        self,
        claim: Claim,
        sig: Signature,
        vec: list[int],
        want: int,
        explain: bool,
    ) -> tuple[int, Requirements, int] | Reject:
        """How many (at most ``want``) pods of ``sig`` fit on a planned NodeClaim, with
        its narrowed requirements and the instance types that still fit; or why not
        (a reason only if ``explain``)."""
        template = claim.template
        if template.index in sig.tolerates:
            reason = sig.tolerates[template.index]
        else:
            reason = taint_reason(sig, template.taints)
            sig.tolerates[template.index] = reason
        if reason is not None:
            return Reject(reason, True)
        if sig.host_ports and _ports_clash(sig.host_ports, claim.ports):
            return Reject("a host port the pod needs is already taken on this node", True)
        hostname = sig.hostname
        if hostname is not None and not hostname.has(claim.hostname):
            return Reject(f"requires {hostname}, which a new node cannot have", True)
        merged = self.reqs.merge(claim.req, sig.claim_requirements)
        if isinstance(merged, str):
            return Reject(f"incompatible requirements, {merged}", True)
        alternatives = sig.pod.volume_requirements
        if not alternatives:
            return self._check_claim_reqs(claim, sig, vec, want, merged, explain)
        last: Reject = PERM
        permanent = True
        for volume in alternatives:
            pinned = volume.get(LABEL_HOSTNAME)
            if pinned is not None and not pinned.has(claim.hostname):
                # a local volume on an existing node: no new node can mount it
                last = Reject(f"its volume can only be mounted on {pinned}", True)
                continue
            combined = self.reqs.merge(merged, volume.without(LABEL_HOSTNAME))
            if isinstance(combined, str):
                last = Reject(f"incompatible volume requirements, {combined}", True)
                continue
            result = self._check_claim_reqs(claim, sig, vec, want, combined, explain)
            if not isinstance(result, Reject):
                return result
            last = result
            permanent = permanent and result.permanent
        return Reject(last.reason, permanent)

    def _check_claim_reqs(
        self,
        claim: Claim,
        sig: Signature,
        vec: list[int],
        want: int,
        reqs: Requirements,
        explain: bool,
    ) -> tuple[int, Requirements, int] | Reject:
        template = claim.template
        catalog = template.catalog
        compatible = claim.mask & catalog.compatible_mask(reqs)
        if not compatible:
            return Reject(self._types_reason(claim, reqs, vec, explain), True)
        total = claim.total
        need = [a + b for a, b in zip(total, vec, strict=True)]
        fitting = compatible & self._fit(template, need, sig)
        if not fitting:
            minimum = self.min_vec[sig]
            smallest = [a + b for a, b in zip(total, minimum, strict=True)]
            permanent = not (compatible & self._fit(template, smallest, sig))
            return Reject(self._types_reason(claim, reqs, vec, explain), permanent)
        limit = UNLIMITED
        if sig.owned or sig.inverse:
            result = self.topology.check(sig, claim.hostname, reqs, catalog, fitting, explain)
            if isinstance(result, Reject):
                return result
            narrowed, limit = result
            if narrowed is not reqs:
                reqs = narrowed
                fitting &= catalog.compatible_mask(reqs)
                if not fitting:
                    return Reject(self._types_reason(claim, reqs, vec, explain), False)
        if sig.host_ports:
            limit = 1
        count = min(want, limit)
        mask = fitting
        if count > 1:
            count, mask = self._most(template, sig, total, vec, count, fitting)
        if self.strict_min_values and reqs.has_min_values():
            reason = self._min_values_reason(catalog, reqs, mask)
            if reason is not None:
                if count == 1:
                    return Reject(reason, False)
                # Fewer pods leave more types: back off to the most pods that still
                # keep minValues (Karpenter places them on more NodeClaims instead).
                count, mask = self._most_keeping_min_values(
                    template, sig, total, vec, count, fitting, reqs
                )
                if not count:
                    return Reject(reason, False)
        return count, reqs, mask

    def _most_keeping_min_values(
        self,
        template: Template,
        sig: Signature,
        total: list[int],
        vec: list[int],
        count: int,
        fitting: int,
        reqs: Requirements,
    ) -> tuple[int, int]:
        """The largest k < count whose fitting types still satisfy ``minValues``
        (0 if not even one pod does), and those types. The types that fit k pods only
        shrink as k grows, so the distinct values do too: bisection is exact."""
        catalog = template.catalog

        def types_for(k: int) -> int:
            need = [a + k * b for a, b in zip(total, vec, strict=True)]
            return fitting & self._fit(template, need, sig)

        low, high, best, best_mask = 1, count - 1, 0, 0
        while low <= high:
            middle = (low + high) // 2
            mask = types_for(middle)
            if mask and self._min_values_reason(catalog, reqs, mask) is None:
                low, best, best_mask = middle + 1, middle, mask
            else:
                high = middle - 1
        return best, best_mask

    def _min_values_reason(self, catalog: Catalog, reqs: Requirements, mask: int) -> str | None:
        key = (id(catalog), reqs, mask)
        if key not in self._min_values_cache:
            self._min_values_cache[key] = catalog.min_values_reason(reqs, mask)
        return self._min_values_cache[key]

    def _most(
        self,
        template: Template,
        sig: Signature,
        total: list[int],
        vec: list[int],
        count: int,
        fitting: int,
    ) -> tuple[int, int]:
        """The largest k <= count such that k pods still fit, and the types they fit."""

        def fits(k: int) -> int:
            need = [a + k * b for a, b in zip(total, vec, strict=True)]
            return fitting & self._fit(template, need, sig)

        mask = fits(count)
        if mask:
            return count, mask
        low, high, best = 1, count - 1, fitting
        while low <= high:
            middle = (low + high) // 2
            found = fits(middle)
            if found:
                low, best = middle + 1, found
            else:
                high = middle - 1
        return high if high >= 1 else 1, best

    def _types_reason(self, claim: Claim, reqs: Requirements, vec: list[int], explain: bool) -> str:
        if not explain:
            return ""
        catalog = claim.template.catalog
        base = claim.mask
        by_reqs = base & catalog.requirements_mask(reqs)
        by_offering = base & catalog.offering_mask(reqs)
        need = [a + b for a, b in zip(claim.total, vec, strict=True)]
        by_fit = 0
        for group in claim.template.groups:
            total = [a + b for a, b in zip(need, group.overhead, strict=True)]
            by_fit |= group.mask & catalog.fit_mask(total)
        by_fit &= base
        requests = res.describe(
            {n: need[i] for i, n in enumerate(self.names) if need[i]},
        )
        overhead = max(
            (g for g in claim.template.groups), key=lambda g: sum(g.overhead), default=None
        )
        if overhead is not None and any(overhead.overhead):
            daemon = res.describe(
                {n: overhead.overhead[i] for i, n in enumerate(self.names) if overhead.overhead[i]}
            )
            requests += f" plus daemonset overhead {daemon}"
        failures = []
        if not by_reqs:
            failures.append("met the scheduling requirements")
        if not by_offering:
            failures.append("had an available offering compatible with them")
        if not by_fit:
            failures.append("had enough resources")
        if not failures:
            if not (by_reqs & by_offering):
                failures.append("met the requirements and had a compatible offering")
            elif not (by_reqs & by_fit & by_offering):
                failures.append("met the requirements, had an offering and enough resources")
        hint = ""
        usable = by_reqs & by_offering
        if usable and not (usable & by_fit):
            largest: dict[str, int] = {}
            for i in iter_bits(usable):
                for name, amount in catalog.types[i].allocatable.items():
                    if amount > largest.get(name, 0):
                        largest[name] = amount
            wanted = [n for i, n in enumerate(self.names) if need[i]]
            hint = (
                f"; the largest compatible instance type allocates {res.describe(largest, wanted)}"
            )
        return (
            f"no instance type {' or '.join(failures)} "
            f"(requirements: {reqs.without(*SIMULATION_ONLY)}; requests: {requests}{hint})"
        )
