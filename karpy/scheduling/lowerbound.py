"""A lower bound on what any plan must pay: the LP relaxation of the fleet to buy.

:func:`cost_floor` asks how cheaply a *fractional* fleet could hold the pods' total
requests: one variable per instance type (how many of it to buy, any non-negative real),
its price the cheapest available offering, subject to

* for every resource the pods request (cpu, memory, pods, GPUs ...): the fleet's
  allocatable is at least the sum of the requests;
* the fleet has at least as many nodes as a required hostname anti-affinity forces (pods
  that select each other with such a term need a node each).

Every real plan is a feasible point of this LP (round its node counts down to the
types it launches), so the optimum is a floor no plan can go below. It is a loose
floor: it ignores spreads, zone affinity, node selection, taints, NodePool limits,
DaemonSet overhead and that a pod cannot be split across nodes. The solver is scipy's
HiGHS (``scipy.optimize.linprog``), imported on first use so that importing
karpy.scheduling stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from karpy.apis.labels import LABEL_HOSTNAME
from karpy.scheduling import resources as res
from karpy.scheduling.nodepool import NodePoolTemplate
from karpy.scheduling.pod import AffinityTerm, Pod

__all__ = ["CostFloor", "cost_floor", "forced_nodes"]


@dataclass(frozen=True, slots=True)
class CostFloor:
    """The LP floor: the least $/h any plan for the pods can cost, the (fractional)
    number of nodes the LP buys, and how many of them anti-affinity forces."""

    price: float
    nodes: float
    forced_nodes: int


def forced_nodes(pods: Sequence[Pod]) -> int:
    """The most pods that must each have a node of their own: pods carrying the same
    required hostname anti-affinity term that selects them all."""
    counts: dict[AffinityTerm, int] = {}
    for pod in pods:
        for term in pod.pod_anti_affinity:
            if (
                term.topology_key == LABEL_HOSTNAME
                and term.namespace_selector is None
                and (pod.namespace in term.namespaces)
                and term.selector.matches(pod.labels)
            ):
                counts[term] = counts.get(term, 0) + 1
    return max(counts.values(), default=0)


def cost_floor(pods: Sequence[Pod], nodepools: Sequence[NodePoolTemplate]) -> CostFloor:
    """The LP floor on the hourly price of new capacity for ``pods`` from
    ``nodepools`` (see the module docstring for what it counts).

    Raises ``ValueError`` when no instance type has an available offering, or when the
    LP is infeasible (some requested resource no instance type allocates).
    """
    from scipy.optimize import linprog  # deferred: scipy takes a while to import

    if not pods:
        return CostFloor(0.0, 0.0, 0)
    totals = res.add(*(p.requests for p in pods))
    names = sorted(name for name, amount in totals.items() if amount > 0)
    prices: list[float] = []
    columns: list[list[float]] = []
    seen: set[tuple[str, ...]] = set()
    for pool in nodepools:
        for it in pool.instance_types:
            price = it.cheapest_price(pool.requirements)
            if price is None:
                continue
            # equal columns add nothing but solver work
            key = (str(price), *(str(it.allocatable.get(n, 0)) for n in names))
            if key in seen:
                continue
            seen.add(key)
            prices.append(price)
            columns.append([float(it.allocatable.get(n, 0)) for n in names])
    if not prices:
        raise ValueError("no instance type has an available offering")
    forced = forced_nodes(pods)
    # linprog wants A_ub @ x <= b_ub: negate the "at least" rows. Scale each resource
    # row to its total so that bytes and millicores meet the solver as numbers near 1.
    rows: list[list[float]] = []
    bounds: list[float] = []
    for i, name in enumerate(names):
        total = float(totals[name])
        rows.append([-column[i] / total for column in columns])
        bounds.append(-1.0)
    if forced:
        rows.append([-1.0] * len(prices))
        bounds.append(-float(forced))
    result = linprog(prices, A_ub=rows, b_ub=bounds, bounds=(0, None), method="highs")
    if result.status != 0 or result.fun is None or result.x is None:
        raise ValueError(f"the LP floor could not be computed: {result.message}")
    return CostFloor(float(result.fun), float(result.x.sum()), forced)
