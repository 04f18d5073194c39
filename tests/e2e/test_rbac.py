"""End to end: karpy runs under its own ServiceAccount with only deploy/rbac.yaml's grants
(the Helm chart's RBAC, rendered by scripts/render-rbac.sh and kept fresh by
tests/charts, so this exercises the chart's grants).

The manifests are applied to the cluster, a token of the ``karpy`` ServiceAccount goes
into a kubeconfig of its own, and ``karpy run`` (leader election on, as deployed) gets
that kubeconfig. It must take the ``karpenter-leader-election`` Lease, provision a node
for a Deployment, drain and terminate that node when it is deleted (evicting its pods,
which then run on a new node), and clean up, without a single request being refused:
any "forbidden"/403 in its log means the RBAC is incomplete.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import karpy_process
from kube import (
    KWOK_NODE_CLASS,
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

from karpy.cloudprovider.kwok import RECORD_NAMESPACE
from karpy.runtime import KubeClient, errors, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "rbac.yaml"
SERVICE_ACCOUNT = "karpy"
SYSTEM_NAMESPACE = "kube-system"
LEASE = "karpenter-leader-election"
NODE_CLASS = "rbac-e2e"
POOL = "rbac-e2e"
APP = "rbac-inflate"
SELECT = "karpy-e2e-rbac"  # the template label this file's pods select the pool by
REPLICAS = 3

# A refused request: the API server's message always says "... is forbidden: User ...";
# a bare 403 (a status code in an error) counts too, but not digits inside other numbers.
_DENIED = re.compile(r"forbidden|(?<![\w.])403(?![\w.])", re.IGNORECASE)


def denied_lines(lines: list[str]) -> list[str]:
    """The log lines that report a request the API server refused."""
    return [line for line in lines if _DENIED.search(line)]


@pytest.fixture
def rbac(cluster: Any) -> Iterator[None]:
    """deploy/rbac.yaml applied; removed afterwards, with the Lease karpy held."""
    cluster.kubectl("apply", "-f", str(RBAC))
    try:
        yield
    finally:
        cluster.kubectl("delete", "-f", str(RBAC), "--ignore-not-found", "--wait=false")
        cluster.kubectl("delete", "lease", LEASE, "-n", SYSTEM_NAMESPACE, "--ignore-not-found")
        # Until it is gone, a terminating namespace refuses new records; later tests'
        # kwok launches would fail (and retry) instead of recreating it.
        cluster.kubectl("wait", "--for=delete", f"namespace/{RECORD_NAMESPACE}",
                        "--timeout=50s")


def service_account_kubeconfig(
    cluster: Any, path: Path, account: str = SERVICE_ACCOUNT
) -> Path:
    """A kubeconfig for ``cluster`` that authenticates as ServiceAccount ``account``
    (default: karpy's) of the system namespace."""
    token = cluster.kubectl("create", "token", account, "-n", SYSTEM_NAMESPACE,
                            "--duration=1h").strip()
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    ca = admin["clusters"][0]["cluster"]["certificate-authority-data"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "karpy", "cluster": {"server": cluster.server,
                                                   "certificate-authority-data": ca}}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "karpy", "context": {"cluster": "karpy", "user": account}}],
        "current-context": "karpy",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


