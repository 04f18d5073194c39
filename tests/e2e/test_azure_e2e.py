"""End to end: ``karpy run --cloud-provider azure`` against the ARM test server and the
local cluster (issue 12).

The ARM-shaped HTTPS server (tests/providers/azure/azurearm) runs in this process; karpy
runs as a subprocess, as a user would, with the real SDK clients pointed at it (static token, the
server's CA, polling interval 0). A helper plays the kubelet: for every VM karpy creates
it registers the Node AKS would (providerID ``azure:///subscriptions/.../
virtualMachines/<name>``), and removes it when the VM goes.

1. inflate 0 -> 30 -> 0: all pods Running on Azure-launched nodes (every NIC in the
   load balancer's backend pools, with AKS's NSG: the subnet is a bring-your-own VNet's),
   then every node consolidated away; nothing is left on the server.
2. ZonalAllocationFailed on the cheapest offering: the pods still end Running, in
   another zone; nothing is left on the server.
3. LROs that outlast a reconcile (every operation takes 6 s, karpy waits 1 s): the
   NodeClaim is launched ahead of its VM, which ends Succeeded with its extension —
   exactly one VM and one NIC, none deleted by karpy. Then a ``spec.tags`` change is
   set in place on the VM, NIC and extension: no node is drifted or replaced.
4. GPU driver and OS disk: a GPU size's custom data installs the NVIDIA driver for
   ``gpu.mode: Driver`` (its GPU pod runs) and not for ``None``; a size whose cache disk
   holds the OS disk gets an ephemeral one, a smaller one a managed disk.
The AKSNodeClass is applied as ``karpenter.azure.com/v1alpha2`` (Azure's published
examples) and read back at v1beta1, Ready by karpy's status controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from azurearm.bootstrap import custom_data_script, script_variables
from azurearm.kubelet import Kubelet
from azurearm.server import ArmServer
from controlplane import crdsets
from harness import RunningKarpy, karpy_process
from kube import clean_up, connect, eventually, pool_objects, running_pods

from karpy.runtime import Client, Kind, errors, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SUBSCRIPTION = "11111111-2222-3333-4444-555555555555"
NODE_RG = "MC_rg-e2e_e2e_southcentralus"
SUBNET = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-e2e/providers/Microsoft.Network/"
    "virtualNetworks/aks-vnet/subnets/aks-subnet"
)
AKS_NODE_CLASS = Kind(group="karpenter.azure.com", version="v1beta1", plural="aksnodeclasses",
                      kind="AKSNodeClass", namespaced=False)
AKS_NODE_CLASS_V1ALPHA2 = Kind(group="karpenter.azure.com", version="v1alpha2",
                               plural="aksnodeclasses", kind="AKSNodeClass", namespaced=False)
NSG = "aks-agentpool-12345678-nsg"
NODE_CLASS = "azure-e2e"
SELECT = "karpy-e2e-azure"
CLEANUP_TIMEOUT = 240.0


@pytest.fixture(scope="module")
def azure_crds(cluster: Any) -> Iterator[None]:
    """The cluster serves the Azure CRD set: Karpenter's NodePool and NodeClaim with the
    Azure provider's label rules, as installed with karpy-azure."""
    with crdsets.serving(cluster, "azure"):
        yield


