"""karpy top's model without a cluster: rows read from the cluster model, prices of each
node's offering, bars, grouping by NodePool, sorting, filtering and the totals."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from karpy.scheduling import InstanceType, Offering
from karpy.state import Cluster
from karpy.state import testing as t
from karpy.state.cost import PriceBook
from karpy.tools.top import (
    SORT_KEYS,
    UNMANAGED,
    Filter,
    NodeRow,
    bar,
    build_view,
    format_age,
    format_price,
    machine_rows,
    next_sort,
    render,
    summary_line,
    view_of,
)

GIB = 2**30
NOW = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def instance_type(name: str, cpu: int, prices: dict[tuple[str, str], float]) -> InstanceType:
    return InstanceType.build(
        name,
        capacity={"cpu": cpu * 1000, "memory": cpu * 4 * GIB, "pods": 110},
        offerings=[Offering(zone=z, capacity_type=ct, price=p) for (z, ct), p in prices.items()],
    )


CATALOGUE = [
    instance_type("c-2x", 2, {("zone-a", "on-demand"): 0.10, ("zone-a", "spot"): 0.03,
                              ("zone-b", "on-demand"): 0.11}),
    instance_type("c-8x", 8, {("zone-a", "on-demand"): 0.40, ("zone-b", "spot"): 0.12}),
]
BOOK = PriceBook.from_instance_types({"general": CATALOGUE, "batch": CATALOGUE})


def labels(it: str, zone: str, ct: str) -> dict[str, str]:
    return {"node.kubernetes.io/instance-type": it, "topology.kubernetes.io/zone": zone,
            "karpenter.sh/capacity-type": ct}


def managed(scene: Cluster, name: str, pool: str, it: str, zone: str, ct: str, *,
            cpu: str = "2", created: str = "2024-01-01T11:00:00Z",
            initialized: bool = True) -> None:
    """A NodeClaim and its Node, as karpy launches them."""
    pid = f"kwok://{name}"
    lab = labels(it, zone, ct)
    claim = t.nodeclaim(f"{name}-claim", nodepool=pool, provider_id=pid, node_name=name,
                        labels=lab, cpu=cpu, memory="8Gi", registered=True,
                        initialized=initialized)
    claim["metadata"]["creationTimestamp"] = created
    node = t.node(name, provider_id=pid, nodepool=pool, labels=lab, cpu=cpu, memory="8Gi",
                  initialized=initialized)
    node["metadata"]["creationTimestamp"] = created
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    scene.update_nodeclaim(claim)
    scene.update_node(node)


@pytest.fixture
def scene() -> Cluster:
    """Two pools (general: 2 on-demand nodes in zone-a/b and a spot one; batch: one big
    spot node), an unmanaged node, a NodeClaim still launching, pods bound and pending."""
    c = Cluster()
    c.update_nodepool(t.nodepool("general"))
    c.update_nodepool(t.nodepool("batch"))
    managed(c, "general-a", "general", "c-2x", "zone-a", "on-demand")
    managed(c, "general-b", "general", "c-2x", "zone-b", "on-demand",
            created="2024-01-01T09:00:00Z")
    managed(c, "general-s", "general", "c-2x", "zone-a", "spot")
    managed(c, "batch-1", "batch", "c-8x", "zone-b", "spot", cpu="8",
            created="2024-01-01T11:59:30Z", initialized=False)
    unmanaged = t.node("control-1", cpu="4", memory="16Gi")
    unmanaged["metadata"]["creationTimestamp"] = "2023-12-01T00:00:00Z"
    c.update_node(unmanaged)
    c.update_nodeclaim(t.nodeclaim("general-new", nodepool="general"))
    c.update_pod(t.pod("web-1", node_name="general-a", cpu="1500m", memory="2Gi"))
    c.update_pod(t.pod("web-2", node_name="general-a", cpu="250m", memory="1Gi"))
    c.update_pod(t.pod("job-1", node_name="batch-1", cpu="2", memory="4Gi"))
    c.update_pod(t.pod("pending-1"))
    c.update_pod(t.pod("pending-2"))
    c.update_pod(t.pod("not-yet-tried", unschedulable=False))  # scheduler has not said
    return c


def rows_by_name(scene: Cluster) -> dict[str, NodeRow]:
    return {r.name: r for r in machine_rows(scene, BOOK)}


def test_each_node_is_priced_at_its_offering(scene: Cluster) -> None:
    rows = rows_by_name(scene)
    assert rows["general-a"].price == 0.10  # c-2x zone-a on-demand
    assert rows["general-b"].price == 0.11  # same type, zone-b on-demand
    assert rows["general-s"].price == 0.03  # same type, zone-a spot
    assert rows["batch-1"].price == 0.12
    assert rows["control-1"].price is None  # not karpy's: no price
    assert rows["control-1"].nodepool == UNMANAGED
    assert rows["general-new"].price is None  # not launched: no offering yet


def test_rows_carry_requests_allocatable_pods_and_status(scene: Cluster) -> None:
    rows = rows_by_name(scene)
    a = rows["general-a"]
    assert (a.instance_type, a.zone, a.capacity_type) == ("c-2x", "zone-a", "on-demand")
    assert (a.cpu_requested, a.cpu_allocatable) == (1750, 2000)
    assert (a.memory_requested, a.memory_allocatable) == (3 * GIB, 8 * GIB)
    assert a.pods == 2 and a.status == "Ready"
    assert a.cpu_fraction == pytest.approx(0.875)
    assert rows["batch-1"].status == "Initializing" and rows["batch-1"].in_flight
    assert rows["general-new"].status == "Launching" and rows["general-new"].in_flight
    assert rows["control-1"].status == "NotReady"  # the factory's node has no Ready condition
    assert rows["general-b"].created == datetime(2024, 1, 1, 9, 0, tzinfo=UTC)


def test_view_groups_by_pool_with_subtotals_and_totals(scene: Cluster) -> None:
    view = view_of(scene, BOOK)
    assert [g.nodepool for g in view.groups] == ["batch", "general", UNMANAGED]
    general = view.groups[1]
    assert [r.name for r in general.rows] == ["general-a", "general-b", "general-new",
                                              "general-s"]
    assert general.price == pytest.approx(0.10 + 0.11 + 0.03)
    assert view.groups[0].price == pytest.approx(0.12)
    assert view.groups[2].price == 0.0
    assert view.price == pytest.approx(0.10 + 0.11 + 0.03 + 0.12)
    assert view.machines == 6
    assert view.in_flight == 2
    assert view.pending == 2  # only pods kube-scheduler marked Unschedulable


def test_sort_keys_order_rows_within_each_pool(scene: Cluster) -> None:
    rows = machine_rows(scene, BOOK)

    def general(sort: str) -> list[str]:
        view = build_view(rows, pending=0, sort=sort)
        return [r.name for g in view.groups if g.nodepool == "general" for r in g.rows]

    assert general("price") == ["general-b", "general-a", "general-s", "general-new"]
    assert general("cpu")[0] == "general-a"  # the busiest first
    assert general("pods")[0] == "general-a"
    assert general("age")[0] == "general-b"  # the oldest first
    assert general("zone") == ["general-new", "general-a", "general-s", "general-b"]
    with pytest.raises(ValueError, match="sort key 'colour'"):
        build_view(rows, pending=0, sort="colour")


def test_next_sort_cycles_through_every_key() -> None:
    seen = []
    key = SORT_KEYS[0]
    for _ in SORT_KEYS:
        seen.append(key)
        key = next_sort(key)
    assert key == SORT_KEYS[0] and sorted(seen) == sorted(SORT_KEYS)


def test_filters_by_pool_zone_capacity_type_and_words(scene: Cluster) -> None:
    rows = machine_rows(scene, BOOK)

    def names(expr: str) -> list[str]:
        view = build_view(rows, pending=7, filter=Filter.parse(expr))
        return sorted(r.name for g in view.groups for r in g.rows)

    assert names("nodepool=batch") == ["batch-1"]
    assert names("pool=general zone=zone-a") == ["general-a", "general-s"]
    assert names("capacity-type=spot") == ["batch-1", "general-s"]
    assert names("ct=spot,zone=zone-b") == ["batch-1"]
    assert names("spot") == ["batch-1", "general-s"]
    assert names("status=Launching") == ["general-new"]
    assert names("") == sorted(r.name for r in rows)
    filtered = build_view(rows, pending=7, filter=Filter.parse("spot"))
    assert filtered.price == pytest.approx(0.03 + 0.12)  # totals follow the filter
    assert filtered.machines == 2 and filtered.pending == 7  # pending is cluster-wide
    with pytest.raises(ValueError, match="filter key 'colour' is not one of: capacity-type"):
        Filter.parse("colour=red")


def test_bar_shows_fraction_and_percent() -> None:
    assert bar(0.0) == "░░░░░░░░░░   0%"
    assert bar(0.4) == "████░░░░░░  40%"
    assert bar(1.0) == "██████████ 100%"
    assert bar(1.3) == "██████████ 130%"  # overcommitted: still says so


@given(st.floats(min_value=0, max_value=5, allow_nan=False), st.integers(1, 40))
def test_bar_always_has_its_width(fraction: float, width: int) -> None:
    cells = bar(fraction, width).split(" ")[0]
    assert len(cells) == width
    assert cells.count("█") == round(min(fraction, 1.0) * width)


def test_ages_and_prices_read_like_kubectl() -> None:
    assert format_age(NOW - timedelta(seconds=45), NOW) == "45s"
    assert format_age(NOW - timedelta(minutes=12), NOW) == "12m"
    assert format_age(NOW - timedelta(hours=3), NOW) == "3h"
    assert format_age(NOW - timedelta(days=5), NOW) == "5d"
    assert format_age(None, NOW) == "-"
    assert format_price(0.1234567) == "$0.1235" and format_price(None) == "-"


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", UNMANAGED]),
                          st.one_of(st.none(), st.floats(0, 10, allow_nan=False))),
                max_size=30))
def test_totals_are_the_sum_of_the_subtotals_and_every_row_is_shown_once(
    spec: list[tuple[str, float | None]]
) -> None:
    rows = [NodeRow(f"n{i}", pool, "", "", "", 0, 0, 0, 0, 0, None, price, "Ready")
            for i, (pool, price) in enumerate(spec)]
    view = build_view(rows, pending=0, sort="price")
    shown = [r.name for g in view.groups for r in g.rows]
    assert sorted(shown) == sorted(r.name for r in rows)
    assert view.price == pytest.approx(math.fsum(p for _, p in spec if p is not None))
    assert view.price == pytest.approx(math.fsum(g.price for g in view.groups))
    if view.groups:
        assert view.groups[-1].nodepool == UNMANAGED or UNMANAGED not in {p for p, _ in spec}


def test_frame_shows_rows_subtotals_and_totals(scene: Cluster) -> None:
    view = view_of(scene, BOOK)
    console = Console(width=200, record=True, color_system=None)
    console.print(render(view, now=NOW))
    text = console.export_text()
    assert "nodepool general: 4 nodes" in text and "nodepool batch: 1 nodes" in text
    assert "unmanaged: 1 nodes" in text
    line = next(line for line in text.splitlines() if "general-a" in line)
    for cell in ("c-2x", "zone-a", "on-demand", "█████████░  88% 1.75/2", "3.0Gi/8.0Gi", "60m",
                 "$0.1000", "Ready"):
        assert cell in line, (cell, line)
    assert summary_line(view) in text
    assert "TOTAL 6 nodes  $0.3600/h  in flight: 2  pending pods: 2" in text
    assert "sort: name  filter: none" in text


def test_deleted_pool_nodes_are_priced_from_the_catalogue_of_other_pools() -> None:
    c = Cluster()
    managed(c, "orphan", "gone", "c-8x", "zone-a", "on-demand", cpu="8")
    (row,) = machine_rows(c, BOOK)
    assert row.price == 0.40
    assert machine_rows(c, PriceBook())[0].price is None  # no catalogue: unknown


def test_a_frame_lays_out_only_the_rows_that_fit_but_totals_everything(
    scene: Cluster,
) -> None:
    view = view_of(scene, BOOK)
    console = Console(width=200, record=True, color_system=None)
    console.print(render(view, now=NOW, max_rows=4))
    text = console.export_text()
    # batch header + batch-1, general header + general-a; the rest is counted
    assert "batch-1" in text and "general-a" in text
    assert "general-b" not in text and "control-1" not in text
    assert "… 4 more nodes" in text
    assert "nodepool general: 4 nodes" in text  # the header still counts every node
    assert "TOTAL 6 nodes  $0.3600/h" in text
