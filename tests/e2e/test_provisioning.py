"""End to end: provisioning against the local cluster with the kwok provider.

Issue 7, acceptance 1-3:

1. A Deployment "inflate" of 50 pods with CPU requests goes from 0 to all Running on
   NodeClaim-backed nodes; ``kubectl get nodeclaims`` shows TYPE ZONE NODE READY; the log
   holds Karpenter's six lifecycle lines. Prints the time from scale-up to all Running and
   the number and $/h of the nodes.
2. Scaled to 1,000 pods: all Running. Runs ``karpy run`` as a subprocess (as a user
   would) and prints the time and the operator's peak RSS.
3. A NodePool limit stops provisioning at the limit, and a higher-weight pool is used
   before a lower-weight one.

Each test uses its own KWOKNodeClass, NodePools (selected by a template label only its
pods ask for) and namespace, and deletes its NodeClaims, Nodes and NodePools before
karpy stops.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from harness import RunningKarpy, karpy_operator, karpy_process
from kube import (
    clean_up,
    connect,
    deployment,
    eventually,
    nodepool,
    pool_objects,
    pool_of,
    ready_node_class,
    running_pods,
)

from karpy.cloudprovider.kwok import generate_catalogue
from karpy.cloudprovider.kwok._catalogue import to_instance_types
from karpy.controllers.settings import Settings
from karpy.runtime import Client, kinds
from karpy.scheduling import resources as res
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NODE_CLASS = "provisioning-e2e"
SELECT = "karpy-e2e-provisioning"  # the template label this file's pods select pools by
CLEANUP_TIMEOUT = 180.0
LIFECYCLE = (
    "found provisionable pod(s)",
    "computed new nodeclaim(s) to fit pod(s)",
    "created nodeclaim",
    "launched nodeclaim",
    "registered nodeclaim",
    "initialized nodeclaim",
)


# -- helpers ---------------------------------------------------------------------------


def pool_manifest(
    name: str, select: str, *, weight: int | None = None,
    limits: Mapping[str, str] | None = None,
    requirements: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    return nodepool(name, node_class=NODE_CLASS, labels={SELECT: select}, weight=weight,
                    limits=limits, requirements=requirements)


def app_manifest(name: str, select: str, replicas: int, cpu: str) -> dict[str, Any]:
    return deployment(name, node_selector={SELECT: select}, replicas=replicas, cpu=cpu)


async def scale(client: Client, namespace: str, name: str, replicas: int) -> None:
    await client.patch(kinds.DEPLOYMENT, name, {"spec": {"replicas": replicas}},
                       namespace=namespace)


async def nodes_of(client: Client, pools: Sequence[str]) -> list[Any]:
    return await pool_objects(client, kinds.NODE, pools)


async def nodeclaims_of(client: Client, pools: Sequence[str]) -> list[Any]:
    return await pool_objects(client, NODE_CLAIM, pools)


def hourly_price(nodes: Sequence[Mapping[str, Any]]) -> float:
    """What the nodes cost per hour at the kwok catalogue's prices."""
    prices = {
        (it.name, o.zone, o.capacity_type): o.price
        for it in to_instance_types(generate_catalogue())
        for o in it.offerings
    }
    total = 0.0
    for n in nodes:
        labels = n["metadata"]["labels"]
        total += prices[(labels["node.kubernetes.io/instance-type"],
                         labels["topology.kubernetes.io/zone"],
                         labels["karpenter.sh/capacity-type"])]
    return total


