"""End to end: the NodeClaim lifecycle against the local cluster with the kwok provider.

Issue 7, acceptance 4 and 5:

4. Insufficient capacity injected on the cheapest offering: the NodeClaim pinned to it is
   deleted, the offering is marked unavailable, and the pods still end Running on a node
   of another offering.
5. A launch whose Node never registers: its NodeClaim is deleted once the registration
   timeout (shortened through ``Settings.registration_ttl``) passes, and a new NodeClaim
   takes its place.

Each test runs karpy in-process (tests/e2e/harness.py), uses its own KWOKNodeClass,
NodePools (selected by a template label only its pods ask for) and namespace, and
deletes its NodeClaims, Nodes and NodePools before karpy stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

import pytest
from harness import karpy_operator

from karpy.apis.crdgen import generate
from karpy.cloudprovider.kwok import API_EXTENSION, generate_catalogue
from karpy.cloudprovider.kwok._catalogue import to_instance_types
from karpy.controllers.settings import Settings
from karpy.runtime import Client, Kind, errors, kinds
from karpy.scheduling import resources as res

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

T = TypeVar("T")

NODE_POOL = Kind(group="karpenter.sh", version="v1", plural="nodepools", kind="NodePool",
                 namespaced=False)
NODE_CLAIM = Kind(group="karpenter.sh", version="v1", plural="nodeclaims", kind="NodeClaim",
                  namespaced=False)
KWOK_NODE_CLASS = Kind(group="karpenter.kwok.sh", version="v1alpha1", plural="kwoknodeclasses",
                       kind="KWOKNodeClass", namespaced=False)
NODE_CLASS = "lifecycle-e2e"
SELECT = "karpy-e2e"  # the template label a test's pods select their NodePools by
POD_CPU = "500m"


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
    """The tests' KWOKNodeClass (Ready by the schema's default status)."""
    with contextlib.suppress(errors.AlreadyExists):
        await client.create(KWOK_NODE_CLASS, {"metadata": {"name": NODE_CLASS}, "spec": {}})


def nodepool(
    name: str, select: str, *, weight: int, requirements: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "weight": weight,
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
        },
    }


def deployment(name: str, select: str, replicas: int) -> dict[str, Any]:
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
                        "resources": {"requests": {"cpu": POD_CPU}},
                    }],
                },
            },
        },
    }


async def running_pods(client: Client, namespace: str, app: str, replicas: int) -> list[Any]:
    pods = await client.list(kinds.POD, namespace=namespace, label_selector={"app": app})
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return running if len(running) == replicas else []


async def nodeclaims_of(client: Client, pools: list[str]) -> list[Any]:
    found = await client.list(NODE_CLAIM)
    return [nc for nc in found if nc["metadata"].get("labels", {}).get("karpenter.sh/nodepool")
            in pools]


async def gone(client: Client, kind: Kind, name: str) -> bool:
    try:
        await client.get(kind, name)
    except errors.NotFound:
        return True
    return False


def condition(obj: Any, type_: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return str(c["status"])
    return None


async def clean_up(client: Client, namespace: str, app: str, pools: list[str]) -> list[str]:
    """Delete the test's workload, NodeClaims and NodePools while karpy still runs, and
    wait for termination to finish. Returns what had to be forced (should be nothing)."""
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
        claims = await nodeclaims_of(client, pools)
        nodes = [n for n in await client.list(kinds.NODE)
                 if n["metadata"].get("labels", {}).get("karpenter.sh/nodepool") in pools]
        return not claims and not nodes

    try:
        await eventually(all_gone, timeout=90, what="NodeClaims and Nodes to be terminated")
    except AssertionError:
        # Leave the shared cluster clean for the next test, and report it.
        for kind in (NODE_CLAIM, kinds.NODE):
            for obj in await client.list(kind):
                if obj["metadata"].get("labels", {}).get("karpenter.sh/nodepool") in pools:
                    name = obj["metadata"]["name"]
                    forced.append(f"{kind.kind}/{name}")
                    with contextlib.suppress(errors.NotFound):
                        await client.patch(kind, name, {"metadata": {"finalizers": None}})
                        await client.delete(kind, name)
    return forced


def cheapest_offering() -> tuple[str, str, str]:
    """The cheapest kwok offering (instance type, zone, capacity type) for one pod."""
    need = res.parse_resource_list({"cpu": POD_CPU})
    best: tuple[float, str, str, str] | None = None
    for it in to_instance_types(generate_catalogue()):
        if it.requirements.labels().get("kubernetes.io/arch") != "amd64":
            continue
        if it.requirements.labels().get("kubernetes.io/os") != "linux":
            continue
        if not res.fits(need, it.allocatable):
            continue
        for o in it.offerings:
            rank = (o.price, it.name, o.zone, o.capacity_type)
            if best is None or rank < best:
                best = rank
    assert best is not None
    return best[1], best[2], best[3]


def parse_time(text: str) -> datetime:
    """An RFC 3339 time as the API server and karpy's log lines write it."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def nodeclaim_of(record: dict[str, Any]) -> str:
    return str((record.get("NodeClaim") or {}).get("name", ""))


