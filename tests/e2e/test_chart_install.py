"""End to end: the Helm chart's objects in the real cluster, and karpy started as the
chart's container would start it.

The chart is rendered (``helm template``, seed-style values) and applied server-side
into a fresh namespace under a release name of its own; the Deployment, ServiceAccount,
RBAC, PDB and Service must exist with those values. No image runs here (kwok nodes run
no containers), so the container's start is reproduced: ``karpy run`` with exactly the
container's environment (its fieldRefs resolved as the kubelet would), no flags but the
test harness's ports, and no kubeconfig: in-cluster configuration, from
KUBERNETES_SERVICE_HOST/PORT and a token of the chart's ServiceAccount with the cluster's
CA in a directory laid out like /var/run/secrets/kubernetes.io/serviceaccount
(``KARPY_SERVICE_ACCOUNT_DIR`` points karpy there; a pod needs no such variable).
Scaling inflate up must launch NodeClaims whose nodes run it; scaling it to 0 must let
emptiness consolidation remove them, and no request may be refused: the chart's RBAC is
all karpy gets.
"""

from __future__ import annotations

import base64
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from charts.charts_support import container_env, one, render
from controlplane.fixtures import KubectlError
from harness import in_cluster_env, karpy_process
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
from test_rbac import denied_lines

from karpy.runtime import errors, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

RELEASE = "karpy-chart-e2e"  # contains "karpy": the objects are named after the release
NODE_CLASS = "chart-e2e"
POOL = "chart-e2e"
APP = "chart-inflate"
SELECT = "karpy-e2e-chart"
REPLICAS = 2


def values(namespace: str) -> list[str]:
    return [
        "--set", "cloudProvider=kwok",
        "--set", "settings.clusterName=chart-e2e",
        "--set", "controller.resources.requests.cpu=1",
        "--set", "controller.resources.requests.memory=1Gi",
        "--set", "controller.resources.limits.cpu=1",
        "--set", "controller.resources.limits.memory=1Gi",
        "--set-string", "serviceAccount.annotations.example\\.com/role=seed",
        "--set", f"podDisruptionBudget.name={RELEASE}",
        # The controller pods must not start karpy here: they could not run anyway.
        "--set", "replicas=0",
    ]  # fmt: skip


@pytest.fixture
def installed(cluster: Any, namespace: str) -> Any:
    docs = render(*values(namespace), release=RELEASE, namespace=namespace)
    stream = "\n---\n".join(json.dumps(d) for d in docs)  # JSON: no YAML 1.1 surprises
    cluster.kubectl("apply", "--server-side", "-f", "-", input=stream)
    try:
        yield docs
    finally:
        # Not the Namespace of the kwok provider's records: deleting it (without waiting)
        # left the next install's Role there refused while it was terminating.
        kept = "\n---\n".join(json.dumps(d) for d in docs if d.get("kind") != "Namespace")
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=kept)


def resolve(env: dict[str, Any], namespace: str) -> dict[str, str]:
    """The container's environment as the kubelet would give it to karpy."""
    out = {}
    for name, value in env.items():
        if isinstance(value, str):
            out[name] = value
        elif "fieldRef" in value:
            assert value["fieldRef"]["fieldPath"] == "metadata.namespace"
            out[name] = namespace
        elif "resourceFieldRef" in value:
            resource = value["resourceFieldRef"]["resource"]
            out[name] = {"requests.cpu": "1000", "limits.memory": str(1 << 30)}[resource]
    return out