@pytest_asyncio.fixture
async def arm(tmp_path: Path) -> AsyncIterator[ArmServer]:
    server = ArmServer(tmp_path, page_size=50)
    await server.start()
    server.add_subnet(SUBNET)
    server.add_nsg(NSG, subscription=SUBSCRIPTION, resource_group=NODE_RG)
    server.add_load_balancer("kubernetes", {"kubernetes": [], "aksOutboundBackendPool": []},
                             subscription=SUBSCRIPTION, resource_group=NODE_RG)
    for image in ("2204gen2containerd", "2204containerd", "2204gen2arm64containerd"):
        server.state.image_versions[image] = ["202411.12.0"]
    try:
        yield server
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def azure_karpy(
    cluster: Any, arm: ArmServer, client: Client, **extra: str
) -> AsyncIterator[RunningKarpy]:
    """karpy with the Azure provider on ``arm`` (``extra``: more provider settings), and
    the kubelet helper, until exit."""
    settings = {
        "subscriptionID": SUBSCRIPTION,
        "nodeResourceGroup": NODE_RG,
        "location": "southcentralus",
        "vnetSubnetID": SUBNET,
        "armEndpoint": arm.url,
        "pricingEndpoint": arm.url,
        "caBundle": str(arm.cert.cert_file),
        "credential": "static",
        "pollInterval": "0",
        # what the nodes' bootstrap carries (the kubelet helper reads labels, taints and
        # max pods from it); the CA comes from karpy's kubeconfig
        "clusterEndpoint": "https://e2e-dns.hcp.southcentralus.azmk8s.io:443",
        "sshPublicKey": "ssh-rsa AAAA e2e",
        **extra,
    }
    args = ["--cloud-provider", "azure", "--cluster-name", "e2e",
            "--batch-idle-duration", "1s", "--batch-max-duration", "5s",
            "--garbage-collection-grace", "10s"]
    for key, value in settings.items():
        args += ["--provider-setting", f"{key}={value}"]
    kubelet = Kubelet(arm, client, location="southcentralus", node_rg=NODE_RG)
    task = asyncio.create_task(kubelet.run(), name="e2e:azure-kubelet")
    try:
        # the bootstrap token as docs/providers/azure.md gives it: the environment (in a
        # pod, from a Secret), never a flag on the command line
        token = {"KUBELET_BOOTSTRAP_TOKEN": "abcdef.0123456789abcdef"}
        async with karpy_process(cluster, *args, env=token) as op:
            yield op
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def node_class_ready(client: Client) -> dict[str, Any] | None:
    obj = await client.get(AKS_NODE_CLASS, NODE_CLASS)
    ready = [c for c in (obj.get("status") or {}).get("conditions") or []
             if c["type"] == "Ready" and c["status"] == "True"]
    return dict(obj) if ready else None


async def apply_node_class(client: Client, name: str = NODE_CLASS, **spec: Any) -> None:
    """The AKSNodeClass, written as Azure's examples write it (v1alpha2)."""
    with contextlib.suppress(errors.AlreadyExists):
        await client.create(
            AKS_NODE_CLASS_V1ALPHA2,
            {
                "apiVersion": "karpenter.azure.com/v1alpha2",
                "kind": "AKSNodeClass",
                "metadata": {"name": name},
                "spec": {"imageFamily": "Ubuntu2204", "osDiskSizeGB": 64, **spec},
            },
        )


def pool(name: str, requirements: list[dict[str, Any]], consolidate_after: str,
         node_class: str = NODE_CLASS) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {SELECT: name}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass",
                                     "name": node_class},
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        *requirements,
                    ],
                    "expireAfter": "Never",
                },
            },
            "disruption": {"consolidationPolicy": "WhenEmpty",
                           "consolidateAfter": consolidate_after},
        },
    }


def inflate(name: str, replicas: int, cpu: str, **requests: str) -> dict[str, Any]:
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
                    "nodeSelector": {SELECT: name},
                    "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                                    "resources": {"requests": {"cpu": cpu, **requests},
                                                  "limits": requests}}],
                },
            },
        },
    }


async def nothing_left(arm: ArmServer) -> bool:
    return not arm.state.vms and not arm.state.nics


async def _none(found: Any) -> bool:
    return not await found


async def server_emptied(arm: ArmServer, op: RunningKarpy) -> None:
    """Wait until no VM or NIC is left on the server: termination deletes what NodeClaims
    own, karpy's garbage collection what a launch finished after its NodeClaim was gone."""
    try:
        await eventually(lambda: nothing_left(arm), timeout=180, what="nothing left on ARM")
    except AssertionError as failure:
        left = {n: (v.get("tags"), v["properties"].get("provisioningState"))
                for n, v in arm.state.vms.items()}
        raise AssertionError(
            f"{failure}: VMs {left}, NICs {sorted(arm.state.nics)}\n{op.tail(40)}"
        ) from failure


