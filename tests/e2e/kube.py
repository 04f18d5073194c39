"""What the end-to-end tests create in the cluster, how they wait on it, and how they
clean it up.

Each test module owns a KWOKNodeClass, NodePools selected by a template label only its
pods ask for, and a Deployment of pause pods; the builders here take those names, so the
modules differ only in what they assert. :func:`clean_up` deletes everything a test made
while karpy still runs, so termination itself is exercised, and reports what it had to
force.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from karpy.apis.crdgen import generate
from karpy.cloudprovider.kwok import API_EXTENSION
from karpy.runtime import Kind, KubeClient, errors, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

__all__ = [
    "KWOK_NODE_CLASS",
    "clean_up",
    "connect",
    "deployment",
    "eventually",
    "gone",
    "install_kwok_crd",
    "nodepool",
    "pool_objects",
    "pool_of",
    "ready_node_class",
    "running_pods",
]

T = TypeVar("T")

KWOK_NODE_CLASS = Kind(group="karpenter.kwok.sh", version="v1alpha1", plural="kwoknodeclasses",
                       kind="KWOKNodeClass", namespaced=False)


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
async def connect(cluster: Any) -> AsyncIterator[KubeClient]:
    """A client of ``cluster``'s API server (reading live, not through a cache)."""
    client = await KubeClient.from_kubeconfig(cluster.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


def install_kwok_crd(cluster: Any) -> None:
    """Apply the KWOKNodeClass CRD, generated from the model (applying it again is
    harmless), and wait until it is served."""
    (text,) = generate([API_EXTENSION]).values()
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=text)
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    f"crd/{KWOK_NODE_CLASS.plural}.{KWOK_NODE_CLASS.group}")


async def ready_node_class(client: KubeClient, name: str) -> None:
    """The KWOKNodeClass ``name`` (Ready by the schema's default status)."""
    with contextlib.suppress(errors.AlreadyExists):
        await client.create(KWOK_NODE_CLASS, {"metadata": {"name": name}, "spec": {}})


def nodepool(
    name: str,
    *,
    node_class: str,
    labels: Mapping[str, str],
    weight: int | None = None,
    limits: Mapping[str, str] | None = None,
    requirements: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A NodePool of amd64/linux kwok nodes of ``node_class`` whose nodes carry
    ``labels``; nodes never expire and are never consolidated."""
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": dict(labels)},
            "spec": {
                "nodeClassRef": {"group": KWOK_NODE_CLASS.group, "kind": KWOK_NODE_CLASS.kind,
                                 "name": node_class},
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


def deployment(
    name: str, *, node_selector: Mapping[str, str], replicas: int, cpu: str
) -> dict[str, Any]:
    """A Deployment of ``replicas`` pause pods labelled ``app: name``, each requesting
    ``cpu``, that go away at once when deleted."""
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
                    "nodeSelector": dict(node_selector),
                    "containers": [{
                        "name": "pause",
                        "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": cpu}},
                    }],
                },
            },
        },
    }


async def running_pods(client: KubeClient, namespace: str, app: str, replicas: int) -> list[Any]:
    """The ``app`` pods once exactly ``replicas`` of them are Running (else empty)."""
    pods = await client.list(kinds.POD, namespace=namespace, label_selector={"app": app})
    up = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return up if len(up) == replicas else []


async def moved_pods(client: KubeClient, namespace: str, app: str, away_from: str) -> list[Any]:
    """The ``app`` pods Running, not terminating, on a node other than ``away_from``.

    A pod evicted from a node without a kubelet (taken from kwok) lingers, terminating
    and still "Running", until pod GC takes it; what a user sees is its replacement.
    """
    pods = await client.list(kinds.POD, namespace=namespace, label_selector={"app": app})
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
            and p["spec"].get("nodeName") not in (None, away_from)]


def pool_of(obj: Mapping[str, Any]) -> str:
    """The NodePool a Node or NodeClaim belongs to ("" if none)."""
    return str((obj["metadata"].get("labels") or {}).get("karpenter.sh/nodepool", ""))


async def pool_objects(client: KubeClient, kind: Kind, pools: Sequence[str]) -> list[Any]:
    """The Nodes or NodeClaims (``kind``) of the NodePools ``pools``."""
    return [o for o in await client.list(kind) if pool_of(o) in pools]


async def gone(client: KubeClient, kind: Kind, name: str) -> bool:
    """Whether the object no longer exists."""
    try:
        await client.get(kind, name)
    except errors.NotFound:
        return True
    return False


async def clean_up(
    client: KubeClient,
    namespace: str,
    app: str,
    pools: Sequence[str],
    *,
    timeout: float,  # noqa: ASYNC109 - a deadline for the polling, not an I/O timeout
) -> list[str]:
    """Delete the workload ``app``, the NodePools and their NodeClaims while karpy still
    runs, and wait up to ``timeout`` seconds for termination to finish. Returns what had
    to be forced (should be nothing)."""
    forced: list[str] = []
    with contextlib.suppress(errors.NotFound):
        await client.delete(kinds.DEPLOYMENT, app, namespace=namespace,
                            propagation_policy="Foreground")
    for pool in pools:
        with contextlib.suppress(errors.NotFound):
            await client.delete(NODE_POOL, pool)
    for nc in await pool_objects(client, NODE_CLAIM, pools):
        with contextlib.suppress(errors.NotFound):
            await client.delete(NODE_CLAIM, nc["metadata"]["name"])

    async def all_gone() -> bool:
        return (not await pool_objects(client, NODE_CLAIM, pools)
                and not await pool_objects(client, kinds.NODE, pools))

    try:
        await eventually(all_gone, timeout=timeout, what="NodeClaims and Nodes to be terminated")
    except AssertionError:
        # Leave the shared cluster clean for the next test, and report it.
        for kind in (NODE_CLAIM, kinds.NODE):
            for obj in await pool_objects(client, kind, pools):
                name = obj["metadata"]["name"]
                forced.append(f"{kind.kind}/{name}")
                with contextlib.suppress(errors.NotFound):
                    await client.patch(kind, name, {"metadata": {"finalizers": None}})
                    await client.delete(kind, name)
    return forced
