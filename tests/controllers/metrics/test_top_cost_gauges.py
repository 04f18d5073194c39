"""karpy_nodepool_cost_per_hour and karpy_cluster_cost_per_hour as /metrics shows them:
each machine at its offering's price, summed per NodePool and capacity type, series
that go with their machines."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from karpy.controllers.metrics import GAUGES, CostMetrics, GaugeStore
from karpy.runtime.telemetry import Metrics
from karpy.scheduling import InstanceType, Offering
from karpy.state import Cluster, NodePoolEntry
from karpy.state import testing as t

GIB = 2**30


def instance_type(name: str, prices: dict[tuple[str, str], float]) -> InstanceType:
    return InstanceType.build(
        name,
        capacity={"cpu": 2000, "memory": 8 * GIB, "pods": 110},
        offerings=[Offering(zone=z, capacity_type=ct, price=p) for (z, ct), p in prices.items()],
    )


CATALOGUE = (
    instance_type(
        "small", {("a", "on-demand"): 0.25, ("a", "spot"): 0.0625, ("b", "on-demand"): 0.5}
    ),
    instance_type("large", {("a", "on-demand"): 2.0, ("b", "spot"): 0.75}),
)


class Catalogue:
    """The provider's answer to get_instance_types, counting the calls."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, pool: NodePoolEntry) -> Sequence[InstanceType]:
        self.asked.append(pool.name)
        return CATALOGUE


def machine(cluster: Cluster, name: str, pool: str, it: str, zone: str, ct: str) -> None:
    pid = f"test://{name}"
    labels = {
        "node.kubernetes.io/instance-type": it,
        "topology.kubernetes.io/zone": zone,
        "karpenter.sh/capacity-type": ct,
    }
    cluster.update_nodeclaim(
        t.nodeclaim(
            name,
            nodepool=pool,
            provider_id=pid,
            node_name=name,
            labels=labels,
            registered=True,
            initialized=True,
        )
    )
    cluster.update_node(t.node(name, provider_id=pid, nodepool=pool, labels=labels))


def lines(registry: Metrics, name: str) -> list[str]:
    text = registry.render().decode()
    return sorted(
        line
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


@pytest.fixture
def registry() -> Metrics:
    return Metrics()


async def test_cost_per_pool_and_capacity_type_and_total(registry: Metrics) -> None:
    store = GaugeStore(GAUGES)
    registry.registry.register(store)
    scene = Cluster()
    scene.update_nodepool(t.nodepool("web"))
    scene.update_nodepool(t.nodepool("batch"))
    machine(scene, "web-1", "web", "small", "a", "on-demand")
    machine(scene, "web-2", "web", "small", "b", "on-demand")
    machine(scene, "web-3", "web", "small", "a", "spot")
    machine(scene, "batch-1", "batch", "large", "b", "spot")
    scene.update_node(t.node("not-ours"))  # unmanaged: costs karpy nothing
    scene.update_nodeclaim(t.nodeclaim("coming", nodepool="web"))  # not launched yet
    catalogue = Catalogue()
    controller = CostMetrics(cluster=scene, store=store, instance_types=catalogue)

    await controller.reconcile()

    assert lines(registry, "karpy_nodepool_cost_per_hour") == [
        'karpy_nodepool_cost_per_hour{capacity_type="on-demand",nodepool="web"} 0.75',
        'karpy_nodepool_cost_per_hour{capacity_type="spot",nodepool="batch"} 0.75',
        'karpy_nodepool_cost_per_hour{capacity_type="spot",nodepool="web"} 0.0625',
    ]
    assert lines(registry, "karpy_cluster_cost_per_hour") == ["karpy_cluster_cost_per_hour 1.5625"]
    assert sorted(catalogue.asked) == ["batch", "web"]

    # The batch node goes away: its series goes with it, the total follows.
    scene.delete_node(t.node("batch-1", provider_id="test://batch-1", nodepool="batch"))
    scene.delete_nodeclaim(t.nodeclaim("batch-1", nodepool="batch"))
    await controller.reconcile()
    assert [
        line
        for line in lines(registry, "karpy_nodepool_cost_per_hour")
        if 'nodepool="batch"' in line
    ] == []
    assert lines(registry, "karpy_cluster_cost_per_hour") == ["karpy_cluster_cost_per_hour 0.8125"]


async def test_no_machines_is_zero_not_missing(registry: Metrics) -> None:
    store = GaugeStore(GAUGES)
    registry.registry.register(store)
    controller = CostMetrics(cluster=Cluster(), store=store, instance_types=Catalogue())
    await controller.reconcile()
    assert lines(registry, "karpy_cluster_cost_per_hour") == ["karpy_cluster_cost_per_hour 0.0"]
    assert lines(registry, "karpy_nodepool_cost_per_hour") == []
