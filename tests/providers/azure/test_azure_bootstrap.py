"""AKS node bootstrapping: what a launched node carries to AKS's node scripts (the custom
data, or the Custom Script Extension in provision mode customscript) and the VM
extensions, read back from the requests the ARM test server received."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from azure_support import (
    API_SERVER,
    BOOTSTRAP_TOKEN,
    KUBERNETES_VERSION,
    NODE_RG,
    NSG,
    azure_settings,
    ready_node_class,
)
from azurearm.bootstrap import (
    cse_script,
    custom_data_script,
    kubelet_flags,
    node_labels,
    script_variables,
    taints,
)
from azurearm.server import ArmServer
from karpy_azure import ArmClients, AzureCloudProvider, StaticNodeClasses, make_credential
from karpy_azure._bootstrap import (
    credential_provider_url,
    kube_binary_url,
    network_plugin_for_scripts,
)
from karpy_azure._kubelet import KubeletParams, kubelet_can_set
from karpy_azure._kubelet import kubelet_flags as build_flags

from karpy.apis import NodeClaim, NodePool, Taint
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import CreateError
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.scheduling.instancetype import Overhead

POOL: NodePool = make_nodepool(
    NodeClassReference(group="karpenter.azure.com", kind="AKSNodeClass", name="default"),
    name="general",
)


def claim(*, labels: dict[str, str] | None = None) -> NodeClaim:
    nodeclaim = make_nodeclaim(
        POOL,
        requirements=[
            {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": ["Standard_D4s_v3"]},
            {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        ],
        requests={"cpu": "100m"},
        labels=labels,
    )
    nodeclaim.spec.taints = [Taint(key="dedicated", value="gpu", effect="NoSchedule")]
    nodeclaim.spec.startup_taints = [Taint(key="node.cilium.io/agent-not-ready",
                                           effect="NoExecute")]
    return nodeclaim


async def provider_on(arm: ArmServer, **settings: str) -> AzureCloudProvider:
    built = azure_settings(arm, **settings)
    provider = AzureCloudProvider(
        built,
        arm=ArmClients.create(built, make_credential(built), retry_backoff_factor=0.01),
        node_classes=StaticNodeClasses({}),
    )
    node_classes = provider.node_classes
    assert isinstance(node_classes, StaticNodeClasses)
    node_classes.items["default"] = await ready_node_class(
        provider,
        maxPods=42,
        kubelet={"imageGCHighThresholdPercent": 70, "imageGCLowThresholdPercent": 60,
                 "podPidsLimit": 4096},
    )
    return provider


@pytest_asyncio.fixture
async def scriptless(arm: ArmServer) -> AsyncIterator[AzureCloudProvider]:
    provider = await provider_on(arm)
    try:
        yield provider
    finally:
        await provider.aclose()


def vm_body(arm: ArmServer, name: str) -> dict[str, Any]:
    [body] = [r.body for r in arm.requests
              if r.method == "PUT" and r.path.endswith("/virtualMachines/" + name)]
    return dict(body)


def extension_puts(arm: ArmServer, name: str) -> list[tuple[str, dict[str, Any]]]:
    return [(r.path.rsplit("/", 1)[-1], r.body) for r in arm.requests
            if r.method == "PUT" and f"/virtualMachines/{name}/extensions/" in r.path]


async def test_custom_data_carries_the_nodeclaims_kubelet_settings_and_the_cluster(
    scriptless: AzureCloudProvider, arm: ArmServer
) -> None:
    launched = await scriptless.create(claim(labels={"team": "ml",
                                                     "node-role.kubernetes.io/ml": ""}))
    name = "aks-" + (launched.metadata.name or "")
    script = custom_data_script(vm_body(arm, name))
    variables = script_variables(script)

    # joining: the API server's host name, TLS bootstrapping with the token, the CA
    assert variables["API_SERVER_NAME"] == API_SERVER
    assert variables["TLS_BOOTSTRAP_TOKEN"] == BOOTSTRAP_TOKEN
    assert variables["ENABLE_TLS_BOOTSTRAPPING"] == "true"
    assert base64.b64decode(variables["KUBE_CA_CRT"]) == arm.cert.cert_file.read_bytes()
    assert variables["KUBERNETES_VERSION"] == KUBERNETES_VERSION
    assert variables["CREDENTIAL_PROVIDER_DOWNLOAD_URL"].endswith("-amd64-v1.31.6.tar.gz")
    # the cloud provider config: node resource group, subnet, AKS's NSG and route table
    assert variables["RESOURCE_GROUP"] == NODE_RG
    assert (variables["SUBNET"], variables["VIRTUAL_NETWORK"]) == ("aks-subnet", "aks-vnet")
    assert variables["NETWORK_SECURITY_GROUP"] == NSG
    assert variables["ROUTE_TABLE"] == "aks-agentpool-12345678-routetable"
    # Azure CNI overlay: AKS's scripts install no CNI themselves
    assert variables["NETWORK_PLUGIN"] == "none"

    labels = node_labels(variables)
    assert labels["karpenter.sh/nodepool"] == "general"
    assert labels["team"] == "ml"
    assert labels["node.kubernetes.io/instance-type"] == "Standard_D4s_v3"
    assert labels["karpenter.sh/capacity-type"] == "on-demand"
    assert labels["karpenter.azure.com/aksnodeclass"] == "default"
    assert labels["kubernetes.azure.com/cluster"] == NODE_RG
    assert labels["kubernetes.azure.com/mode"] == "user"
    assert labels["kubernetes.azure.com/azure-cni-overlay"] == "true"
    assert labels["kubernetes.azure.com/network-subnet"] == "aks-subnet"
    assert labels["kubernetes.azure.com/ebpf-dataplane"] == "cilium"
    # the API server would refuse the kubelet this one
    assert "node-role.kubernetes.io/ml" not in labels

    assert taints(variables) == [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
        {"key": "node.cilium.io/agent-not-ready", "effect": "NoExecute"},
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
    ]
    flags = kubelet_flags(variables)
    assert flags["--max-pods"] == "42"
    # kube-reserved and the eviction threshold karpy's allocatable assumed for D4s_v3
    # (4 vCPU, 16 GiB): 6%+4%+2%+2% of a core each, 25% of 4 GiB + 20% of 4 + 10% of 8
    assert flags["--kube-reserved"] == "cpu=140m,memory=2662Mi"
    assert flags["--eviction-hard"] == "memory.available<750Mi"
    assert (flags["--image-gc-high-threshold"], flags["--image-gc-low-threshold"]) == ("70", "60")
    assert flags["--pod-max-pids"] == "4096"
    assert flags["--cluster-dns"] == "10.0.0.10"
    assert flags["--cloud-provider"] == "external"
    assert launched.status.allocatable["pods"] == "42"

    # custom data runs AKS's provisioning in the background
    assert script.rstrip().endswith(
        '/usr/bin/nohup /bin/bash -c "/bin/bash /opt/azure/containers/provision_start.sh"'
    )


async def test_the_vm_gets_the_aks_billing_extension_and_no_custom_script(
    scriptless: AzureCloudProvider, arm: ArmServer
) -> None:
    launched = await scriptless.create(claim())
    name = "aks-" + (launched.metadata.name or "")
    [(ext_name, body)] = extension_puts(arm, name)
    assert ext_name == "computeAksLinuxBilling"
    assert body["location"] == "southcentralus"
    assert body["properties"] == {
        "publisher": "Microsoft.AKS",
        "type": "Compute.AKS.Linux.Billing",
        "typeHandlerVersion": "1.0",
        "autoUpgradeMinorVersion": True,
        "settings": {},
    }
    assert body["tags"]["karpenter.sh_nodeclaim"] == launched.metadata.name
    assert arm.extensions_of(name)["computeAksLinuxBilling"]["properties"][
        "provisioningState"] == "Succeeded"


async def test_customscript_mode_runs_the_command_as_the_custom_script_extension(
    arm: ArmServer,
) -> None:
    provider = await provider_on(arm, provisionMode="customscript",
                                 dnsServiceIP="10.2.0.10", networkPolicy="cilium")
    try:
        launched = await provider.create(claim())
    finally:
        await provider.aclose()
    name = "aks-" + (launched.metadata.name or "")
    assert "customData" not in vm_body(arm, name)["properties"]["osProfile"]
    (cse_name, cse), (billing_name, _) = extension_puts(arm, name)
    assert (cse_name, billing_name) == ("cse-agent-karpenter", "computeAksLinuxBilling")
    props = cse["properties"]
    assert (props["publisher"], props["type"], props["typeHandlerVersion"]) == (
        "Microsoft.Azure.Extensions", "CustomScript", "2.0"
    )
    assert props["settings"] == {}
    script = cse_script(cse)
    variables = script_variables(script)
    assert variables["TLS_BOOTSTRAP_TOKEN"] == BOOTSTRAP_TOKEN
    assert variables["NETWORK_POLICY"] == "cilium"
    flags = kubelet_flags(variables)
    assert (flags["--max-pods"], flags["--cluster-dns"]) == ("42", "10.2.0.10")
    assert node_labels(variables)["karpenter.sh/nodepool"] == "general"
    # the extension's result is provisioning's: run in the foreground
    assert script.rstrip().endswith("\n/bin/bash /opt/azure/containers/provision_start.sh")
    # ARM keeps the command secret
    assert "protectedSettings" not in arm.extensions_of(name)["cse-agent-karpenter"]["properties"]


@pytest.mark.parametrize("lro", [False, True], ids=["sync", "lro"])
async def test_a_failed_extension_fails_the_launch_and_leaves_nothing(
    scriptless: AzureCloudProvider, arm: ArmServer, lro: bool
) -> None:
    arm.fail("extension.create", "VMExtensionProvisioningError", status=400, lro=lro,
             message="extension failed to install")
    with pytest.raises(CreateError) as raised:
        await scriptless.create(claim())
    assert raised.value.reason == "VirtualMachineExtensionFailed"
    assert "computeAksLinuxBilling" in str(raised.value)
    assert "VMExtensionProvisioningError" in str(raised.value)
    assert not arm.state.vms and not arm.state.nics and not arm.state.extensions


async def test_without_aks_managed_nsg_nothing_is_launched(
    scriptless: AzureCloudProvider, arm: ArmServer
) -> None:
    arm.state.nsgs.clear()
    arm.add_nsg("my-own-nsg")
    with pytest.raises(CreateError, match=r"aks-agentpool-<id>-nsg.*found none") as raised:
        await scriptless.create(claim())
    assert raised.value.reason == "NetworkSecurityGroupNotFound"
    assert not arm.state.vms and not arm.state.nics


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, "none"),  # Azure CNI overlay
        ({"networkPluginMode": "", "networkDataplane": "cilium"}, "none"),  # Cilium node subnet
        ({"networkPluginMode": "", "networkDataplane": "azure"}, "azure"),  # pod IPs from subnet
        ({"networkPlugin": "kubenet", "networkPluginMode": ""}, "kubenet"),
        ({"networkPlugin": "none", "networkPluginMode": ""}, "none"),
    ],
)
def test_network_plugin_as_aks_scripts_take_it(
    arm: ArmServer, settings: dict[str, str], expected: str
) -> None:
    assert network_plugin_for_scripts(azure_settings(arm, **settings)) == expected


def test_kubelet_flags_follow_the_kubernetes_version() -> None:
    def flags(version: str) -> dict[str, str]:
        return build_flags(KubeletParams(kubernetes_version=version, max_pods=30,
                                         overhead=Overhead()))

    old, new = flags("1.29.9"), flags("v1.34.1")
    assert old["--feature-gates"] == "DisableKubeletCloudCredentialProviders=false"
    assert old["--keep-terminated-pod-volumes"] == "false"
    assert "--image-credential-provider-config" not in old
    assert "--cloud-config" not in new and "--feature-gates" not in new
    assert new["--image-credential-provider-bin-dir"] == "/var/lib/kubelet/credential-provider"
    assert kube_binary_url("1.29.9", "arm64").endswith(
        "/kubernetes/v1.29.9/binaries/kubernetes-node-linux-arm64.tar.gz"
    )
    assert kube_binary_url("1.34.1", "amd64") == ""  # the 1.34 images carry the kubelet
    assert credential_provider_url("1.29.9", "amd64") == ""
    assert "v1.33.0" in credential_provider_url("1.35.0", "amd64")


@pytest.mark.parametrize(
    ("key", "allowed"),
    [
        ("karpenter.sh/nodepool", True),
        ("kubernetes.azure.com/mode", True),
        ("team", True),
        ("node.kubernetes.io/instance-type", True),
        ("kubernetes.io/arch", True),
        ("topology.kubernetes.io/zone", True),
        ("kubelet.kubernetes.io/anything", True),
        ("node-role.kubernetes.io/worker", False),
        ("example.k8s.io/x", False),
    ],
)
def test_only_labels_the_kubelet_may_set_on_itself(key: str, allowed: bool) -> None:
    assert kubelet_can_set(key) is allowed


async def test_artifact_streaming_reaches_aks_scripts_only_when_enabled(
    scriptless: AzureCloudProvider, arm: ArmServer
) -> None:
    off = await scriptless.create(claim())
    variables = script_variables(custom_data_script(vm_body(arm, "aks-" + (off.metadata.name
                                                                              or ""))))
    assert "ARTIFACT_STREAMING_ENABLED" not in variables  # Karpenter-Azure's variables
    node_classes = scriptless.node_classes
    assert isinstance(node_classes, StaticNodeClasses)
    node_classes.items["default"] = await ready_node_class(
        scriptless, artifactStreaming={"enabled": True}
    )
    on = await scriptless.create(claim())
    enabled = script_variables(custom_data_script(vm_body(arm, "aks-" + (on.metadata.name
                                                                           or ""))))
    assert enabled["ARTIFACT_STREAMING_ENABLED"] == "true"
    assert node_labels(enabled)["kubernetes.azure.com/artifactstreaming-enabled"] == "true"
