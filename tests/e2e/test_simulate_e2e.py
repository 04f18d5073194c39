"""End to end: ``karpy snapshot`` and ``karpy simulate`` against the local cluster
(issue 14, acceptance 1).

1,000 one-CPU pods are left pending while karpy is not running; ``karpy snapshot`` and
``karpy simulate`` run as a user would (subprocesses) under a ServiceAccount holding only
deploy/tools-rbac.yaml's get/list/watch — any write would be refused with 403 and fail
the run. Then karpy starts on the same state, and the NodeClaims it creates must be the
plan: the same NodePool, instance types (count and cheapest first), requests (so the
same pods per claim) and the same $/h. The plan with the NodePool changed to spot only
(``-f``) shows the difference.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import karpy_operator
from kube import (
    clean_up,
    connect,
    deployment,
    eventually,
    nodepool,
    pool_objects,
    ready_node_class,
)

from karpy.cloudprovider.kwok import generate_catalogue
from karpy.cloudprovider.kwok._catalogue import to_instance_types
from karpy.runtime import Client, KubeClient, errors, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL
from karpy.state.pods import failed_to_schedule
from karpy.tools.simulate import claim_row
from karpy.tools.view import LiveCluster, Snapshot, open_view

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TOOLS_RBAC = Path(__file__).resolve().parents[2] / "deploy" / "tools-rbac.yaml"
NODE_CLASS = "simulate-e2e"
POOL = "sim-e2e"
APP = "sim-inflate"
SELECT = "karpy-e2e-simulate"  # the template label this file's pods select the pool by
REPLICAS = 1000
SERVICE_ACCOUNT = "karpy-tools"
CAPACITY = "karpenter.sh/capacity-type"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
# Nodes of at most 16 CPU, so 1,000 one-CPU pods need dozens of NodeClaims (as in
# test_provisioning's 1,000-pod test).
SMALL = {"key": "karpenter.kwok.sh/instance-cpu", "operator": "Lt", "values": ["17"]}


def pool_manifest(capacity: str) -> dict[str, Any]:
    """The test's NodePool, of on-demand (as created) or spot (the what-if) capacity."""
    requirements = [SMALL, {"key": CAPACITY, "operator": "In", "values": [capacity]}]
    manifest = nodepool(POOL, node_class=NODE_CLASS, labels={SELECT: APP},
                        requirements=requirements)
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", **manifest}