async def test_inflate_0_30_0(
    cluster: Any, namespace: str, arm: ArmServer, azure_crds: None
) -> None:
    app = "az-inflate"
    async with connect(cluster) as client, azure_karpy(cluster, arm, client) as op:
        await apply_node_class(client)
        got = await eventually(lambda: node_class_ready(client), timeout=60,
                               what="the AKSNodeClass Ready")
        assert got["apiVersion"] == "karpenter.azure.com/v1beta1"
        assert got["status"]["images"][0]["id"].endswith("/versions/202411.12.0")
        assert got["status"]["kubernetesVersion"]

        async def hashed() -> bool:
            obj = await client.get(AKS_NODE_CLASS, NODE_CLASS)
            annotations = obj["metadata"].get("annotations") or {}
            return bool(annotations.get("karpenter.azure.com/aksnodeclass-hash"))

        await eventually(hashed, timeout=30, what="the AKSNodeClass hash annotation")
        await client.create(NODE_POOL, pool(app, [
            {"key": "karpenter.azure.com/sku-cpu", "operator": "Lt", "values": ["17"]},
        ], consolidate_after="5s"))
        forced: list[str] = []
        try:
            started = time.monotonic()
            await client.create(kinds.DEPLOYMENT, inflate(app, 30, "500m"), namespace=namespace)
            pods = await eventually(lambda: running_pods(client, namespace, app, 30),
                                    timeout=300, what="30 pods Running")
            up = time.monotonic() - started
            nodes = {p["spec"]["nodeName"] for p in pods}
            vm_names = set(arm.state.vms)
            assert nodes <= vm_names, f"pods on nodes that are not Azure VMs: {nodes - vm_names}"
            for name in nodes:
                node = await client.get(kinds.NODE, name)
                assert node["spec"]["providerID"].startswith(
                    f"azure:///subscriptions/{SUBSCRIPTION}/resourceGroups/{NODE_RG.lower()}/"
                )
                assert node["metadata"]["labels"]["karpenter.azure.com/sku-name"]
            claims = await pool_objects(client, NODE_CLAIM, [app])
            sizes = sorted(c["metadata"]["labels"]["node.kubernetes.io/instance-type"]
                           for c in claims)
            print(f"\nazure e2e: 30 pods Running in {up:.1f}s on {len(nodes)} VMs {sizes}")
            # outbound networking: every NIC is in the load balancer's pools and, the
            # subnet being a bring-your-own VNet's, carries AKS's managed NSG
            lb = (f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{NODE_RG}/providers/"
                  "Microsoft.Network/loadBalancers/kubernetes/backendAddressPools/")
            for nic in arm.state.nics.values():
                config = nic["properties"]["ipConfigurations"][0]["properties"]
                assert [p["id"] for p in config["loadBalancerBackendAddressPools"]] == [
                    lb + "kubernetes", lb + "aksOutboundBackendPool"
                ], nic["name"]
                assert nic["properties"]["networkSecurityGroup"]["id"].endswith(
                    f"/resourceGroups/{NODE_RG}/providers/Microsoft.Network/"
                    f"networkSecurityGroups/{NSG}"
                ), nic["name"]
            for line in ("launched nodeclaim", "registered nodeclaim", "initialized nodeclaim"):
                assert op.messages(line), f"no {line!r} in karpy's log"
            # the nodes run the Kubernetes version the class resolved (the bootstrap's), so
            # none is K8sVersionDrift-ed; the kubelet identity label is the setting's
            version = (await client.get(AKS_NODE_CLASS, NODE_CLASS))["status"]["kubernetesVersion"]
            for name in nodes:
                info = (await client.get(kinds.NODE, name))["status"]["nodeInfo"]
                assert info["kubeletVersion"] == "v" + version.removeprefix("v"), info
            drifted = [c["metadata"]["name"] for c in claims
                       if any(x["type"] == "Drifted" and x["status"] == "True"
                              for x in (c.get("status") or {}).get("conditions") or [])]
            assert drifted == [], f"fresh NodeClaims marked Drifted: {drifted}"
            # scale to zero: every node is empty and consolidated away
            await client.patch(kinds.DEPLOYMENT, app, {"spec": {"replicas": 0}},
                               namespace=namespace)
            try:
                await eventually(lambda: nothing_left(arm), timeout=240,
                                 what="every VM and NIC deleted after scaling to 0")
            except AssertionError as failure:
                raise AssertionError(
                    f"{failure}; VMs left: {sorted(arm.state.vms)}\n{op.tail(40)}"
                ) from failure
            scaled_down = time.monotonic() - started - up
            # the VMs go first; termination then releases the NodeClaims
            await eventually(
                lambda: _none(pool_objects(client, NODE_CLAIM, [app])), timeout=60,
                what="the NodeClaims gone after their VMs",
            )
            print(f"azure e2e: scaled to 0, every VM gone {scaled_down:.1f}s later")
        finally:
            forced = await clean_up(client, namespace, app, [app], timeout=CLEANUP_TIMEOUT)
            with contextlib.suppress(errors.NotFound):
                await client.delete(AKS_NODE_CLASS, NODE_CLASS)
        assert forced == [], f"termination left these behind: {forced}"
        await server_emptied(arm, op)


