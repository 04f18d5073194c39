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

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import pytest
from harness import RunningKarpy, karpy_operator, karpy_process

from karpy.apis.crdgen import generate
from karpy.cloudprovider.kwok import API_EXTENSION, generate_catalogue
from karpy.cloudprovider.kwok._catalogue import to_instance_types
from karpy.controllers.settings import Settings
from karpy.runtime import Client, Kind, errors, kinds
from karpy.scheduling import resources as res
from karpy.state import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

T = TypeVar("T")

KWOK_NODE_CLASS = Kind(group="karpenter.kwok.sh", version="v1alpha1", plural="kwoknodeclasses",
                       kind="KWOKNodeClass", namespaced=False)
NODE_CLASS = "provisioning-e2e"
SELECT = "karpy-e2e-provisioning"  # the template label this file's pods select pools by
LIFECYCLE = (
    "found provisionable pod(s)",
    "computed new nodeclaim(s) to fit pod(s)",
    "created nodeclaim",
    "launched nodeclaim",
    "registered nodeclaim",
    "initialized nodeclaim",
)


# -- helpers ---------------------------------------------------------------------------


async def eventually(
    check: Callable[[], Awaitable[T | None]],
    *,
    timeout: float,  # noqa: ASYNC109 - a deadline for the polling, not an I/O timeout
    what: str,
    every: float = 0.5,
) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = await check()
        if found:
            return found
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(every)


@contextlib.asynccontextmanager
async def kube(cluster: Any) -> AsyncIterator[Client]:
    client = await Client.from_kubeconfig(cluster.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture(scope="module")
def kwok_crd(cluster: Any) -> None:
    """The KWOKNodeClass CRD, generated from the model (applying it again is harmless)."""
    (text,) = generate([API_EXTENSION]).values()
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=text)
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    f"crd/{KWOK_NODE_CLASS.plural}.{KWOK_NODE_CLASS.group}")


async def ready_node_class(client: Client) -> None:
    with contextlib.suppress(errors.AlreadyExists):
        await client.create(KWOK_NODE_CLASS, {"metadata": {"name": NODE_CLASS}, "spec": {}})


def nodepool(
    name: str, select: str, *, weight: int | None = None,
    limits: Mapping[str, str] | None = None,
    requirements: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": {SELECT: select}},
            "spec": {
                "nodeClassRef": {"group": KWOK_NODE_CLASS.group, "kind": KWOK_NODE_CLASS.kind,
                                 "name": NODE_CLASS},
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    *requirements,
                ],
                "expireAfter": "Never",
            },
        },
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
    }
    if weight is not None:
        spec["weight"] = weight
    if limits:
        spec["limits"] = dict(limits)
    return {"metadata": {"name": name}, "spec": spec}


def deployment(name: str, select: str, replicas: int, cpu: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "nodeSelector": {SELECT: select},
                    "containers": [{
                        "name": "pause",
                        "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": cpu}},
                    }],
                },
            },
        },
    }


async def scale(client: Client, namespace: str, name: str, replicas: int) -> None:
    await client.patch(kinds.DEPLOYMENT, name, {"spec": {"replicas": replicas}},
                       namespace=namespace)


async def running(client: Client, namespace: str, app: str, replicas: int) -> list[Any]:
    pods = await client.list(kinds.POD, namespace=namespace, label_selector={"app": app})
    up = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return up if len(up) == replicas else []


def pool_of(obj: Mapping[str, Any]) -> str:
    return str((obj["metadata"].get("labels") or {}).get("karpenter.sh/nodepool", ""))


async def nodes_of(client: Client, pools: Sequence[str]) -> list[Any]:
    return [n for n in await client.list(kinds.NODE) if pool_of(n) in pools]


async def nodeclaims_of(client: Client, pools: Sequence[str]) -> list[Any]:
    return [nc for nc in await client.list(NODE_CLAIM) if pool_of(nc) in pools]


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