def service_account_env(
    cluster: Any, namespace: str, account: str, directory: Path
) -> dict[str, str]:
    """What the chart's pod would get: a token of its ServiceAccount and the cluster's CA."""
    token = cluster.kubectl("create", "token", account, "-n", namespace, "--duration=1h").strip()
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    ca = base64.b64decode(admin["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    return in_cluster_env(server=cluster.server, token=token, ca_pem=ca, namespace=namespace,
                          directory=directory)  # fmt: skip


def test_rendered_chart_applies_with_its_values(
    cluster: Any, namespace: str, installed: Any
) -> None:
    deploy = cluster.kubectl_json("get", "deployment", RELEASE, "-n", namespace)
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == RELEASE
    sa = cluster.kubectl_json("get", "serviceaccount", RELEASE, "-n", namespace)
    assert sa["metadata"]["annotations"]["example.com/role"] == "seed"
    pdb = cluster.kubectl_json("get", "poddisruptionbudget", RELEASE, "-n", namespace)
    assert pdb["spec"]["maxUnavailable"] == 1
    service = cluster.kubectl_json("get", "service", RELEASE, "-n", namespace)
    assert [p["port"] for p in service["spec"]["ports"]] == [8080]
    for kind, name in (
        ("clusterrole", RELEASE),
        ("clusterrole", f"{RELEASE}-kwok"),
        ("clusterrolebinding", RELEASE),
        ("clusterrolebinding", f"{RELEASE}-kwok"),
    ):
        binding = cluster.kubectl_json("get", kind, name)
        if kind == "clusterrolebinding":
            assert binding["subjects"] == [
                {"kind": "ServiceAccount", "name": RELEASE, "namespace": namespace}
            ]
    role = cluster.kubectl_json("get", "role", RELEASE, "-n", namespace)
    assert {v for r in role["rules"] for v in r["verbs"]} == {"get", "create", "update"}
    # What the chart's ServiceAccount may do is what karpy needs and no more.
    can = cluster.kubectl(
        "auth", "can-i", "create", "nodeclaims.karpenter.sh",
        f"--as=system:serviceaccount:{namespace}:{RELEASE}",
    ).strip()  # fmt: skip
    assert can == "yes"
    with pytest.raises(KubectlError) as refused:  # can-i exits 1 for "no"
        cluster.kubectl(
            "auth", "can-i", "get", "secrets", "-n", namespace,
            f"--as=system:serviceaccount:{namespace}:{RELEASE}",
        )  # fmt: skip
    assert refused.value.returncode == 1


async def test_karpy_as_the_chart_starts_it_provisions_and_deprovisions(
    cluster: Any, namespace: str, kwok_crd: None, installed: Any, tmp_path: Path
) -> None:
    env = resolve(container_env(one(installed, "Deployment")), namespace)
    assert env["SYSTEM_NAMESPACE"] == namespace and env["CLOUD_PROVIDER"] == "kwok"
    pod = service_account_env(cluster, namespace, RELEASE, tmp_path / "serviceaccount")
    pool = nodepool(POOL, node_class=NODE_CLASS, labels={SELECT: APP})
    # Empty nodes go as soon as the disruption controller has validated the command.
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}
    async with connect(cluster) as admin:
        await ready_node_class(admin, NODE_CLASS)
        await admin.create(NODE_POOL, pool)
        try:
            # No kubeconfig: karpy finds the API server and its credentials as in a pod.
            async with karpy_process(
                cluster, leader_election=True, env=env, service_account=pod
            ) as karpy:
                try:
                    await karpy.wait_for_log("successfully acquired lease", timeout=90)
                    await admin.get(kinds.LEASE, "karpenter-leader-election", namespace=namespace)
                    await admin.create(
                        kinds.DEPLOYMENT,
                        deployment(APP, node_selector={SELECT: APP}, replicas=REPLICAS,
                                   cpu="500m"),
                        namespace=namespace,
                    )  # fmt: skip
                    pods = await eventually(
                        lambda: running_pods(admin, namespace, APP, REPLICAS),
                        timeout=120, what=f"{REPLICAS} inflate pods Running",
                    )  # fmt: skip
                    nodes = {n["metadata"]["name"]
                             for n in await pool_objects(admin, kinds.NODE, [POOL])}  # fmt: skip
                    assert nodes and {p["spec"]["nodeName"] for p in pods} <= nodes
                    claims = await pool_objects(admin, NODE_CLAIM, [POOL])
                    # Every node is a NodeClaim's: karpy launched them (kwok's provider).
                    assert nodes <= {c.get("status", {}).get("nodeName") for c in claims}

                    # Deprovisioning: inflate scaled to 0; the empty nodes are removed
                    # by emptiness consolidation while the pool stays.
                    await admin.patch(kinds.DEPLOYMENT, APP, {"spec": {"replicas": 0}},
                                      namespace=namespace)  # fmt: skip

                    async def emptied() -> bool:
                        return not await pool_objects(admin, kinds.NODE, [POOL]) and not (
                            await pool_objects(admin, NODE_CLAIM, [POOL]))

                    await eventually(emptied, timeout=180,
                                     what="empty nodes and their NodeClaims removed")  # fmt: skip
                    disrupted = [r for r in karpy.logs if r.get("message") == "disrupting node(s)"]
                    assert disrupted, "the nodes were not removed by disruption"
                    assert all(str(r.get("reason", "")).lower() == "empty" for r in disrupted), (
                        disrupted)
                    assert karpy.returncode is None, f"karpy exited:\n{karpy.tail()}"
                except AssertionError as failure:
                    if denied := denied_lines(karpy.lines):
                        raise AssertionError(
                            f"{failure}\nrefused requests:\n" + "\n".join(denied[:10])
                        ) from failure
                    raise
                finally:
                    forced = await clean_up(admin, namespace, APP, [POOL], timeout=60)
            assert not forced, f"clean-up had to force {forced}"
            denied = denied_lines(karpy.lines)
            assert not denied, "the chart's RBAC refused karpy:\n" + "\n".join(denied)
        finally:
            with contextlib.suppress(errors.NotFound):
                await admin.delete(NODE_POOL, POOL)