async def test_zonal_allocation_failure_on_the_cheapest_offering(
    cluster: Any, namespace: str, arm: ArmServer, azure_crds: None
) -> None:
    app = "az-zonal"
    cheapest = ("Standard_D2s_v3", "1")  # on-demand 0.11 $/h, zone 1 wins the tie by name
    arm.fail(
        "vm.create", "ZonalAllocationFailed", lro=True, times=1000,
        message="Allocation failed. We do not have sufficient capacity in this zone.",
        when=lambda name, body: (body["properties"]["hardwareProfile"]["vmSize"],
                                 (body.get("zones") or [""])[0]) == cheapest,
    )
    async with connect(cluster) as client, azure_karpy(cluster, arm, client) as op:
        await apply_node_class(client)
        await eventually(lambda: node_class_ready(client), timeout=60,
                         what="the AKSNodeClass Ready")
        await client.create(NODE_POOL, pool(app, [
            {"key": "node.kubernetes.io/instance-type", "operator": "In",
             "values": ["Standard_D2s_v3", "Standard_D4s_v3"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ], consolidate_after="Never"))
        forced: list[str] = []
        try:
            await client.create(kinds.DEPLOYMENT, inflate(app, 2, "500m"), namespace=namespace)
            pods = await eventually(lambda: running_pods(client, namespace, app, 2),
                                    timeout=240, what="both pods Running")
            tried = [
                (b["properties"]["hardwareProfile"]["vmSize"], (b.get("zones") or [""])[0])
                for b in arm.bodies("PUT", "/virtualMachines/")
                # the VM extensions (billing) are PUT under the VM's path too
                if "hardwareProfile" in b["properties"]
            ]
            assert tried[0] == cheapest, f"the first launch was not the cheapest: {tried}"
            for pod in pods:
                node = await client.get(kinds.NODE, pod["spec"]["nodeName"])
                labels = node["metadata"]["labels"]
                assert (labels["node.kubernetes.io/instance-type"],
                        labels["topology.kubernetes.io/zone"]) != (
                    cheapest[0], "southcentralus-" + cheapest[1])
            failed = op.messages("failed launching nodeclaim")
            assert failed and "ZonalAllocationFailed" in str(failed[0])
        finally:
            forced = await clean_up(client, namespace, app, [app], timeout=CLEANUP_TIMEOUT)
            with contextlib.suppress(errors.NotFound):
                await client.delete(AKS_NODE_CLASS, NODE_CLASS)
        assert forced == [], f"termination left these behind: {forced}"
        await server_emptied(arm, op)


async def test_lros_outlast_a_reconcile_then_tags_change_in_place(
    cluster: Any, namespace: str, arm: ArmServer, azure_crds: None
) -> None:
    app = "az-slow"
    arm.lro_seconds = 6.0
    async with connect(cluster) as client, azure_karpy(cluster, arm, client,
                                                       launchWait="1") as op:
        await apply_node_class(client)
        await eventually(lambda: node_class_ready(client), timeout=60,
                         what="the AKSNodeClass Ready")
        await client.create(NODE_POOL, pool(app, [
            {"key": "node.kubernetes.io/instance-type", "operator": "In",
             "values": ["Standard_D2s_v3"]},
        ], consolidate_after="Never"))
        forced: list[str] = []
        try:
            await client.create(kinds.DEPLOYMENT, inflate(app, 1, "500m"), namespace=namespace)
            await eventually(lambda: running_pods(client, namespace, app, 1),
                             timeout=180, what="the pod Running")
            claims = await pool_objects(client, NODE_CLAIM, [app])
            assert len(claims) == 1, [c["metadata"]["name"] for c in claims]
            vm = "aks-" + claims[0]["metadata"]["name"]
            assert (list(arm.state.vms), list(arm.state.nics)) == ([vm], [vm])
            assert [r.path for r in arm.requests if r.method == "DELETE"] == []
            assert len([b for b in arm.bodies("PUT", "/virtualMachines/")
                        if "hardwareProfile" in b["properties"]]) == 1
            assert op.messages("virtual machine accepted, still provisioning; reporting it "
                               "launched"), op.tail(40)

            async def provisioned() -> bool:
                state = arm.state.vms[vm]["properties"]["provisioningState"]
                return state == "Succeeded" and "computeAksLinuxBilling" in arm.extensions_of(vm)

            await eventually(provisioned, timeout=60, what="the VM and its extension done")

            # a tags change reaches the node's resources in place
            arm.lro_seconds = 0.0
            await client.patch(AKS_NODE_CLASS, NODE_CLASS, {"spec": {"tags": {"team": "e2e"}}})

            async def tagged() -> bool:
                return all(r.get("tags", {}).get("team") == "e2e" for r in (
                    arm.state.vms[vm], arm.state.nics[vm],
                    arm.extensions_of(vm)["computeAksLinuxBilling"]))

            await eventually(tagged, timeout=60, what="the new tags on the VM, NIC and extension")
            after = await pool_objects(client, NODE_CLAIM, [app])
            assert [c["metadata"]["name"] for c in after] == [claims[0]["metadata"]["name"]]
            assert not any(x["type"] == "Drifted" and x["status"] == "True"
                           for x in (after[0].get("status") or {}).get("conditions") or [])
            assert list(arm.state.vms) == [vm]
            assert [r.path for r in arm.requests if r.method == "DELETE"] == []
        finally:
            forced = await clean_up(client, namespace, app, [app], timeout=CLEANUP_TIMEOUT)
            with contextlib.suppress(errors.NotFound):
                await client.delete(AKS_NODE_CLASS, NODE_CLASS)
        assert forced == [], f"termination left these behind: {forced}"
        await server_emptied(arm, op)


def vm_of(arm: ArmServer, size: str, node_class: str) -> dict[str, Any] | None:
    for vm in arm.state.vms.values():
        if (vm["properties"]["hardwareProfile"]["vmSize"] == size
                and vm["tags"].get("karpenter.azure.com_aksnodeclass") == node_class):
            return vm
    return None


async def test_gpu_driver_and_os_disk_follow_the_size_and_the_class(
    cluster: Any, namespace: str, arm: ArmServer, azure_crds: None
) -> None:
    """A GPU size gets the NVIDIA driver with gpu.mode Driver (its GPU pod runs) and not
    with None (no nvidia.com/gpu, the pod stays Pending); a size whose cache holds the 64
    GB OS disk (NC16as_T4_v3: 144 GiB) gets an ephemeral one, a size whose cache does not
    (D2s_v3: 50 GiB) a managed one."""
    gpu_size, small_size = "Standard_NC16as_T4_v3", "Standard_D2s_v3"
    apps = {"az-gpu": ("azure-gpu", gpu_size), "az-gpu-none": ("azure-gpu-none", gpu_size),
            "az-small": (NODE_CLASS, small_size)}
    async with connect(cluster) as client, azure_karpy(cluster, arm, client):
        await apply_node_class(client)
        await apply_node_class(client, "azure-gpu")
        await apply_node_class(client, "azure-gpu-none", gpu={"mode": "None"})
        for name in ("azure-gpu", "azure-gpu-none", NODE_CLASS):
            async def ready(name: str = name) -> bool:
                obj = await client.get(AKS_NODE_CLASS, name)
                return any(c["type"] == "Ready" and c["status"] == "True"
                           for c in (obj.get("status") or {}).get("conditions") or [])
            await eventually(ready, timeout=60, what=f"AKSNodeClass {name} Ready")
        forced: list[str] = []
        try:
            for app, (node_class, size) in apps.items():
                await client.create(NODE_POOL, pool(app, [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In",
                     "values": [size]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In",
                     "values": ["on-demand"]},
                ], consolidate_after="Never", node_class=node_class))
                gpu = {"nvidia.com/gpu": "1"} if size == gpu_size else {}
                await client.create(kinds.DEPLOYMENT, inflate(app, 1, "500m", **gpu),
                                    namespace=namespace)
            await eventually(lambda: running_pods(client, namespace, "az-gpu", 1),
                             timeout=240, what="the GPU pod Running (driver installed)")
            await eventually(lambda: running_pods(client, namespace, "az-small", 1),
                             timeout=240, what="the CPU pod Running")

            async def none_vm() -> dict[str, Any] | None:
                vm = vm_of(arm, gpu_size, "azure-gpu-none")
                return vm if vm and vm["properties"]["provisioningState"] == "Succeeded" else None

            without = await eventually(none_vm, timeout=120, what="the gpu.mode None VM")
            with_driver = vm_of(arm, gpu_size, "azure-gpu")
            small = vm_of(arm, small_size, NODE_CLASS)
            assert with_driver is not None and small is not None
            on = script_variables(custom_data_script(with_driver))
            off = script_variables(custom_data_script(without))
            assert (on["GPU_NODE"], on["CONFIG_GPU_DRIVER_IF_NEEDED"]) == ("true", "true")
            assert on["GPU_DRIVER_TYPE"] == "cuda-lts"
            assert (off["GPU_NODE"], off["CONFIG_GPU_DRIVER_IF_NEEDED"]) == ("false", "false")
            # no driver: the node has no GPU to offer and the GPU pod stays Pending
            name = without["properties"]["osProfile"]["computerName"]
            node = await eventually(lambda: _node(client, name), timeout=60,
                                    what="the gpu.mode None node registered")
            assert "nvidia.com/gpu" not in node["status"]["allocatable"]
            assert not await running_pods(client, namespace, "az-gpu-none", 1)
            # the OS disks
            for vm in (with_driver, without):
                disk = vm["properties"]["storageProfile"]["osDisk"]
                assert disk["diffDiskSettings"] == {"option": "Local", "placement": "CacheDisk"}
            disk = small["properties"]["storageProfile"]["osDisk"]
            assert "diffDiskSettings" not in disk
            assert disk["managedDisk"]["storageAccountType"] == "Premium_LRS"
        finally:
            for app in ("az-gpu-none", "az-small"):
                with contextlib.suppress(errors.NotFound):
                    await client.delete(kinds.DEPLOYMENT, app, namespace=namespace)
            forced = await clean_up(client, namespace, "az-gpu", list(apps),
                                    timeout=CLEANUP_TIMEOUT)
            for name in ("azure-gpu", "azure-gpu-none", NODE_CLASS):
                with contextlib.suppress(errors.NotFound):
                    await client.delete(AKS_NODE_CLASS, name)
        assert forced == [], f"termination left these behind: {forced}"


async def _node(client: Client, name: str) -> dict[str, Any] | None:
    with contextlib.suppress(errors.NotFound):
        return dict(await client.get(kinds.NODE, name))
    return None