async def clean_up(client: Client, namespace: str, app: str, pools: Sequence[str]) -> list[str]:
    """Delete the workload, NodePools and NodeClaims while karpy still runs and wait for
    termination to finish. Returns what had to be forced (should be nothing)."""
    forced: list[str] = []
    with contextlib.suppress(errors.NotFound):
        await client.delete(kinds.DEPLOYMENT, app, namespace=namespace,
                            propagation_policy="Foreground")
    for pool in pools:
        with contextlib.suppress(errors.NotFound):
            await client.delete(NODE_POOL, pool)
    for nc in await nodeclaims_of(client, pools):
        with contextlib.suppress(errors.NotFound):
            await client.delete(NODE_CLAIM, nc["metadata"]["name"])

    async def all_gone() -> bool:
        return not await nodeclaims_of(client, pools) and not await nodes_of(client, pools)

    try:
        await eventually(all_gone, timeout=180, what="NodeClaims and Nodes to be terminated")
    except AssertionError:
        for kind in (NODE_CLAIM, kinds.NODE):
            for obj in await client.list(kind):
                if pool_of(obj) in pools:
                    name = obj["metadata"]["name"]
                    forced.append(f"{kind.kind}/{name}")
                    with contextlib.suppress(errors.NotFound):
                        await client.patch(kind, name, {"metadata": {"finalizers": None}})
                        await client.delete(kind, name)
    return forced


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
    async with kube(cluster) as client, karpy_operator(cluster) as op:
        await ready_node_class(client)
        await client.create(NODE_POOL, nodepool(pool, app))
        await client.create(kinds.DEPLOYMENT, deployment(app, app, 0, "1"),
                            namespace=namespace)
        forced: list[str] = []
        try:
            started = time.monotonic()
            await scale(client, namespace, app, replicas)
            pods = await eventually(lambda: running(client, namespace, app, replicas),
                                    timeout=300, what=f"{replicas} pods Running")
            elapsed = time.monotonic() - started

            claims = {nc["status"].get("nodeName"): nc
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
            forced = await clean_up(client, namespace, app, [pool])
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
    async with kube(cluster) as client, karpy_process(cluster) as op:
        await ready_node_class(client)
        await client.create(NODE_POOL, nodepool(pool, app, requirements=small))
        await client.create(kinds.DEPLOYMENT, deployment(app, app, 0, "1"),
                            namespace=namespace)
        forced: list[str] = []
        try:
            started = time.monotonic()
            await scale(client, namespace, app, replicas)
            await eventually(lambda: running(client, namespace, app, replicas),
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
            forced = await clean_up(client, namespace, app, [pool])
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
    async with kube(cluster) as client, karpy_operator(cluster, settings=settings) as op:
        await ready_node_class(client)
        await client.create(NODE_POOL, nodepool(limited, app, weight=100,
                                                limits={"cpu": str(limit_cpu)}))
        forced: list[str] = []
        try:
            await client.create(kinds.DEPLOYMENT, deployment(app, app, replicas, "1"),
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
            await client.create(NODE_POOL, nodepool(fallback, app, weight=1))
            await eventually(lambda: running(client, namespace, app, replicas),
                             timeout=300, what=f"{replicas} pods Running")
            assert {nc["metadata"]["name"] for nc in
                    await nodeclaims_of(client, [limited])} == claims_before
            assert await nodes_of(client, [fallback])
            print(f"\nacceptance 3: limited pool stopped at "
                  f"{capacity / 1000:g}/{limit_cpu} CPU on {len(nodes)} node(s); "
                  f"fallback pool took the rest on "
                  f"{len(await nodes_of(client, [fallback]))} node(s)")
        finally:
            forced = await clean_up(client, namespace, app, pools)
        assert forced == [], f"termination left these behind: {forced}"


async def test_the_heavier_pool_is_used_first(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    heavy, light, app = "prov-heavy", "prov-light", "prov-weights"
    pools = [heavy, light]
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0)
    async with kube(cluster) as client, karpy_operator(cluster, settings=settings):
        await ready_node_class(client)
        await client.create(NODE_POOL, nodepool(light, app, weight=1))
        await client.create(NODE_POOL, nodepool(heavy, app, weight=90))
        forced: list[str] = []
        try:
            await client.create(kinds.DEPLOYMENT, deployment(app, app, 6, "1"),
                                namespace=namespace)
            pods = await eventually(lambda: running(client, namespace, app, 6),
                                    timeout=180, what="6 pods Running")
            used = {pool_of(await client.get(kinds.NODE, p["spec"]["nodeName"])) for p in pods}
            assert used == {heavy}
            assert await nodeclaims_of(client, [light]) == []
        finally:
            forced = await clean_up(client, namespace, app, pools)
        assert forced == [], f"termination left these behind: {forced}"
