"""Default topology spread constraints per scheduler (issue 41, item 4; Karpenter v1.15's
SCHEDULER_CONFIG, and beyond it).

The local cluster's kube-scheduler runs two profiles: ``default-scheduler`` as shipped,
and ``karpy-e2e-spread``, a second scheduler whose pods get a default constraint: zone
``maxSkew: 1``, ``minDomains: 3``, ``DoNotSchedule`` (tests/controlplane; minDomains
keeps kube-scheduler from filling the first zone's node while the others are coming).
karpy is told the same through SCHEDULER_CONFIG's ``profiles`` (karpy's field;
Karpenter's ``podTopologySpread.defaultConstraints`` is the default scheduler's).

Six small pods of a Deployment that names the second scheduler and declares no spread
of its own: kube-scheduler deduces their selector from their ReplicaSet and spreads them
over the zones, so karpy must plan nodes in every zone at once. Packed on one
node, as karpy did before, five of them would stay Pending: the node is in one zone, and
karpy's simulation said they fit there. Four pods of a default-scheduler Deployment get
no default (their profile has none) and get one node. Karpenter v1.15 gives every pod
the one list of defaults, which would spread those four as well: three nodes where one
does.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from harness import karpy_operator
from kube import (
    clean_up,
    connect,
    deployment,
    eventually,
    nodepool,
    pool_objects,
    ready_node_class,
    running_pods,
)

from karpy.controllers.settings import Settings
from karpy.runtime import kinds
from karpy.scheduling.defaultspread import parse_scheduler_config
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster]

NODE_CLASS = "default-spread-e2e"
POOL = "default-spread"
SELECT = "karpy-e2e-default-spread"
ZONE = "topology.kubernetes.io/zone"
SCHEDULER = "karpy-e2e-spread"   # the second profile of tests/controlplane's scheduler
CONFIG = f"""profiles:
- schedulerName: {SCHEDULER}
  podTopologySpread:
    defaultConstraints:
    - {{maxSkew: 1, minDomains: 3, topologyKey: {ZONE}, whenUnsatisfiable: DoNotSchedule}}
"""


async def test_a_second_schedulers_pods_are_spread_by_its_defaults_and_no_others(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0,
                        scheduler_config=parse_scheduler_config(CONFIG))
    async with connect(cluster) as client, karpy_operator(cluster, settings=settings):
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, nodepool(POOL, node_class=NODE_CLASS,
                                                labels={SELECT: "true"}))
        try:
            # first the default scheduler's pods: no default constraint, one node
            packed = deployment("packed", node_selector={SELECT: "true"}, replicas=4,
                                cpu="100m")
            await client.create(kinds.DEPLOYMENT, packed, namespace=namespace)
            packed_pods = await eventually(
                lambda: running_pods(client, namespace, "packed", 4), timeout=120,
                what="the default scheduler's 4 pods Running")
            claims = await pool_objects(client, NODE_CLAIM, [POOL])
            packed_nodes = {p["spec"]["nodeName"] for p in packed_pods}
            assert len(claims) == 1 and len(packed_nodes) == 1, (claims, packed_nodes)
            # then the second scheduler's: spread over the zones by its profile's default
            spread = deployment("spread", node_selector={SELECT: "true"}, replicas=6,
                                cpu="100m")
            spread["spec"]["template"]["spec"]["schedulerName"] = SCHEDULER
            began = time.monotonic()
            await client.create(kinds.DEPLOYMENT, spread, namespace=namespace)
            spread_pods = await eventually(
                lambda: running_pods(client, namespace, "spread", 6), timeout=120,
                what="the second scheduler's 6 pods Running")
            took = time.monotonic() - began
            zone_of = {}
            for node in await client.list(kinds.NODE):
                zone_of[node["metadata"]["name"]] = node["metadata"]["labels"].get(ZONE)
            per_zone = Counter(zone_of[p["spec"]["nodeName"]] for p in spread_pods)
            claims = await pool_objects(client, NODE_CLAIM, [POOL])
            print(f"\ndefault spread: the default scheduler's 4 pods on 1 node; the second "
                  f"scheduler's 6 pods per zone {sorted(per_zone.items())}, Running "
                  f"{took:.1f} s after creation; {len(claims)} NodeClaims in all")
            # the kwok catalogue offers four zones: every pod in a different one, at most
            # one apart (maxSkew 1), and at least minDomains (3) of them used
            assert len(per_zone) >= 3, per_zone
            assert max(per_zone.values()) - min(per_zone.values()) <= 1, per_zone
        finally:
            for app in ("spread", "packed"):
                assert await clean_up(client, namespace, app, [POOL], timeout=90) == []
