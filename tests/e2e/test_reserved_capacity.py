"""End to end: reserved capacity with the kwok provider (issue 28, acceptance 1).

The kwok catalogue sells one instance type on-demand and through a capacity
reservation of 2 instances. Five pods that each need a node of their own: two land on
the reservation (their NodeClaims and Nodes labelled ``karpenter.sh/capacity-type:
reserved`` and with the reservation's ID), three on on-demand. Deleting a reserved
NodeClaim frees its slot once its instance is gone: the next pod lands on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import karpy_operator
from kube import (
    clean_up,
    connect,
    deployment,
    eventually,
    gone,
    nodepool,
    pool_objects,
    ready_node_class,
    running_pods,
)

from karpy.runtime import kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster]

NODE_CLASS = "reserved-e2e"
POOL = "reserved-e2e"
APP = "reserved-app"
SELECT = "karpy-e2e-reserved"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
RESERVATION_ID = "karpenter.kwok.sh/reservation-id"
RESERVATION = "cr-e2e-0001"
ZONE = "test-zone-a"


def _catalogue() -> list[dict[str, Any]]:
    """One 4-CPU type: on-demand, and a 2-instance reservation priced as paid for."""
    def offering(capacity_type: str, price: float, **extra: Any) -> dict[str, Any]:
        requirements = [
            {"key": CAPACITY_TYPE, "operator": "In", "values": [capacity_type]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]},
        ]
        if capacity_type == "reserved":
            requirements.append(
                {"key": RESERVATION_ID, "operator": "In", "values": [RESERVATION]}
            )
        return {"Price": price, "Available": True, "Requirements": requirements, **extra}

    return [{
        "name": "m-4x-amd64-linux",
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {"cpu": "4", "memory": "16Gi", "pods": "64"},
        "offerings": [
            offering("on-demand", 0.2),
            offering("reserved", 0.00000002, ReservationCapacity=2),
        ],
    }]


def _by_capacity_type(claims: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for claim in claims:
        labels = claim["metadata"].get("labels") or {}
        out.setdefault(labels.get(CAPACITY_TYPE, "?"), []).append(claim)
    return out


async def test_two_reserved_three_on_demand_and_a_freed_slot_is_reused(
    cluster: Any, namespace: str, kwok_crd: None, tmp_path: Path
) -> None:
    catalogue = tmp_path / "instance_types.json"
    catalogue.write_text(json.dumps(_catalogue()))
    settings = {"instanceTypesFile": str(catalogue)}
    async with connect(cluster) as client, karpy_operator(
        cluster, provider_settings=settings
    ):
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, nodepool(POOL, node_class=NODE_CLASS,
                                                labels={SELECT: POOL}))
        # 3 CPU each: one pod per 4-CPU node
        await client.create(kinds.DEPLOYMENT,
                            deployment(APP, node_selector={SELECT: POOL}, replicas=5, cpu="3"),
                            namespace=namespace)
        forced: list[str] = []
        try:
            await eventually(lambda: running_pods(client, namespace, APP, 5), timeout=120,
                             what="5 pods Running")

            async def launched() -> dict[str, list[Any]] | None:
                claims = await pool_objects(client, NODE_CLAIM, [POOL])
                if len(claims) != 5 or not all(
                    (c.get("status") or {}).get("nodeName") for c in claims
                ):
                    return None
                return _by_capacity_type(claims)

            groups = await eventually(launched, timeout=60, what="5 NodeClaims launched")
            assert sorted((k, len(v)) for k, v in groups.items()) == [
                ("on-demand", 3), ("reserved", 2)
            ], groups
            for claim in groups["reserved"]:
                labels = claim["metadata"]["labels"]
                assert labels[RESERVATION_ID] == RESERVATION
                node = await client.get(kinds.NODE, claim["status"]["nodeName"])
                assert node["metadata"]["labels"][CAPACITY_TYPE] == "reserved"
                assert node["metadata"]["labels"][RESERVATION_ID] == RESERVATION
            for claim in groups["on-demand"]:
                assert RESERVATION_ID not in claim["metadata"]["labels"]

            # Deleting a reserved NodeClaim frees its slot for the next launch (once its
            # instance is gone, as a cloud counts it): one more pod then lands on it.
            freed = groups["reserved"][0]["metadata"]["name"]
            kept = groups["reserved"][1]["metadata"]["name"]
            await client.delete(NODE_CLAIM, freed)
            await eventually(lambda: gone(client, NODE_CLAIM, freed), timeout=120,
                             what=f"NodeClaim {freed} gone")
            await client.patch(kinds.DEPLOYMENT, APP, {"spec": {"replicas": 6}},
                               namespace=namespace)

            async def relaunched() -> list[Any] | None:
                claims = await pool_objects(client, NODE_CLAIM, [POOL])
                if len(claims) != 6 or not await running_pods(client, namespace, APP, 6):
                    return None
                reserved = _by_capacity_type(claims).get("reserved", [])
                return reserved if len(reserved) == 2 else None

            reserved = await eventually(relaunched, timeout=120,
                                        what="6 pods Running, 2 of them on the reservation")
            names = {c["metadata"]["name"] for c in reserved}
            assert kept in names and freed not in names
            assert all(c["metadata"]["labels"][RESERVATION_ID] == RESERVATION
                       for c in reserved)
        finally:
            forced = await clean_up(client, namespace, APP, [POOL], timeout=180.0)
        assert forced == [], f"termination left these behind: {forced}"