def lifecycle_lines(op: RunningKarpy, pools: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """The six lifecycle log lines, those naming a NodeClaim only for ``pools``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for message in LIFECYCLE:
        records = op.messages(message)
        if message not in LIFECYCLE[:2]:
            records = [r for r in records
                       if str((r.get("NodeClaim") or {}).get("name", "")).rpartition("-")[0]
                       in pools]
        out[message] = records
    return out


# -- acceptance 1 ----------------------------------------------------------------------


async def test_inflate_50_pods_run_on_nodeclaim_backed_nodes(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    pool, app, replicas = "prov-inflate", "inflate", 50
    async with connect(cluster) as client, karpy_operator(cluster) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, pool_manifest(pool, app))
        await client.create(kinds.DEPLOYMENT, app_manifest(app, app, 0, "1"),
                            namespace=namespace)
        forced: list[str] = []
        try:
            started = time.monotonic()
            await scale(client, namespace, app, replicas)
            pods = await eventually(lambda: running_pods(client, namespace, app, replicas),
                                    timeout=300, what=f"{replicas} pods Running")
            elapsed = time.monotonic() - started

            claims = {(nc.get("status") or {}).get("nodeName"): nc
                      for nc in await nodeclaims_of(client, [pool])}
            nodes = await nodes_of(client, [pool])
            for p in pods:               # every pod is on a node a NodeClaim stands for
                assert p["spec"]["nodeName"] in claims
            header, *rows = cluster.kubectl("get", "nodeclaims", "-l",
                                            f"karpenter.sh/nodepool={pool}").splitlines()
            assert header.split()[:7] == ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE",
                                          "READY", "AGE"]
            assert len(rows) == len(claims) and all(r.split()[5] == "True" for r in rows)
            assert {r.split()[4] for r in rows} == set(claims)

            lines = await _all_lifecycle_lines(op, [pool], len(claims))
            [created, *_] = lines["created nodeclaim"]
            assert created["NodePool"] == {"name": pool}
            assert set(created["requests"]) >= {"cpu", "pods"}
            assert created["instance-types"]
            found = lines["found provisionable pod(s)"][0]
            assert found["Pods"].startswith(f"{namespace}/{app}-") and found["duration"]
            assert sum(r["pods"] for r in lines["computed new nodeclaim(s) to fit pod(s)"]) \
                >= replicas
            price = hourly_price(nodes)
            types = sorted(n["metadata"]["labels"]["node.kubernetes.io/instance-type"]
                           for n in nodes)
            print(f"\nacceptance 1: {replicas} pods Running {elapsed:.1f}s after scale-up on "
                  f"{len(nodes)} node(s) costing ${price:.4f}/h ({', '.join(types)})")
        finally:
            forced = await clean_up(client, namespace, app, [pool],
                                    timeout=CLEANUP_TIMEOUT)
        assert forced == [], f"termination left these behind: {forced}"


async def _all_lifecycle_lines(
    op: RunningKarpy, pools: Sequence[str], claims: int
) -> dict[str, list[dict[str, Any]]]:
    async def complete() -> dict[str, list[dict[str, Any]]] | None:
        lines = lifecycle_lines(op, pools)
        wanted = {m: 1 if m in LIFECYCLE[:2] else claims for m in LIFECYCLE}
        return lines if all(len(lines[m]) >= n for m, n in wanted.items()) else None

    return await eventually(complete, timeout=60, what="the six lifecycle log lines")


# -- acceptance 2 ----------------------------------------------------------------------


async def test_a_thousand_pods_run_and_the_operator_stays_lean(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    pool, app, replicas = "prov-thousand", "inflate", 1000
    # Nodes of at most 16 CPU, so that 1,000 one-CPU pods need dozens of NodeClaims.
    small = [{"key": "karpenter.kwok.sh/instance-cpu", "operator": "Lt", "values": ["17"]}]
    async with connect(cluster) as client, karpy_process(cluster) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, pool_manifest(pool, app, requirements=small))
        await client.create(kinds.DEPLOYMENT, app_manifest(app, app, 0, "1"),
                            namespace=namespace)
        forced: list[str] = []
        try:
            started = time.monotonic()
            await scale(client, namespace, app, replicas)
            await eventually(lambda: running_pods(client, namespace, app, replicas),
                             timeout=900, what=f"{replicas} pods Running", every=1.0)
            elapsed = time.monotonic() - started
            nodes = await nodes_of(client, [pool])
            claims = await nodeclaims_of(client, [pool])
            assert len(claims) == len(nodes)
            rss = op.peak_rss_bytes()
            created = [r for r in op.messages("created nodeclaim")
                       if (r.get("NodePool") or {}).get("name") == pool]
            assert len(created) == len(claims)   # no NodeClaim was bought twice
            rounds = op.messages("computed new nodeclaim(s) to fit pod(s)")
            print(f"\nacceptance 2: {replicas} pods Running {elapsed:.1f}s after scale-up on "
                  f"{len(nodes)} node(s) costing ${hourly_price(nodes):.4f}/h; "
                  f"karpy peak RSS {rss / 2**20:.0f} MiB; {len(rounds)} provisioning "
                  f"round(s) (first: {rounds[0]['time']}, simulation took "
                  f"{op.messages('found provisionable pod(s)')[0]['duration']}), last NodeClaim "
                  f"created at {created[-1]['time']}")
        finally:
            forced = await clean_up(client, namespace, app, [pool],
                                    timeout=CLEANUP_TIMEOUT)
        assert forced == [], f"termination left these behind: {forced}"


# -- acceptance 3 ----------------------------------------------------------------------


async def test_limits_stop_a_pool_and_weights_order_the_pools(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    limited, fallback, app = "prov-limited", "prov-fallback", "prov-limits"
    pools = [limited, fallback]
    limit_cpu = 8
    replicas = 24  # 24 x 1 CPU: three times what the limited pool may hold
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0)
    async with connect(cluster) as client, karpy_operator(cluster, settings=settings) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, pool_manifest(limited, app, weight=100,
                                                limits={"cpu": str(limit_cpu)}))
        forced: list[str] = []
        try:
            await client.create(kinds.DEPLOYMENT, app_manifest(app, app, replicas, "1"),
                                namespace=namespace)

            # Alone, the limited pool provisions up to its limit and no further.
            await op.wait_for_log("could not schedule pod", timeout=120,
                                  where=lambda r: r["Pod"]["namespace"] == namespace)

            async def capped() -> list[Any] | None:
                nodes = await nodes_of(client, [limited])
                claims = await nodeclaims_of(client, [limited])
                ready = [n for n in nodes
                         if n["metadata"]["labels"].get("karpenter.sh/initialized") == "true"]
                return nodes if nodes and len(ready) == len(claims) else None

            nodes = await eventually(capped, timeout=120, what="the limited pool's nodes")
            capacity = sum(res.parse_resource_list(n["status"]["capacity"])["cpu"]
                           for n in nodes)
            assert capacity <= limit_cpu * 1000
            pods = await client.list(kinds.POD, namespace=namespace,
                                     label_selector={"app": app})
            assert any(not p["spec"].get("nodeName") for p in pods)
            events = [e for e in await client.list(kinds.EVENT, namespace=namespace)
                      if e["reason"] == "FailedScheduling"
                      and e["message"].startswith("Failed to schedule pod, ")]
            assert events, "no Karpenter FailedScheduling event on the pods left over"
            claims_before = {nc["metadata"]["name"] for nc in
                             await nodeclaims_of(client, [limited])}

            # A lower-weight pool without limits takes the rest; the limited one, still
            # preferred, gets nothing more.
            await client.create(NODE_POOL, pool_manifest(fallback, app, weight=1))
            await eventually(lambda: running_pods(client, namespace, app, replicas),
                             timeout=300, what=f"{replicas} pods Running")
            assert {nc["metadata"]["name"] for nc in
                    await nodeclaims_of(client, [limited])} == claims_before
            assert await nodes_of(client, [fallback])
            print(f"\nacceptance 3: limited pool stopped at "
                  f"{capacity / 1000:g}/{limit_cpu} CPU on {len(nodes)} node(s); "
                  f"fallback pool took the rest on "
                  f"{len(await nodes_of(client, [fallback]))} node(s)")
        finally:
            forced = await clean_up(client, namespace, app, pools,
                                    timeout=CLEANUP_TIMEOUT)
        assert forced == [], f"termination left these behind: {forced}"


async def test_the_heavier_pool_is_used_first(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    heavy, light, app = "prov-heavy", "prov-light", "prov-weights"
    pools = [heavy, light]
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0)
    async with connect(cluster) as client, karpy_operator(cluster, settings=settings):
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, pool_manifest(light, app, weight=1))
        await client.create(NODE_POOL, pool_manifest(heavy, app, weight=90))
        forced: list[str] = []
        try:
            await client.create(kinds.DEPLOYMENT, app_manifest(app, app, 6, "1"),
                                namespace=namespace)
            pods = await eventually(lambda: running_pods(client, namespace, app, 6),
                                    timeout=180, what="6 pods Running")
            used = {pool_of(await client.get(kinds.NODE, p["spec"]["nodeName"])) for p in pods}
            assert used == {heavy}
            assert await nodeclaims_of(client, [light]) == []
        finally:
            forced = await clean_up(client, namespace, app, pools,
                                    timeout=CLEANUP_TIMEOUT)
        assert forced == [], f"termination left these behind: {forced}"
