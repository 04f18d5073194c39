"""The LP floor on a plan's price (karpy.scheduling.cost_floor)."""

from __future__ import annotations

import pytest
from scheduling_support import HOSTNAME, itype, nodepool, pods, term

from karpy.scheduling import cost_floor
from karpy.scheduling.simulator import Simulator


def test_floor_is_the_cheapest_fractional_fleet() -> None:
    # price = cpu + memory/4: 2 CPU/8 GiB costs 4, 8 CPU/32 GiB costs 16 (same $/CPU)
    pool = nodepool(types=[itype("small", 2, 8), itype("large", 8, 32)])
    floor = cost_floor(pods(10, cpu="1", memory="1Gi"), [pool])
    # 10 CPUs at 2 $/CPU; memory (10 GiB of the 40 bought) does not bind
    assert floor.price == pytest.approx(20.0)
    assert floor.forced_nodes == 0


def test_memory_binds_when_pods_are_memory_heavy() -> None:
    pool = nodepool(types=[itype("small", 2, 8)])
    floor = cost_floor(pods(4, cpu="100m", memory="6Gi"), [pool])
    assert floor.price == pytest.approx(3 * 4.0)  # 24 GiB = 3 nodes of 8 GiB


def test_hostname_anti_affinity_forces_nodes() -> None:
    pool = nodepool(types=[itype("small", 2, 8), itype("large", 8, 32)])
    solos = pods(
        5,
        cpu="100m",
        memory="100Mi",
        labels={"app": "solo"},
        anti_affinity=[term(HOSTNAME, {"app": "solo"})],
    )
    floor = cost_floor(solos, [pool])
    assert floor.forced_nodes == 5
    assert floor.price == pytest.approx(5 * 4.0)  # five of the cheapest node


def test_a_plan_never_costs_less_than_the_floor() -> None:
    pool = nodepool(types=[itype("small", 2, 8), itype("medium", 4, 8), itype("large", 8, 32)])
    batch = pods(7, cpu="1500m", memory="3Gi") + pods(5, "m", cpu="250m", memory="7Gi")
    results = Simulator([pool]).solve(batch)
    assert not results.errors
    assert results.price >= cost_floor(batch, [pool]).price - 1e-9


def test_no_offering_is_a_clear_error() -> None:
    pool = nodepool(
        types=[itype("gone", 2, 8, unavailable=[("zone-a", "on-demand")], zones=["zone-a"])]
    )
    with pytest.raises(ValueError, match="no instance type has an available offering"):
        cost_floor(pods(1), [pool])
