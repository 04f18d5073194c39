"""GPU nodes: the NVIDIA driver AKS's node scripts install (per VM size and the
AKSNodeClass's ``gpu.mode``), read back from the custom data the ARM test server
received."""

from __future__ import annotations

import base64

import pytest
from azure_support import ready_node_class
from azurearm.bootstrap import custom_data_script, script_variables
from azurearm.server import ArmServer
from karpy_azure import AzureCloudProvider, StaticNodeClasses
from karpy_azure._gpu import gpu_driver, gpu_driver_for
from karpy_azure.apis import AKSNodeClass

from karpy.apis import NodeClaim, NodePool
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

POOL: NodePool = make_nodepool(
    NodeClassReference(group="karpenter.azure.com", kind="AKSNodeClass", name="default"),
    name="gpu",
)


def claim(size: str) -> NodeClaim:
    return make_nodeclaim(
        POOL,
        requirements=[
            {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": [size]},
            {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        ],
        requests={"cpu": "100m"},
    )


async def launched_variables(azure: AzureCloudProvider, arm: ArmServer, size: str) -> dict[
    str, str
]:
    launched = await azure.create(claim(size))
    name = "aks-" + (launched.metadata.name or "")
    [vm] = [r.body for r in arm.requests
            if r.method == "PUT" and r.path.endswith("/virtualMachines/" + name)]
    return script_variables(custom_data_script(vm))


def default_runtime(variables: dict[str, str]) -> str:
    config = base64.b64decode(variables["CONTAINERD_CONFIG_CONTENT"]).decode()
    [line] = [x for x in config.splitlines() if "default_runtime_name" in x]
    return line.split("=", 1)[1].strip().strip('"')


async def test_an_nvidia_size_gets_the_driver_by_default(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    variables = await launched_variables(azure, arm, "Standard_NC6s_v3")
    assert variables["GPU_NODE"] == "true"
    assert variables["CONFIG_GPU_DRIVER_IF_NEEDED"] == "true"
    assert (variables["GPU_DRIVER_VERSION"], variables["GPU_DRIVER_TYPE"],
            variables["GPU_IMAGE_SHA"]) == ("580.159.04", "cuda-lts", "20260629214430")
    assert variables["MIG_NODE"] == "false"
    assert default_runtime(variables) == "nvidia-container-runtime"


async def test_gpu_mode_none_installs_no_driver(
    azure: AzureCloudProvider, arm: ArmServer, node_classes: StaticNodeClasses
) -> None:
    node_classes.items["default"] = await ready_node_class(azure, gpu={"mode": "None"})
    variables = await launched_variables(azure, arm, "Standard_NC6s_v3")
    assert variables["GPU_NODE"] == "false"
    assert variables["CONFIG_GPU_DRIVER_IF_NEEDED"] == "false"
    assert variables["GPU_DRIVER_VERSION"] == ""
    assert default_runtime(variables) == "runc"


async def test_a_cpu_size_gets_no_driver(azure: AzureCloudProvider, arm: ArmServer) -> None:
    variables = await launched_variables(azure, arm, "Standard_D4s_v3")
    assert (variables["GPU_NODE"], variables["CONFIG_GPU_DRIVER_IF_NEEDED"]) == ("false",
                                                                                "false")
    assert default_runtime(variables) == "runc"


@pytest.mark.parametrize(
    ("size", "version", "kind"),
    [
        ("Standard_NC6s_v3", "580.159.04", "cuda-lts"),
        ("Standard_NC24ads_A100_v4", "580.159.04", "cuda-lts"),
        ("Standard_NC16as_T4_v3", "580.159.04", "cuda-lts"),
        ("Standard_NV36ads_A10_v5", "570.211.01", "grid"),
        ("Standard_NC8ads_A10_v4_Promo", "570.211.01", "grid"),
        ("Standard_NC24lds_xl_RTXPRO6000BSE_v6", "595.58.03", "grid-v20"),
        ("Standard_NC6", "470.82.01", "cuda"),  # NC v1, K80
    ],
)
def test_the_driver_follows_the_size_as_karpenter_azure_picks_it(
    size: str, version: str, kind: str
) -> None:
    driver = gpu_driver(size)
    assert (driver.version, driver.type) == (version, kind)
    assert driver.image_sha


def test_amd_sizes_get_no_driver_from_aks_scripts() -> None:
    driver_mode = AKSNodeClass.model_validate({"spec": {"gpu": {"mode": "Driver"}}})
    assert gpu_driver_for("Standard_ND96isr_MI300X_v5", "amd", driver_mode) is None
    assert gpu_driver_for("Standard_NC6s_v3", "nvidia", driver_mode) is not None