async def test_karpy_provisions_and_terminates_under_its_own_service_account(
    cluster: Any, namespace: str, kwok_crd: None, rbac: None, tmp_path: Path
) -> None:
    kubeconfig = service_account_kubeconfig(cluster, tmp_path / "karpy.kubeconfig")

    # The kubeconfig really is the ServiceAccount: it reads nodes but no Secrets.
    as_karpy = await KubeClient.from_kubeconfig(str(kubeconfig))
    bystander = f"rbac-e2e-bystander-{namespace}"
    try:
        await as_karpy.list(kinds.NODE, live=True)
        with pytest.raises(errors.Forbidden):
            await as_karpy.list(kinds.SECRET, namespace=namespace, live=True)
        # The kwok provider's records have a namespace of their own: karpy may not
        # delete kube-system's ConfigMaps (kube-proxy's, CoreDNS's, the CA bundle).
        async with connect(cluster) as admin:
            await admin.create(kinds.CONFIG_MAP, {"metadata": {"name": bystander}},
                               namespace=SYSTEM_NAMESPACE)
        with pytest.raises(errors.Forbidden):
            await as_karpy.delete(kinds.CONFIG_MAP, bystander, namespace=SYSTEM_NAMESPACE)
    finally:
        await as_karpy.close()
        cluster.kubectl("delete", "configmap", bystander, "-n", SYSTEM_NAMESPACE,
                        "--ignore-not-found")

    async with connect(cluster) as admin:
        await ready_node_class(admin, NODE_CLASS)
        await admin.create(NODE_POOL, nodepool(POOL, node_class=NODE_CLASS,
                                               labels={SELECT: APP}))
        try:
            # A registration delay: each launch goes through an instance record
            # (create, list, get, delete in the records' namespace) under these grants.
            async with karpy_process(
                cluster, "--cloud-provider", "kwok",
                "--provider-setting", "registrationDelay=2s", kubeconfig=str(kubeconfig),
                leader_election=True, env={"SYSTEM_NAMESPACE": SYSTEM_NAMESPACE},
            ) as karpy:
                try:
                    acquired, *_ = await karpy.wait_for_log(
                        "successfully acquired lease", timeout=90
                    )
                    await karpy.wait_for_log("starting controllers", timeout=30)

                    # The Lease is held by this karpy, and renewed.
                    lease = await admin.get(kinds.LEASE, LEASE, namespace=SYSTEM_NAMESPACE)
                    spec = lease["spec"]
                    assert spec["holderIdentity"] == acquired["identity"]
                    renewed = datetime.fromisoformat(spec["renewTime"])
                    age = (datetime.now(UTC) - renewed).total_seconds()
                    assert age < spec["leaseDurationSeconds"], f"lease last renewed {age:.1f}s ago"

                    # Provisioning: the pods run on a node karpy created for them.
                    await admin.create(kinds.DEPLOYMENT,
                                       deployment(APP, node_selector={SELECT: APP},
                                                  replicas=REPLICAS, cpu="500m"),
                                       namespace=namespace)
                    pods = await eventually(
                        lambda: running_pods(admin, namespace, APP, REPLICAS),
                        timeout=120, what=f"{REPLICAS} pods Running")
                    nodes = {n["metadata"]["name"]
                             for n in await pool_objects(admin, kinds.NODE, [POOL])}
                    claims = await pool_objects(admin, NODE_CLAIM, [POOL])
                    assert nodes, "karpy created no node"
                    assert {p["spec"]["nodeName"] for p in pods} <= nodes
                    assert {(nc.get("status") or {}).get("nodeName") for nc in claims} == nodes

                    # Termination: deleting the node drains its pods through the
                    # Eviction API (with an event each), then the node and its NodeClaim
                    # go away, and the evicted pods run again on a new node.
                    for name in nodes:
                        cluster.kubectl("delete", "node", name, "--wait=false")

                    async def terminated() -> bool:
                        return (all([await gone(admin, kinds.NODE, n) for n in nodes])
                                and all([await gone(admin, NODE_CLAIM, nc["metadata"]["name"])
                                         for nc in claims]))

                    await eventually(terminated, timeout=120,
                                     what="the deleted nodes and their NodeClaims to be gone")
                    evicted = {e["involvedObject"]["name"]
                               for e in await admin.list(kinds.EVENT, namespace=namespace)
                               if e.get("reason") == "Evicted"}
                    assert evicted == {p["metadata"]["name"] for p in pods}

                    async def moved() -> list[Any]:
                        up = await running_pods(admin, namespace, APP, REPLICAS)
                        return [p for p in up if p["spec"]["nodeName"] not in nodes]

                    rerun = await eventually(moved, timeout=120,
                                             what=f"{REPLICAS} pods Running on a new node")
                    assert len(rerun) == REPLICAS
                    assert karpy.returncode is None, f"karpy exited:\n{karpy.tail()}"
                except AssertionError as failure:
                    # most likely why: name the missing grant
                    if denied := denied_lines(karpy.lines):
                        raise AssertionError(f"{failure}\nrefused requests:\n"
                                             + "\n".join(denied[:10])) from failure
                    raise
                finally:
                    forced = await clean_up(admin, namespace, APP, [POOL], timeout=60)
            assert not forced, f"clean-up had to force {forced}"
            denied = denied_lines(karpy.lines)
            assert not denied, "karpy was refused requests (deploy/rbac.yaml is incomplete):\n" \
                + "\n".join(denied)
        finally:
            with contextlib.suppress(errors.NotFound):
                await admin.delete(NODE_POOL, POOL)
            with contextlib.suppress(errors.NotFound):
                await admin.delete(KWOK_NODE_CLASS, NODE_CLASS)