# -- acceptance 4 ----------------------------------------------------------------------


async def test_insufficient_capacity_on_the_cheapest_offering(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    instance_type, zone, capacity_type = cheapest_offering()
    pinned, fallback, app = "lc-ice-pinned", "lc-ice-open", "lc-ice"
    pools = [pinned, fallback]
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0)
    faults = {"insufficientCapacity": f"{instance_type}/{zone}/{capacity_type}"}
    async with kube(cluster) as client, karpy_operator(
        cluster, settings=settings, provider_settings=faults
    ) as op:
        await ready_node_class(client)
        # The heavier pool offers only the cheapest offering, so its NodeClaim has nowhere
        # else to go when that offering has no capacity; the other pool offers the rest.
        await client.create(NODE_POOL, nodepool(pinned, app, weight=100, requirements=[
            {"key": "node.kubernetes.io/instance-type", "operator": "In",
             "values": [instance_type]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]},
        ]))
        await client.create(NODE_POOL, nodepool(fallback, app, weight=1, requirements=[]))
        forced: list[str] = []
        try:
            await client.create(kinds.DEPLOYMENT, deployment(app, app, 2), namespace=namespace)

            failed, *_ = await op.wait_for_log(
                "failed launching nodeclaim",
                where=lambda r: nodeclaim_of(r).startswith(pinned + "-"), timeout=90,
            )
            victim = nodeclaim_of(failed)
            assert "insufficient capacity" in failed["error"]
            await eventually(lambda: gone(client, NODE_CLAIM, victim), timeout=60,
                             what=f"NodeClaim {victim} to be deleted")
            event_reasons = [
                e["reason"] for e in await client.list(kinds.EVENT, namespace="default")
                if e["involvedObject"].get("name") == victim
            ]
            assert "InsufficientCapacityError" in event_reasons

            pods = await eventually(lambda: running_pods(client, namespace, app, 2),
                                    timeout=120, what="both pods Running")
            for pod in pods:
                node = await client.get(kinds.NODE, pod["spec"]["nodeName"])
                labels = node["metadata"]["labels"]
                offering = (labels["node.kubernetes.io/instance-type"],
                            labels["topology.kubernetes.io/zone"],
                            labels["karpenter.sh/capacity-type"])
                assert offering != (instance_type, zone, capacity_type)
                assert labels["karpenter.sh/nodepool"] == fallback
            launched = [nodeclaim_of(r) for r in op.messages("launched nodeclaim")]
            assert any(name.startswith(fallback + "-") for name in launched)
            assert not any(name.startswith(pinned + "-") for name in launched)
        finally:
            forced = await clean_up(client, namespace, app, pools)
        assert forced == [], f"termination left these behind: {forced}"


# -- acceptance 5 ----------------------------------------------------------------------


async def test_a_node_that_never_registers_is_replaced(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    pool, app = "lc-unregistered", "lc-unregistered"
    ttl = 20.0
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0, registration_ttl=ttl)
    async with kube(cluster) as client, karpy_operator(
        cluster, settings=settings, provider_settings={"unregisteredLaunches": "1"}
    ) as op:
        await ready_node_class(client)
        await client.create(NODE_POOL, nodepool(pool, app, weight=1, requirements=[]))
        forced: list[str] = []
        try:
            await client.create(kinds.DEPLOYMENT, deployment(app, app, 1), namespace=namespace)

            first, *_ = await op.wait_for_log(
                "launched nodeclaim", where=lambda r: nodeclaim_of(r).startswith(pool + "-"),
                timeout=90,
            )
            lost = nodeclaim_of(first)
            created = parse_time((await client.get(NODE_CLAIM, lost))["metadata"][
                "creationTimestamp"])
            [timed_out] = await op.wait_for_log(
                "terminating due to timeout", where=lambda r: nodeclaim_of(r) == lost,
                timeout=ttl + 60,
            )
            assert timed_out["reason"] == "registration_timeout"
            assert timed_out["timeout"] == "20s"
            # not before the timeout, counted from the NodeClaim's creation
            assert (parse_time(timed_out["time"]) - created).total_seconds() >= ttl
            assert not [r for r in op.messages("registered nodeclaim") if nodeclaim_of(r) == lost]
            await eventually(lambda: gone(client, NODE_CLAIM, lost), timeout=60,
                             what=f"NodeClaim {lost} to be deleted")

            [pod] = await eventually(lambda: running_pods(client, namespace, app, 1),
                                     timeout=120, what="the pod Running")
            node = await client.get(kinds.NODE, pod["spec"]["nodeName"])
            [replacement] = [
                nc for nc in await nodeclaims_of(client, [pool])
                if nc["status"].get("providerID") == node["spec"]["providerID"]
            ]
            assert replacement["metadata"]["name"] != lost
            assert condition(replacement, "Ready") == "True"
            registered = [nodeclaim_of(r) for r in op.messages("registered nodeclaim")]
            assert replacement["metadata"]["name"] in registered
        finally:
            forced = await clean_up(client, namespace, app, [pool])
        assert forced == [], f"termination left these behind: {forced}"
