"""Result assembly: turning a finished solve's planned NodeClaims, placements on
existing nodes and unplaced pods into :class:`~karpy.scheduling.results.Results`.

A planned NodeClaim becomes a :class:`NodeClaimPlan` with its final requirements (the
cheapest instance types, at most ``max_instance_types``, keeping ``minValues``), its
requests (pods plus DaemonSet overhead) and its labels.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from karpy.apis.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INITIALIZED,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_REGISTERED,
    RESTRICTED_LABELS,
)
from karpy.scheduling.capacity import Claim, Node
from karpy.scheduling.catalog import Catalog
from karpy.scheduling.instancetype import InstanceType
from karpy.scheduling.pod import Pod
from karpy.scheduling.requirements import IN, Requirement, Requirements
from karpy.scheduling.results import ExistingNodePlan, NodeClaimPlan, PodError, Results

__all__ = ["SIMULATION_ONLY", "build_results"]

SIMULATION_ONLY: Final = frozenset({LABEL_REGISTERED, LABEL_INITIALIZED, LABEL_HOSTNAME})
"""Labels the simulation gives a planned NodeClaim that its plan does not carry."""


def build_results(
    claims: Sequence[Claim],
    nodes: Sequence[Node],
    errors: Mapping[str, tuple[Pod, str]],
    *,
    names: tuple[str, ...],
    well_known: frozenset[str],
    max_instance_types: int,
    held: Callable[[str], frozenset[str]] | None = None,
    reservations: Mapping[str, tuple[int, int]] | None = None,
) -> Results:
    """The :class:`Results` of a solve: a plan per NodeClaim with pods, the pods placed
    on each existing node, and an error per pod that fits nowhere. ``names`` are the
    resource names of the claims' request vectors; ``held`` gives the reservations a
    claim (by hostname) holds, ``reservations`` the slots used of each."""
    # Many NodeClaims end with the same instance types: share the (large) type list and
    # requirement between them.
    cache: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    plans = [
        _plan(claim, cache, names, well_known, max_instance_types, held)
        for claim in claims
        if claim.pods
    ]
    existing = tuple(
        ExistingNodePlan(node=n.node.name, pods=tuple(n.placed)) for n in nodes if n.placed
    )
    return Results(
        new_nodeclaims=tuple(plans),
        existing_nodes=existing,
        errors=tuple(PodError(pod, reason) for pod, reason in errors.values()),
        reservations=dict(reservations or {}),
    )


def _plan(
    claim: Claim,
    cache: dict[tuple[Any, ...], tuple[Any, ...]],
    names: tuple[str, ...],
    well_known: frozenset[str],
    max_instance_types: int,
    held: Callable[[str], frozenset[str]] | None,
) -> NodeClaimPlan:
    template = claim.template
    catalog = template.catalog
    reqs = claim.req.without(*SIMULATION_ONLY)
    pricing = catalog.pricing(reqs)
    cache_key = (template.index, claim.mask, id(pricing), reqs.has_min_values() and reqs)
    cached = cache.get(cache_key)
    if cached is None:
        ordered = _truncate(
            catalog, catalog.cheapest_first(claim.mask, reqs), reqs, max_instance_types
        )
        types = tuple(catalog.types[i] for i in ordered)
        chosen_mask = claim.mask & pricing.mask
        if len(ordered) < chosen_mask.bit_count():
            chosen_mask = 0
            for i in ordered:
                chosen_mask |= 1 << i
        type_req = template.pool.requirements.get(LABEL_INSTANCE_TYPE)
        min_values = None if type_req is None else type_req.min_values
        type_names = frozenset(it.name for it in types)
        capacity_types = sorted(ct for ct, m in pricing.capacity_types.items() if m & chosen_mask)
        type_requirement = Requirement(
            LABEL_INSTANCE_TYPE, False, type_names, None, None, min_values
        )
        cached = (
            types,
            type_requirement,
            Requirement.new(LABEL_CAPACITY_TYPE, IN, capacity_types) if capacity_types else None,
            _relaxed_min_values(reqs.add(type_requirement), types),
        )
        cache[cache_key] = cached
    types, type_requirement, capacity_requirement, relaxed = cached
    final = reqs.add(type_requirement)
    if capacity_requirement is not None:
        final = final.add(capacity_requirement)
    for key, min_values in relaxed:
        final = final.without(key).add(final[key].with_min_values(min_values))
    overhead = None
    for group in template.groups:
        if group.mask & claim.mask:
            overhead = (
                list(group.overhead)
                if overhead is None
                else [min(a, b) for a, b in zip(overhead, group.overhead, strict=True)]
            )
    total = list(claim.total)
    if overhead is not None:
        total = [a + b for a, b in zip(total, overhead, strict=True)]
    requests = {name: total[i] for i, name in enumerate(names) if total[i]}
    labels = dict(template.pool.labels)
    for key, requirement in final.items():
        if key in well_known or key in RESTRICTED_LABELS or key in SIMULATION_ONLY:
            continue
        if not requirement.complement and requirement.values:
            labels.setdefault(key, min(requirement.values))
    labels[LABEL_NODEPOOL] = template.pool.name
    return NodeClaimPlan(
        nodepool=template.pool.name,
        pods=tuple(claim.pods),
        requirements=final,
        instance_types=types,
        requests=requests,
        labels=labels,
        taints=template.pool.taints,
        startup_taints=template.pool.startup_taints,
        hostname=claim.hostname,
        narrowed=claim.narrowed,
        min_values_relaxed=bool(relaxed),
        reservation_ids=tuple(sorted(held(claim.hostname))) if held is not None else (),
    )


def _relaxed_min_values(
    reqs: Requirements, types: Sequence[InstanceType]
) -> tuple[tuple[str, int | None], ...]:
    """The keys whose ``minValues`` the chosen types do not span, with the number of
    values they do span (Karpenter's MIN_VALUES_POLICY=BestEffort; under Strict
    the solver only keeps claims that span them, so this is empty).

    A requirement none of the types has a value for loses its ``minValues`` (the CRDs
    refuse 0)."""
    relaxed: list[tuple[str, int | None]] = []
    for requirement in reqs.values():
        wanted = requirement.min_values
        if wanted is None:
            continue
        values: set[str] = set()
        for it in types:
            theirs = it.requirements.get(requirement.key)
            if theirs is not None and not theirs.complement:
                # only allowed values count (Karpenter v1.15.0 / v1.14.3)
                values.update(v for v in theirs.values if requirement.has(v))
        if len(values) < wanted:
            relaxed.append((requirement.key, len(values) or None))
    return tuple(relaxed)


def _truncate(catalog: Catalog, ordered: list[int], reqs: Requirements, limit: int) -> list[int]:
    """The cheapest types, at most ``limit``, keeping ``minValues``: types that bring a
    value a requirement still needs are taken first."""
    if len(ordered) <= limit:
        return ordered
    rank = {index: position for position, index in enumerate(ordered)}
    chosen: set[int] = set()
    for requirement in reqs.values():
        needed = requirement.min_values
        if needed is None:
            continue
        values: set[str] = set()
        for index in ordered:
            if len(values) >= needed:
                break
            theirs = catalog.types[index].requirements.get(requirement.key)
            allowed = {v for v in theirs.values if requirement.has(v)} if theirs else set()
            if theirs is None or theirs.complement or allowed <= values:
                continue
            values |= allowed
            chosen.add(index)
    for index in ordered:
        if len(chosen) >= limit:
            break
        chosen.add(index)
    return sorted(chosen, key=rank.__getitem__)
