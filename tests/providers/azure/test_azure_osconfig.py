"""The AKSNodeClass's ``linuxOSConfig`` (sysctls, transparent huge pages, a swap file) and
``kubelet.failSwapOn``: modelled in the CRD and carried by the node's bootstrap, read
back from the custom data the ARM test server received."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml
from azure_support import ready_node_class
from azurearm.bootstrap import custom_data_script, kubelet_flags, node_labels, script_variables
from azurearm.server import ArmServer
from karpy_azure import AzureCloudProvider, StaticNodeClasses
from pydantic import ValidationError

from karpy.apis import NodePool
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

POOL: NodePool = make_nodepool(
    NodeClassReference(group="karpenter.azure.com", kind="AKSNodeClass", name="default"),
    name="os",
)
CRD = (Path(__file__).resolve().parents[3] / "crds" / "azure"
       / "karpenter.azure.com_aksnodeclasses.yaml")
LINUX_OS_CONFIG = {
    "swapFileSize": "1500Mi",
    "transparentHugePageEnabled": "madvise",
    "transparentHugePageDefrag": "defer+madvise",
    "sysctls": {
        "vmMaxMapCount": 262144,
        "netCoreSomaxconn": 32768,  # AKS sets 16384: the class's wins
        "netIPv4IPLocalPortRange": "32768 60999",
        "netIPv4TCPTwReuse": True,
    },
}


async def launch(azure: AzureCloudProvider, arm: ArmServer, node_classes: StaticNodeClasses,
                 **spec: Any) -> dict[str, str]:
    node_classes.items["default"] = await ready_node_class(azure, **spec)
    launched = await azure.create(make_nodeclaim(
        POOL,
        requirements=[
            {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": ["Standard_D4s_v3"]},
            {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        ],
        requests={"cpu": "100m"},
    ))
    vm = arm.state.vms["aks-" + (launched.metadata.name or "")]
    return script_variables(custom_data_script(vm))


async def test_linux_os_config_reaches_aks_scripts(
    azure: AzureCloudProvider, arm: ArmServer, node_classes: StaticNodeClasses
) -> None:
    # A swap file needs kubelet.failSwapOn: false (Karpenter-Azure's CRD rule).
    variables = await launch(azure, arm, node_classes, linuxOSConfig=LINUX_OS_CONFIG,
                             kubelet={"failSwapOn": False})
    sysctls = base64.b64decode(variables["SYSCTL_CONTENT"]).decode().splitlines()
    assert "vm.max_map_count=262144" in sysctls
    assert "net.ipv4.ip_local_port_range=32768 60999" in sysctls
    assert "net.ipv4.tcp_tw_reuse=1" in sysctls
    assert [s for s in sysctls if s.startswith("net.core.somaxconn=")] == [
        "net.core.somaxconn=32768"
    ]
    assert "net.ipv4.tcp_retries2=8" in sysctls  # AKS's own stay
    assert (variables["SHOULD_CONFIG_TRANSPARENT_HUGE_PAGE"], variables["THP_ENABLED"],
            variables["THP_DEFRAG"]) == ("true", "madvise", "defer+madvise")
    assert (variables["SHOULD_CONFIG_SWAP_FILE"], variables["SWAP_FILE_SIZE_MB"]) == (
        "true", "1500"
    )
    # the kubelet would not start on a node with swap otherwise
    assert kubelet_flags(variables)["--fail-swap-on"] == "false"


async def test_without_linux_os_config_nothing_changes(
    azure: AzureCloudProvider, arm: ArmServer, node_classes: StaticNodeClasses
) -> None:
    variables = await launch(azure, arm, node_classes)
    assert variables["SHOULD_CONFIG_SWAP_FILE"] == "false"
    assert variables["SHOULD_CONFIG_TRANSPARENT_HUGE_PAGE"] == "false"
    assert "--fail-swap-on" not in kubelet_flags(variables)


async def test_fail_swap_on_is_passed_to_the_kubelet(
    azure: AzureCloudProvider, arm: ArmServer, node_classes: StaticNodeClasses
) -> None:
    variables = await launch(azure, arm, node_classes, kubelet={"failSwapOn": True})
    assert kubelet_flags(variables)["--fail-swap-on"] == "true"


async def test_a_swap_file_with_fail_swap_on_true_is_refused(azure: AzureCloudProvider) -> None:
    # Karpenter-Azure's CRD refuses it (a kubelet with failSwapOn would not start on a node
    # with swap); karpy's model reads the same rule, so simulate and convert refuse it too.
    with pytest.raises(ValidationError, match=r"kubelet\.failSwapOn must be set to false"):
        await ready_node_class(azure, linuxOSConfig={"swapFileSize": "1Gi"},
                               kubelet={"failSwapOn": True})


def test_the_crd_keeps_linux_os_config_with_aks_bounds() -> None:
    schema = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    config = schema["properties"]["spec"]["properties"]["linuxOSConfig"]["properties"]
    sysctls = config["sysctls"]["properties"]
    assert (sysctls["vmMaxMapCount"]["minimum"], sysctls["vmMaxMapCount"]["maximum"]) == (
        65530, 262144
    )
    assert len(sysctls) == 28
    assert config["transparentHugePageDefrag"]["enum"] == [
        "always", "defer", "defer+madvise", "madvise", "never"
    ]


def _override(zone: str, destination: str) -> dict[str, Any]:
    return {"zone": zone, "queryLogging": "Error", "protocol": "PreferUDP",
            "forwardDestination": destination, "forwardPolicy": "Sequential",
            "maxConcurrent": 1000, "cacheDuration": "1h", "serveStaleDuration": "1h",
            "serveStale": "Immediate"}


def local_dns(mode: str) -> dict[str, Any]:
    return {
        "mode": mode,
        "vnetDNSOverrides": [_override(".", "VnetDNS"),
                             _override("cluster.local", "ClusterCoreDNS")],
        "kubeDNSOverrides": [_override(".", "ClusterCoreDNS"),
                             _override("cluster.local", "ClusterCoreDNS")],
    }


async def test_local_dns_required_is_reported_preferred_runs_without(
    azure: AzureCloudProvider, arm: ArmServer, node_classes: StaticNodeClasses
) -> None:
    required = await ready_node_class(azure, localDNS=local_dns("Required"))
    [validation] = [c for c in required.status.conditions if c.type == "ValidationSucceeded"]
    assert (validation.status, validation.reason) == ("False", "LocalDNSNotSupported")
    assert "spec.localDNS.mode" in validation.message
    variables = await launch(azure, arm, node_classes, localDNS=local_dns("Preferred"))
    ready = node_classes.items["default"].status_conditions().get("Ready")
    assert ready is not None and ready.status == "True"
    labels = node_labels(variables)
    assert labels["kubernetes.azure.com/localdns-state"] == "disabled"


def test_the_crd_keeps_local_dns_with_its_rules() -> None:
    schema = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    dns = schema["properties"]["spec"]["properties"]["localDNS"]
    assert sorted(dns["required"]) == ["kubeDNSOverrides", "mode", "vnetDNSOverrides"]
    vnet = dns["properties"]["vnetDNSOverrides"]
    assert vnet["x-kubernetes-list-type"] == "map"
    assert "root zone '.' cannot be forwarded to ClusterCoreDNS from vnetDNSOverrides" in [
        r["message"] for r in vnet["x-kubernetes-validations"]
    ]
