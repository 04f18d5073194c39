"""The scheduling simulator: where pending pods go, and which NodeClaims to create.

:class:`Simulator` holds what changes rarely (NodePools with their instance types,
DaemonSets, options) and keeps the per-instance-type indexes built from them across
calls; :meth:`Simulator.solve` takes the pods to place and the nodes that exist and
returns :class:`~karpy.scheduling.results.Results`. It is pure and deterministic: no
I/O, no clock, no randomness, and the same input gives the same output.

How a solve works (docs/scheduling.md has the long version):

1. Pods are sorted largest first (CPU, then memory, as Karpenter's queue does) and cut
   into *runs* of interchangeable pods: equal :attr:`Pod.signature` and equal requests.
2. Each run is placed a step at a time. A step tries existing nodes first (first fit),
   then the NodeClaims planned so far (round-robin per signature, which keeps their
   sizes even), then a new NodeClaim from the NodePools in weight order -- a new
   NodeClaim takes as many pods of the run as fit at once.
3. A pod that fits nowhere has its preferences relaxed one at a time
   (:mod:`karpy.scheduling.signature`); pods that still fit nowhere are retried after
   the others, as long as that makes progress, and otherwise get a reason.
4. The cost-improvement stage (:mod:`karpy.scheduling.improve`) moves pods between the
   new NodeClaims so that they fit cheaper instance types, within a budget of
   evaluations (``SchedulerOptions.improvement_budget``).

What keeps the cost per pod flat as the batch grows: constraints are computed once per
signature, instance types are filtered with cached bitmasks, requirement intersections
are cached by value, topology counts are kept per shared group, and a candidate that
rejects a signature for a reason that can only get worse (a taint, a requirement, a
host port, anti-affinity, no room even for the smallest pod) is dropped from that
signature's list for good instead of being re-checked for every pod.

This module is the entry point; one solve runs in :mod:`karpy.scheduling.solver`.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final, Literal

from karpy.apis.labels import WELL_KNOWN_LABELS
from karpy.scheduling import resources as res
from karpy.scheduling.catalog import Catalog
from karpy.scheduling.devicetracker import DeviceInputs
from karpy.scheduling.instancetype import InstanceType
from karpy.scheduling.node import ExistingNode
from karpy.scheduling.nodepool import NodePoolTemplate
from karpy.scheduling.pod import Pod
from karpy.scheduling.results import Results
from karpy.scheduling.solver import Solve
from karpy.scheduling.taints import NodeTaint

__all__ = ["SchedulerOptions", "Simulator", "solve"]

MAX_INSTANCE_TYPES: Final = 600
IMPROVEMENT_BUDGET: Final = 2


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    """Knobs that match Karpenter's settings.

    ``preference_policy="Ignore"`` drops preferred affinities and ScheduleAnyway spreads
    up front instead of trying them. ``min_values_policy="BestEffort"`` launches even
    when the compatible instance types cannot satisfy a requirement's ``minValues``.
    ``well_known_labels`` are the labels a NodePool need not define for a pod to ask
    for them (instance types define them); providers add their own.
    ``improvement_budget`` bounds the cost-improvement stage after first fit
    (:mod:`karpy.scheduling.improve`): evaluations per pod on a new NodeClaim (plus a
    fixed 1,000 per solve); 0 turns the stage off. A count of evaluations rather than
    a clock keeps plans deterministic.
    ``reserved_capacity`` (Karpenter's ReservedCapacity gate) hands out the slots of
    reserved offerings (:mod:`karpy.scheduling.reservations`); off, reserved offerings
    are priced like any other and no NodeClaim is pinned to a reservation.
    ``reserved_offering_mode="Strict"`` (the provisioner's) makes a pod that could use
    a full reservation wait for the next round instead of falling back to on-demand or
    spot in this solve; "Fallback" (what-if simulations) lets it fall back.
    """

    preference_policy: Literal["Respect", "Ignore"] = "Respect"
    min_values_policy: Literal["Strict", "BestEffort"] = "Strict"
    max_instance_types: int = MAX_INSTANCE_TYPES
    well_known_labels: frozenset[str] = WELL_KNOWN_LABELS
    improvement_budget: int = IMPROVEMENT_BUDGET
    reserved_capacity: bool = True
    reserved_offering_mode: Literal["Strict", "Fallback"] = "Fallback"


class Simulator:
    """Plans where pods go. Build once per set of NodePools, call :meth:`solve` often.

    ``nodepools`` carry their instance types; ``daemonsets`` are the pods DaemonSets
    would run (:meth:`Pod.from_daemonset_dict`).
    """

    def __init__(
        self,
        nodepools: Sequence[NodePoolTemplate],
        *,
        daemonsets: Sequence[Pod] = (),
        options: SchedulerOptions | None = None,
    ) -> None:
        self.options = options or SchedulerOptions()
        self.nodepools = sorted(nodepools, key=lambda p: (-p.weight, p.name))
        self.daemonsets = tuple(daemonsets)
        names: set[str] = {res.CPU, res.MEMORY, res.PODS}
        for pool in self.nodepools:
            for it in pool.instance_types:
                names.update(it.allocatable)
        for daemon in self.daemonsets:
            names.update(daemon.requests)
        self._base_resources = names
        self._catalogs: dict[tuple[str, tuple[str, ...]], Catalog] = {}
        self._universe: dict[str, dict[str, list[tuple[NodeTaint, ...]]]] | None = None

    def catalog(self, pool: NodePoolTemplate, resource_names: tuple[str, ...]) -> Catalog:
        """The (cached) mask index of a NodePool's instance types."""
        key = (pool.name, resource_names)
        catalog = self._catalogs.get(key)
        if catalog is None or catalog.types != list(_by_price(pool.instance_types)):
            catalog = Catalog(
                _by_price(pool.instance_types), resource_names, self.options.well_known_labels
            )
            self._catalogs[key] = catalog
        return catalog

    def universe(self) -> dict[str, dict[str, list[tuple[NodeTaint, ...]]]]:
        """Every domain a NodePool could create per label key, with the taints of the
        pools that offer it (Karpenter's topology domain groups)."""
        if self._universe is None:
            universe: dict[str, dict[str, list[tuple[NodeTaint, ...]]]] = {}
            for pool in self.nodepools:
                seen: set[tuple[str, str]] = set()
                for it in pool.instance_types:
                    reqs = pool.requirements.intersect(it.requirements)
                    for key, requirement in reqs.items():
                        if requirement.complement:
                            continue
                        for value in requirement.values:
                            seen.add((key, value))
                for key, requirement in pool.requirements.items():
                    if not requirement.complement:
                        for value in requirement.values:
                            seen.add((key, value))
                for key, value in seen:
                    universe.setdefault(key, {}).setdefault(value, []).append(pool.taints)
            self._universe = universe
        return self._universe

    def solve(
        self,
        pods: Sequence[Pod],
        *,
        nodes: Sequence[ExistingNode] = (),
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        reservations_in_flight: Mapping[str, int] | None = None,
        devices: DeviceInputs | None = None,
    ) -> Results:
        """Place ``pods`` on ``nodes`` (existing and in-flight capacity) or new
        NodeClaims. ``namespaces`` maps namespace names to their labels, for affinity
        terms with a ``namespaceSelector``. ``reservations_in_flight`` counts, per
        reservation ID, the slots NodeClaims not launched yet hold
        (:func:`karpy.scheduling.reservations.held_in_flight`). ``devices`` is what
        the cluster says of DRA devices, for pods with ``device_claims``
        (:mod:`karpy.scheduling.devicetracker`)."""
        with _collection_paused():
            return Solve(
                self, pods, nodes, namespaces or {}, reservations_in_flight, devices
            ).run()


def solve(
    pods: Sequence[Pod],
    *,
    nodepools: Sequence[NodePoolTemplate],
    nodes: Sequence[ExistingNode] = (),
    daemonsets: Sequence[Pod] = (),
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    options: SchedulerOptions | None = None,
) -> Results:
    """One-shot :meth:`Simulator.solve` (builds the instance-type indexes each call)."""
    simulator = Simulator(nodepools, daemonsets=daemonsets, options=options)
    return simulator.solve(pods, nodes=nodes, namespaces=namespaces)


@contextmanager
def _collection_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for one solve.

    A solve allocates hundreds of thousands of small objects (topology counts,
    requirement merges, request vectors) that live until it returns and hold few
    reference cycles. Their allocation keeps triggering collections, and each full one
    walks the whole heap -- in the operator, every cached Kubernetes object -- to find
    almost nothing: about a tenth of a 20,000-pod solve. Reference counting still frees
    what a solve drops; cycles wait for the first collection after it. A caller that
    turned the collector off keeps it off.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _by_price(instance_types: Iterable[InstanceType]) -> list[InstanceType]:
    def key(it: InstanceType) -> tuple[float, str]:
        price = it.cheapest_price()
        return (float("inf") if price is None else price, it.name)

    return sorted(instance_types, key=key)
