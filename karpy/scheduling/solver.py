"""One :meth:`Simulator.solve` call: its state, the main loop over runs of
interchangeable pods, and each placement step -- existing nodes first (first fit), then
the NodeClaims planned so far (round-robin), then a new NodeClaim.

The module docstring of :mod:`karpy.scheduling.simulator` explains the algorithm; the
pieces a step relies on live beside this module: :mod:`~karpy.scheduling.capacity`
(what pods go on), :mod:`~karpy.scheduling.checks` (whether they fit),
:mod:`~karpy.scheduling.topologyrules`, :mod:`~karpy.scheduling.relaxation` and
:mod:`~karpy.scheduling.assembly` (the results).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any, Final

from karpy.apis.labels import CAPACITY_TYPE_RESERVED, LABEL_CAPACITY_TYPE, LABEL_HOSTNAME
from karpy.scheduling import resources as res
from karpy.scheduling.assembly import build_results
from karpy.scheduling.capacity import (
    Budget,
    Claim,
    Node,
    NodeGroup,
    Reject,
    Template,
    group_nodes,
    prepare_nodes,
)
from karpy.scheduling.catalog import iter_bits as _bits
from karpy.scheduling.checks import Checker, taint_reason
from karpy.scheduling.daemons import daemon_groups
from karpy.scheduling.devicetracker import DeviceInputs, DeviceTracker
from karpy.scheduling.effectivezone import effective_zone
from karpy.scheduling.improve import Improver
from karpy.scheduling.instancetype import Offering
from karpy.scheduling.node import ExistingNode
from karpy.scheduling.nodepool import NODES, NodePoolTemplate
from karpy.scheduling.pod import Pod
from karpy.scheduling.relaxation import Signatures
from karpy.scheduling.reqcache import RequirementCache
from karpy.scheduling.requirements import IN, Requirement, Requirements
from karpy.scheduling.reservations import (
    ReservationManager,
    ReservedOfferingError,
    reservation_label_keys,
)
from karpy.scheduling.results import Results
from karpy.scheduling.signature import Relaxation, Signature
from karpy.scheduling.taints import PREFER_NO_SCHEDULE
from karpy.scheduling.topologyrules import TopologyRules
from karpy.scheduling.volumelimits import VolumeTracker

if TYPE_CHECKING:
    from karpy.scheduling.simulator import Simulator

__all__ = ["Solve"]

IMPROVEMENT_FLOOR: Final = 1000
"""Evaluations the improvement stage may spend on any plan, besides those per pod."""
# Evaluations per pod for the exchange stage (improve.Improver._swap), on top of what
# single moves leave of their budget.
SWAP_PER_POD: Final = 10


class Solve:
    """The state of one :meth:`Simulator.solve` call."""

    def __init__(
        self,
        simulator: Simulator,
        pods: Sequence[Pod],
        nodes: Sequence[ExistingNode],
        namespaces: Mapping[str, Mapping[str, str]],
        in_flight: Mapping[str, int] | None = None,
        devices: DeviceInputs | None = None,
    ) -> None:
        self.sim = simulator
        options = simulator.options
        self.well_known = options.well_known_labels
        prefer = options.preference_policy == "Respect"
        self.pods = list(pods)
        names = set(simulator._base_resources)
        for pod in self.pods:
            names.update(pod.requests)
        self.names = tuple(sorted(names))
        self.vector = {name: i for i, name in enumerate(self.names)}
        self.size = len(self.names)
        pending_keys = {p.key for p in self.pods}
        self.shared_budgets: dict[str, Budget] = {}
        self.templates = [self._template(i, pool) for i, pool in enumerate(simulator.nodepools)]
        self.reservations: ReservationManager | None = None
        self.strict_reservations = options.reserved_offering_mode == "Strict"
        if options.reserved_capacity and any(t.catalog.reserved_mask for t in self.templates):
            self.reservations = ReservationManager(
                (it for t in self.templates for it in t.catalog.types), in_flight
            )
        prefer_no_schedule = any(t.prefer_taints for t in self.templates) or any(
            t.effect == PREFER_NO_SCHEDULE for n in nodes for t in n.taints
        )
        self.claims: list[Claim] = []
        self.hostnames = 0
        # Only a solve with DRA pods tracks devices; the others pay nothing for it.
        self.devices = (
            DeviceTracker(devices or DeviceInputs())
            if any(p.device_claims for p in self.pods) else None
        )
        # Likewise volume attachment limits, for a solve with pods that attach volumes.
        self.volumes = (
            VolumeTracker(nodes, (it for t in self.templates for it in t.catalog.types))
            if any(p.volumes for p in self.pods) else None
        )
        requirements = RequirementCache(self.well_known)
        self.topology = TopologyRules(
            pods=self.pods,
            nodes=nodes,
            pending_keys=pending_keys,
            namespaces=namespaces,
            universe=simulator.universe,
            prefer=prefer,
            well_known=self.well_known,
            requirements=requirements,
        )
        self.requirements = requirements
        self.signatures = Signatures(
            self.topology, prefer=prefer, prefer_no_schedule=prefer_no_schedule
        )
        self.checker = Checker(
            requirements=requirements,
            topology=self.topology,
            min_vec=self.signatures.min_vec,
            names=self.names,
            strict_min_values=options.min_values_policy == "Strict",
        )
        self.nodes = prepare_nodes(
            nodes,
            daemonsets=simulator.daemonsets,
            pending_keys=pending_keys,
            vec=self._vec,
            size=self.size,
            layout=self.names,
        )
        self.node_groups = group_nodes(
            self.nodes, self.pods, self.topology.topology_keys, self.size
        )

    def _template(self, index: int, pool: NodePoolTemplate) -> Template:
        catalog = self.sim.catalog(pool, self.names)
        groups = daemon_groups(pool, catalog, self.sim.daemonsets, self.vector, self.well_known)
        # One Budget per ClusterLimit for the whole solve: every pool it covers spends it.
        for limit in pool.shared_limits:
            if limit.name not in self.shared_budgets:
                self.shared_budgets[limit.name] = Budget(limit.name, limit.limits, limit.usage)
        return Template(index, pool, catalog, groups, self.shared_budgets)

    def _vec(self, resources: Mapping[str, int]) -> list[int]:
        out = [0] * self.size
        vector = self.vector
        for name, amount in resources.items():
            index = vector.get(name)
            if index is not None:
                out[index] = amount
        return out

    # ------------------------------------------------------------------ main loop

    def run(self) -> Results:
        """Place every pod that fits somewhere; the results."""
        pods = self.pods
        if not pods:
            return self._results({})
        ranks: dict[Any, int] = {}
        minimums = self.signatures.base_min
        vectors = []
        for pod in pods:
            vec = self._vec(pod.requests)
            vectors.append(vec)
            signature = pod.signature
            if signature not in ranks:
                ranks[signature] = len(ranks)
                minimums[signature] = list(vec)
            else:
                minimum = minimums[signature]
                for i, amount in enumerate(vec):
                    if amount < minimum[i]:
                        minimum[i] = amount
        cpu = self.vector[res.CPU]
        memory = self.vector[res.MEMORY]
        order = sorted(
            range(len(pods)),
            key=lambda i: (
                -vectors[i][cpu],
                -vectors[i][memory],
                ranks[pods[i].signature],
                vectors[i],
                i,
            ),
        )
        runs: list[tuple[Signature, list[int], list[Pod]]] = []
        previous_key: tuple[Any, ...] | None = None
        for i in order:
            pod = pods[i]
            key = (ranks[pod.signature], vectors[i])
            if key == previous_key:
                runs[-1][2].append(pod)
            else:
                runs.append((self.signatures.get(pod, Relaxation()), vectors[i], [pod]))
                previous_key = key
        # before any placement: the zones as the cluster stands (Karpenter's Solve)
        pending_by_zone = self._pending_by_zone(runs)
        errors: dict[str, tuple[Pod, str]] = {}
        queue = runs
        while queue:
            failed: list[tuple[Signature, list[int], list[Pod]]] = []
            progress = False
            for base, vec, group in queue:
                placed = self._place_run(base, vec, group, errors)
                if placed:
                    progress = True
                if placed < len(group):
                    failed.append((base, vec, group[placed:]))
            if not progress or not failed:
                break
            queue = failed
        self._improve()
        self._pin_reservations()
        return replace(self._results(errors), pending_by_zone=pending_by_zone)

    @staticmethod
    def _pending_by_zone(
        runs: Sequence[tuple[Signature, list[int], list[Pod]]],
    ) -> dict[str, int]:
        counts: dict[str, int] = {}
        zones: dict[int, str] = {}
        for sig, _, pods in runs:
            unbound = sum(1 for pod in pods if not pod.node_name)
            if not unbound:
                continue
            zone = zones.get(id(sig))
            if zone is None:
                zone = zones[id(sig)] = effective_zone(sig)
            counts[zone] = counts.get(zone, 0) + unbound
        return counts

    def _improve(self) -> None:
        """Lower the plan's price by moving pods between its new NodeClaims."""
        per_pod = self.sim.options.improvement_budget
        if per_pod <= 0 or len(self.claims) < 2:
            return
        if self.devices is not None:
            # The improver moves pods between NodeClaims without the device tracker:
            # a plan with DRA pods keeps its first-fit placement (a documented gap).
            return
        pods = sum(len(c.pods) for c in self.claims)
        Improver(
            self.claims,
            requirements=self.requirements,
            topology=self.topology,
            strict_min_values=self.checker.strict_min_values,
            # a fixed allowance on top, so that small plans are improved all the way
            budget=per_pod * pods + IMPROVEMENT_FLOOR,
            swap_budget=SWAP_PER_POD * pods,
        ).run()

    def _place_run(
        self,
        base: Signature,
        vec: list[int],
        pods: list[Pod],
        errors: dict[str, tuple[Pod, str]],
    ) -> int:
        start = 0
        total = len(pods)
        while start < total:
            sig: Signature | None = base
            reason = ""
            while sig is not None:
                outcome = self._place(sig, vec, pods, start)
                if isinstance(outcome, int):
                    for pod in pods[start : start + outcome]:
                        errors.pop(pod.key, None)
                    start += outcome
                    break
                reason = outcome
                # A reserved offering error is not relaxed: the pod may get a slot back
                # later in this solve, or in the next round (Karpenter's trySchedule).
                sig = None if isinstance(outcome, ReservedOfferingError) else (
                    self.signatures.relax(sig)
                )
            else:
                for pod in pods[start:]:
                    errors[pod.key] = (pod, reason)
                return start
        return start

    def _results(self, errors: Mapping[str, tuple[Pod, str]]) -> Results:
        results = self._built(errors)
        devices = self.devices
        if devices is None:
            return results
        return replace(results, new_nodeclaims=tuple(
            replace(plan, dra_drivers=devices.drivers(plan.hostname))
            for plan in results.new_nodeclaims))

    def _built(self, errors: Mapping[str, tuple[Pod, str]]) -> Results:
        reservations = self.reservations
        return build_results(
            self.claims,
            self.nodes,
            errors,
            names=self.names,
            well_known=self.well_known,
            max_instance_types=self.sim.options.max_instance_types,
            held=reservations.holds if reservations is not None else None,
            reservations=reservations.used() if reservations is not None else None,
        )

    # ------------------------------------------------------------------ reservations

    def _offerings_to_reserve(
        self, claim: Claim, reqs: Requirements, mask: int
    ) -> list[Offering] | ReservedOfferingError:
        """The reserved offerings ``claim`` would hold with ``reqs`` and ``mask``: every
        compatible one whose reservation has a slot for it (Karpenter reserves
        pessimistically). In strict mode, why the pod must wait instead."""
        manager = self.reservations
        if manager is None:
            return []
        compatible = claim.template.catalog.reserved_compatible(mask, reqs)
        offerings = [o for o in compatible if manager.can_reserve(claim.hostname, o)]
        if self.strict_reservations and not offerings:
            if compatible:
                return ReservedOfferingError(
                    "one or more instance types with compatible reserved offerings are "
                    "available, but could not be reserved"
                )
            if manager.holds(claim.hostname):
                return ReservedOfferingError(
                    "satisfying updated nodeclaim constraints would remove all compatible "
                    "reserved offering options"
                )
        return offerings

    def _hold(self, claim: Claim, offerings: list[Offering]) -> None:
        manager = self.reservations
        if manager is None:
            return
        manager.reserve(claim.hostname, offerings)
        manager.release(claim.hostname, keep={o.reservation_id for o in offerings})

    def _pin_reservations(self) -> None:
        """Narrow every NodeClaim holding reservations to them (Karpenter's
        FinalizeScheduling): capacity type ``reserved``, the reservation-ID label ``In``
        the reservations it holds, and only the instance types that can launch there,
        so that it cannot launch past a reservation's slots. Slots the cost-improvement
        stage made unusable (it moved pods and narrowed the types) are given back."""
        manager = self.reservations
        if manager is None:
            return
        for claim in self.claims:
            held = manager.holds(claim.hostname)
            if not held:
                continue
            catalog = claim.template.catalog
            compatible = [
                o
                for o in catalog.reserved_compatible(claim.mask, claim.req)
                if o.reservation_id in held
            ]
            ids = sorted({o.reservation_id for o in compatible})
            manager.release(claim.hostname, keep=ids if claim.pods else ())
            if not ids or not claim.pods:
                continue
            pinned = claim.req.add(
                Requirement.new(LABEL_CAPACITY_TYPE, IN, (CAPACITY_TYPE_RESERVED,))
            )
            for key in reservation_label_keys(catalog.types[i] for i in _bits(claim.mask)):
                pinned = pinned.add(Requirement.new(key, IN, ids))
            claim.req = pinned
            claim.mask = catalog.reserved_types_mask(claim.mask, pinned)

    # ------------------------------------------------------------------ placing

    def _place(self, sig: Signature, vec: list[int], pods: list[Pod], start: int) -> int | str:
        """Place up to all of ``pods[start:]`` (one run) in one step; the count placed
        (>0), or why none fits anywhere."""
        want = len(pods) - start
        devices = self.devices if pods[start].device_claims else None
        if devices is not None:
            want = 1  # each DRA pod is allocated its own devices, one at a time
        volumes = self.volumes if pods[start].volumes else None
        if volumes is not None:
            want = 1  # each pod's own claims count against the node's volume limits
        # 1. existing nodes, first fit
        if self.node_groups:
            placed = self._place_existing(sig, vec, pods, start, want)
            if placed:
                return placed
        # 2. planned NodeClaims, round-robin
        claims = sig.claims
        if sig.claims_seen < len(self.claims):
            claims.extend(self.claims[sig.claims_seen :])
            sig.claims_seen = len(self.claims)
        size = len(claims)
        if size:
            cursor = sig.cursor % size
            for offset in range(size):
                position = cursor + offset
                if position >= size:
                    position -= size
                claim = claims[position]
                if claim is None:
                    continue
                outcome = self.checker.check_claim(claim, sig, vec, 1, False)
                if isinstance(outcome, Reject):
                    if outcome.permanent:
                        claims[position] = None
                        sig.claims_dead += 1
                    continue
                _, reqs, mask = outcome
                if volumes is not None:
                    kept = volumes.check_claim(
                        pods[start], claim.hostname, claim.template.catalog.types, mask)
                    if isinstance(kept, str):
                        continue
                    mask = kept
                allocations = None
                if devices is not None:
                    found = devices.check_claim(
                        pods[start], claim, claim.template.catalog.types, mask)
                    if isinstance(found, str):
                        continue
                    mask, allocations = found
                offerings = self._offerings_to_reserve(claim, reqs, mask)
                if isinstance(offerings, ReservedOfferingError):
                    continue
                self._commit_claim(claim, sig, vec, pods[start : start + 1], reqs, mask)
                if volumes is not None:
                    volumes.commit_claim(pods[start], claim.hostname)
                    claim.volume_mask &= mask
                if devices is not None and allocations is not None:
                    devices.commit_claim(claim, allocations, claim.hostname)
                self._hold(claim, offerings)
                sig.cursor = position + 1
                self._compact(sig)
                return 1
            self._compact(sig)
        # 3. a new NodeClaim
        reasons: list[str] = []
        for template in self.templates:
            created = self._new_claim(template, sig, vec, want)
            if isinstance(created, str):
                reasons.append(f'nodepool "{template.pool.name}": {created}')
                continue
            new, count, reqs, mask = created
            if volumes is not None:
                kept = volumes.check_claim(pods[start], new.hostname, template.catalog.types,
                                           mask)
                if isinstance(kept, str):
                    reasons.append(f'nodepool "{template.pool.name}": {kept}')
                    continue
                mask = kept
            allocations = None
            if devices is not None:
                found = devices.check_claim(pods[start], new, template.catalog.types, mask)
                if isinstance(found, str):
                    reasons.append(f'nodepool "{template.pool.name}": {found}')
                    continue
                mask, allocations = found
            offerings = self._offerings_to_reserve(new, reqs, mask)
            if isinstance(offerings, ReservedOfferingError):
                # No fall back to a lower-weight NodePool: this one has reserved capacity
                # the pod could use once a slot frees up (Karpenter).
                reasons.append(f'nodepool "{template.pool.name}": {offerings}')
                return ReservedOfferingError("; ".join(reasons))
            self._open(new)
            self._commit_claim(new, sig, vec, pods[start : start + count], reqs, mask)
            if volumes is not None:
                volumes.commit_claim(pods[start], new.hostname)
                new.volume_mask &= mask
            if devices is not None and allocations is not None:
                devices.commit_claim(new, allocations, new.hostname)
            self._hold(new, offerings)
            return count
        if not self.templates:
            # Karpenter's words when every NodePool's instance types were filtered out
            return "nodepool requirements filtered out all available instance types"
        return "; ".join(reasons)

    def _place_existing(
        self, sig: Signature, vec: list[int], pods: list[Pod], start: int, want: int
    ) -> int:
        """First fit on existing nodes (in their order); the count placed, or 0."""
        domains = self.topology.allowed_domains(sig)
        groups = self.node_groups
        dead_groups = sig.dead_groups
        dead_nodes = sig.dead_nodes
        need = [max(a, 0) for a in vec]
        heap: list[tuple[int, int, int]] = []
        for number, group in enumerate(groups):
            if number in dead_groups:
                continue
            if domains and any(group.labels.get(k) not in allowed for k, allowed in domains):
                continue
            if not self._group_usable(sig, group):
                dead_groups.add(number)
                continue
            slot = group.index.find(need)
            if slot is not None:
                heap.append((group.members[slot].order, number, slot))
        heapify(heap)
        while heap:
            _, number, slot = heappop(heap)
            group = groups[number]
            node = group.members[slot]
            if node.order not in dead_nodes:
                result = self.checker.check_node(node, sig, vec, want)
                allocation = None
                if not isinstance(result, Reject) and self.volumes is not None \
                        and pods[start].volumes:
                    reason = self.volumes.check_node(pods[start], node.node.name)
                    if reason is not None:
                        result = Reject(reason, False)
                if not isinstance(result, Reject) and self.devices is not None \
                        and pods[start].device_claims:
                    found = self.devices.check_node(pods[start], node.node.name)
                    if isinstance(found, str):
                        result = Reject(found, False)
                    else:
                        allocation = found
                if not isinstance(result, Reject):
                    count, reqs = result
                    self._commit_node(node, sig, vec, pods[start : start + count], reqs)
                    if self.volumes is not None and pods[start].volumes:
                        self.volumes.commit_node(pods[start], node.node.name)
                    if self.devices is not None and allocation is not None:
                        self.devices.commit_node(pods[start], node.node.name, allocation)
                    group.index.update(slot, node.available)
                    return count
                if result.permanent:
                    dead_nodes.add(node.order)
            following = group.index.find(need, slot + 1)
            if following is not None:
                heappush(heap, (group.members[following].order, number, following))
        return 0

    def _group_usable(self, sig: Signature, group: NodeGroup) -> bool:
        if group.taints and taint_reason(sig, group.taints) is not None:
            return False
        return not isinstance(
            self.requirements.merge_node(group.req, sig.requirements.without(LABEL_HOSTNAME)),
            str,
        )

    def _compact(self, sig: Signature) -> None:
        claims = sig.claims
        if sig.claims_dead > 32 and sig.claims_dead * 2 > len(claims):
            live = [c for c in claims if c is not None]
            cursor_claim = None
            if claims:
                for offset in range(len(claims)):
                    candidate = claims[(sig.cursor + offset) % len(claims)]
                    if candidate is not None:
                        cursor_claim = candidate
                        break
            sig.claims = live
            sig.claims_dead = 0
            sig.cursor = live.index(cursor_claim) if cursor_claim is not None else 0

    def _new_claim(
        self, template: Template, sig: Signature, vec: list[int], want: int
    ) -> tuple[Claim, int, Requirements, int] | str:
        catalog = template.catalog
        mask = catalog.full
        if template.limited:
            for budget in template.budgets:
                nodes_left = budget.nodes_left()
                if nodes_left is not None and nodes_left <= 0:
                    if budget.label:
                        return f"node limit reached (ClusterLimit {budget.label} limits.nodes)"
                    return "node limit reached (limits.nodes)"
            for budget in template.budgets:
                remaining = budget.remaining()
                mask &= catalog.within_mask(remaining)
                if not mask:
                    left = res.describe({k: max(v, 0) for k, v in remaining.items()})
                    if budget.label:
                        return (f"all instance types exceed the limits of ClusterLimit "
                                f"{budget.label} (remaining {left})")
                    return f"all instance types exceed the NodePool's limits (remaining {left})"
        claim = Claim(template, f"hostname-placeholder-{self.hostnames + 1:04d}", mask, self.size)
        outcome = self.checker.check_claim(claim, sig, vec, want, True)
        if isinstance(outcome, Reject):
            reason = outcome.reason or "no room"
            if mask != catalog.full:
                excluded = catalog.full.bit_count() - mask.bit_count()
                left = res.describe({k: max(v, 0) for k, v in template.remaining().items()})
                whose = "the NodePool's limits" if template.pool.limits else "its ClusterLimits"
                if template.pool.limits and template.pool.shared_limits:
                    whose = "the NodePool's and its ClusterLimits' limits"
                reason += (
                    f"; {excluded} larger instance types were excluded by {whose} "
                    f"(remaining {left})"
                )
            return reason
        count, reqs, fit_mask = outcome
        return claim, count, reqs, fit_mask

    def _open(self, claim: Claim) -> None:
        self.hostnames += 1
        claim.index = len(self.claims)
        self.claims.append(claim)
        for budget in claim.template.budgets:
            budget.claims += 1

    def _commit_node(
        self, node: Node, sig: Signature, vec: list[int], pods: list[Pod], reqs: Requirements
    ) -> None:
        count = len(pods)
        node.placed.extend(pods)
        available = node.available
        for i, amount in enumerate(vec):
            if amount:
                available[i] -= amount * count
        if sig.host_ports:
            node.ports.extend(sig.host_ports)
        self.topology.record(sig, count, node.hostname, reqs, node.taints, claim=False)

    def _commit_claim(
        self,
        claim: Claim,
        sig: Signature,
        vec: list[int],
        pods: list[Pod],
        reqs: Requirements,
        mask: int,
    ) -> None:
        count = len(pods)
        old = claim.req
        if reqs is not old:
            self.topology.record_narrowed(claim, old, reqs)
            claim.req = reqs
        claim.mask = mask
        total = claim.total
        for i, amount in enumerate(vec):
            if amount:
                total[i] += amount * count
        claim.pods.extend(pods)
        claim.runs.append((sig, vec, count))
        if sig.host_ports:
            claim.ports.extend(sig.host_ports)
        claim.sig_counts[sig] = claim.sig_counts.get(sig, 0) + count
        template = claim.template
        if template.limited:
            names = template.limit_names
            reserved = template.catalog.max_capacity(mask, names)
            for budget in template.budgets:
                spent = budget.reserved
                for name in budget.limits:
                    if name != NODES:
                        spent[name] = (
                            spent.get(name, 0) - claim.reserved.get(name, 0) + reserved[name]
                        )
            claim.reserved = reserved
        self.topology.record(sig, count, claim.hostname, reqs, template.taints, claim=True)