@pytest.fixture
def read_only_kubeconfig(cluster: Any, namespace: str, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig authenticating as a ServiceAccount bound to deploy/tools-rbac.yaml's
    ClusterRole only."""
    binding = f"karpy-tools-{namespace}"
    cluster.kubectl("apply", "-f", str(TOOLS_RBAC))
    cluster.kubectl("create", "serviceaccount", SERVICE_ACCOUNT, "-n", namespace)
    cluster.kubectl("create", "clusterrolebinding", binding, "--clusterrole=karpy-tools",
                    f"--serviceaccount={namespace}:{SERVICE_ACCOUNT}")
    try:
        token = cluster.kubectl("create", "token", SERVICE_ACCOUNT, "-n", namespace,
                                "--duration=1h").strip()
        admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
        ca = admin["clusters"][0]["cluster"]["certificate-authority-data"]
        config = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "local", "cluster": {"server": cluster.server,
                                                       "certificate-authority-data": ca}}],
            "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
            "contexts": [{"name": "tools", "context": {"cluster": "local",
                                                       "user": SERVICE_ACCOUNT}}],
            "current-context": "tools",
        }
        path = tmp_path / "tools.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        yield path
    finally:
        cluster.kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found")


async def karpy(*args: str) -> tuple[str, str]:
    """Run the ``karpy`` command; its stdout and stderr (it must exit 0)."""
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "karpy.cli", *args],
        capture_output=True, text=True, check=False, timeout=600,
    )
    assert done.returncode == 0, f"karpy {' '.join(args)} exited {done.returncode}: " \
                                 f"{done.stderr[-2000:]}"
    assert "forbidden" not in done.stderr.lower(), done.stderr[-2000:]
    return done.stdout, done.stderr


async def unschedulable(client: Client, namespace: str) -> int | None:
    pods = await client.list(kinds.POD, namespace=namespace, label_selector={"app": APP})
    count = sum(1 for p in pods if failed_to_schedule(p))
    return count if count == REPLICAS else None


def plan_key(claim: Mapping[str, Any]) -> tuple[Any, ...]:
    types = claim["instanceTypes"]
    return (claim["nodepool"], types["count"], tuple(types["cheapest"]),
            tuple(sorted(claim["requests"].items())))


def requirement(claim: Mapping[str, Any], key: str) -> list[str] | None:
    for r in claim["spec"]["requirements"]:
        if r["key"] == key and r["operator"] == "In":
            return list(r["values"])
    return None


def nodeclaim_key(claim: Mapping[str, Any]) -> tuple[Any, ...]:
    types = requirement(claim, INSTANCE_TYPE) or []
    return (claim["metadata"]["labels"]["karpenter.sh/nodepool"], len(types), tuple(types[:5]),
            tuple(sorted(claim["spec"]["resources"]["requests"].items())))


def nodeclaim_price(claim: Mapping[str, Any]) -> float:
    """The cheapest offering the NodeClaim can launch, at the kwok catalogue's prices."""
    catalogue = {it.name: it for it in to_instance_types(generate_catalogue())}
    zones, capacity = requirement(claim, ZONE), requirement(claim, CAPACITY)
    return min(
        o.price
        for name in requirement(claim, INSTANCE_TYPE) or []
        for o in catalogue[name].offerings
        if o.available and (zones is None or o.zone in zones)
        and (capacity is None or o.capacity_type in capacity)
    )


def mine(claims: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [c for c in claims if c["nodepool"] == POOL]


async def test_simulate_plans_exactly_what_karpy_creates_and_never_writes(
    cluster: Any, namespace: str, kwok_crd: None, read_only_kubeconfig: Path, tmp_path: Path
) -> None:
    kubeconfig = str(read_only_kubeconfig)
    async with connect(cluster) as admin:
        await ready_node_class(admin, NODE_CLASS)
        await admin.create(NODE_POOL, pool_manifest("on-demand"))
        # What karpy's NodePool controllers wrote when it last ran: valid, NodeClass ready.
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        await admin.patch_status(NODE_POOL, POOL, {"status": {"conditions": [
            {"type": kind, "status": "True", "reason": kind, "message": "",
             "lastTransitionTime": now}
            for kind in ("ValidationSucceeded", "NodeClassReady", "Ready")]}})
        await admin.create(kinds.DEPLOYMENT,
                           deployment(APP, node_selector={SELECT: APP}, replicas=REPLICAS,
                                      cpu="1"), namespace=namespace)
        started_karpy = False
        try:
            await eventually(lambda: unschedulable(admin, namespace), timeout=180,
                             what=f"{REPLICAS} pods marked Unschedulable", every=1.0)

            # The ServiceAccount reads but may not write.
            as_tools = await KubeClient.from_kubeconfig(kubeconfig)
            try:
                await as_tools.list(NODE_CLAIM)
                with pytest.raises(errors.Forbidden):
                    await as_tools.create(NODE_CLAIM, {"metadata": {"name": "x"}, "spec": {}})
            finally:
                await as_tools.close()

            timings: dict[str, float] = {}
            snapshot = tmp_path / "snapshot.yaml"
            begun = time.monotonic()
            _, err = await karpy("snapshot", "--kubeconfig", kubeconfig, "-o", str(snapshot))
            timings["snapshot"] = time.monotonic() - begun
            assert err.startswith("karpy snapshot: wrote ")
            pods = Snapshot.load(snapshot).of(kinds.POD)
            assert sum(1 for p in pods if p["metadata"]["namespace"] == namespace) == REPLICAS
            begun = time.monotonic()
            out, _ = await karpy("simulate", "--snapshot", str(snapshot), "-o", "json")
            timings["simulate --snapshot"] = time.monotonic() - begun
            plan = json.loads(out)
            begun = time.monotonic()
            out, _ = await karpy("simulate", "--kubeconfig", kubeconfig, "-o", "json")
            timings["simulate --kubeconfig"] = time.monotonic() - begun
            live = json.loads(out)
            spot_file = tmp_path / "spot.yaml"
            spot_file.write_text(yaml.safe_dump(pool_manifest("spot")))
            out, _ = await karpy("simulate", "--snapshot", str(snapshot), "-f",
                                 str(spot_file), "-o", "json")
            spot = json.loads(out)

            claims = mine(plan["provisioning"]["nodeclaims"])
            assert claims, plan["provisioning"]
            assert sum(c["pods"] for c in claims) == REPLICAS
            assert not [p for p in plan["provisioning"]["pending"]
                        if p["pod"].startswith(f"{namespace}/")]
            assert Counter(map(plan_key, mine(live["provisioning"]["nodeclaims"]))) == \
                Counter(map(plan_key, claims)), "the live cluster and its snapshot differ"
            bound = plan["provisioning"]["lowerBound"]
            assert bound["pricePerHour"] <= plan["provisioning"]["pricePerHour"]

            # Spot only: every claim spot, and cheaper (kwok's spot is ~70 % of on-demand).
            spot_claims = mine(spot["provisioning"]["nodeclaims"])
            assert spot_claims and all(c["capacityTypes"] == ["spot"] for c in spot_claims)
            assert all(c["capacityTypes"] == ["on-demand"] for c in claims)
            change = spot["whatIf"]["difference"]["provisioningPerHour"]
            assert change["unchanged"] == pytest.approx(plan["provisioning"]["pricePerHour"])
            assert change["change"] < 0

            # The live view (what karpy top / explain build on) sees the same under the
            # same ServiceAccount: informers list and watch, the provisioner plans alike.
            async with open_view(LiveCluster(kubeconfig=kubeconfig)) as view:
                assert view.live
                mine_pending = [p for p in view.pending_pods() if p.namespace == namespace]
                assert len(mine_pending) == REPLICAS
                results = await view.schedule()
                assert results is not None
                live_claims = [claim_row(p).to_json() for p in results.new_nodeclaims]
                assert Counter(map(plan_key, mine(live_claims))) == \
                    Counter(map(plan_key, claims))

            # karpy, started on the same state, creates exactly the plan.
            started_karpy = True
            async with karpy_operator(cluster) as op:
                try:
                    async def created() -> list[Any] | None:
                        found = await pool_objects(admin, NODE_CLAIM, [POOL])
                        return found if len(found) >= len(claims) else None

                    begun = time.monotonic()
                    nodeclaims = await eventually(created, timeout=180,
                                                  what=f"{len(claims)} NodeClaims")
                    await op.wait_for_log("computed new nodeclaim(s) to fit pod(s)", timeout=30)
                    timings["karpy to create the NodeClaims"] = time.monotonic() - begun
                    nodeclaims = await pool_objects(admin, NODE_CLAIM, [POOL])
                    assert Counter(map(nodeclaim_key, nodeclaims)) == \
                        Counter(map(plan_key, claims))
                    karpy_price = sum(nodeclaim_price(c) for c in nodeclaims)
                    plan_price = sum(c["pricePerHour"] for c in claims)
                    assert karpy_price == pytest.approx(plan_price, abs=1e-4)
                    rounds = op.messages("computed new nodeclaim(s) to fit pod(s)")
                    print(f"\nacceptance 1: {REPLICAS} pending pods -> {len(claims)} NodeClaims "
                          f"planned and created, ${plan_price:.4f}/h both "
                          f"(lower bound ${bound['pricePerHour']:.4f}/h, "
                          f"{bound['abovePercent']} % above; spot only "
                          f"${spot['provisioning']['pricePerHour']:.4f}/h); karpy took "
                          f"{len(rounds)} round(s); "
                          + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))
                finally:
                    forced = await clean_up(admin, namespace, APP, [POOL], timeout=180)
                assert forced == [], f"termination left these behind: {forced}"
        finally:
            if not started_karpy:  # nothing was launched: the objects can simply go
                await admin.delete(kinds.DEPLOYMENT, APP, namespace=namespace)
                await admin.delete(NODE_POOL, POOL)
