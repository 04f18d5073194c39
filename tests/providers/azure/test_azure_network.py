"""Outbound networking of a node's NIC: the AKS load balancers' backend pools (read from
the node resource group, cached, refreshed when ARM says one is gone) and AKS's managed
NSG on a bring-your-own VNet, read back from what the ARM test server received."""

from __future__ import annotations

from typing import Any

import pytest
from azure_support import NODE_RG, NSG, SUBSCRIPTION, ready_node_class
from azurearm.server import ArmServer
from karpy_azure import AzureCloudProvider, StaticNodeClasses
from karpy_azure._network import is_aks_managed_vnet

from karpy.apis import NodeClaim, NodePool
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import CreateError
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

POOL: NodePool = make_nodepool(
    NodeClassReference(group="karpenter.azure.com", kind="AKSNodeClass", name="default"),
    name="general",
)
LB_ID = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{NODE_RG}/providers/Microsoft.Network/"
    "loadBalancers"
)
NSG_ID = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{NODE_RG}/providers/Microsoft.Network/"
    f"networkSecurityGroups/{NSG}"
)
MANAGED_SUBNET = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{NODE_RG}/providers/Microsoft.Network/"
    "virtualNetworks/aks-vnet-12345678/subnets/aks-subnet"
)


def claim() -> NodeClaim:
    return make_nodeclaim(
        POOL,
        requirements=[
            {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": ["Standard_D4s_v3"]},
            {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        ],
        requests={"cpu": "100m"},
    )


def nic_puts(arm: ArmServer) -> list[dict[str, Any]]:
    return [r.body for r in arm.requests
            if r.method == "PUT" and "/networkInterfaces/" in r.path]


def pools_of(nic: dict[str, Any]) -> list[str]:
    config = nic["properties"]["ipConfigurations"][0]["properties"]
    return [p["id"] for p in config.get("loadBalancerBackendAddressPools") or []]


def lb_listings(arm: ArmServer) -> int:
    return sum(r.method == "GET" and r.path.lower().endswith("/loadbalancers")
               for r in arm.requests)


async def test_the_nic_joins_the_outbound_pools_and_carries_the_nsg_on_a_byo_vnet(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    launched = await azure.create(claim())
    name = "aks-" + (launched.metadata.name or "")
    [nic] = nic_puts(arm)
    assert pools_of(nic) == [
        f"{LB_ID}/kubernetes/backendAddressPools/kubernetes",
        f"{LB_ID}/kubernetes/backendAddressPools/aksOutboundBackendPool",
    ]
    # the class's subnet is in another resource group's VNet: AKS's NSG goes on the NIC
    assert nic["properties"]["networkSecurityGroup"] == {"id": NSG_ID}
    # the secondary IP configurations of Azure CNI (none under overlay) join no pool
    assert len(nic["properties"]["ipConfigurations"]) == 1
    assert arm.state.nics[name]["properties"]["provisioningState"] == "Succeeded"


async def test_internal_pools_join_and_ipv6_ip_based_and_foreign_pools_do_not(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    arm.add_load_balancer("kubernetes", {"kubernetes": [], "aksOutboundBackendPool": [],
                                         "aksOutboundBackendPool-ipv6": [],
                                         "kubernetes-ipv6": [],
                                         "nodeip-pool": ["10.224.0.4"]},
                          subscription=SUBSCRIPTION, resource_group=NODE_RG)
    arm.add_load_balancer("kubernetes-internal", {"kubernetes": []},
                          subscription=SUBSCRIPTION, resource_group=NODE_RG)
    arm.add_load_balancer("someone-elses", {"pool": []},
                          subscription=SUBSCRIPTION, resource_group=NODE_RG)
    await azure.create(claim())
    [nic] = nic_puts(arm)
    assert pools_of(nic) == [
        f"{LB_ID}/kubernetes/backendAddressPools/kubernetes",
        f"{LB_ID}/kubernetes/backendAddressPools/aksOutboundBackendPool",
        f"{LB_ID}/kubernetes-internal/backendAddressPools/kubernetes",
    ]


async def test_pools_are_read_once_and_refreshed_when_arm_says_one_is_gone(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    arm.add_load_balancer("kubernetes-internal", {"kubernetes": []},
                          subscription=SUBSCRIPTION, resource_group=NODE_RG)
    await azure.create(claim())
    await azure.create(claim())
    assert lb_listings(arm) == 1  # cached
    # the internal load balancer goes away (its last Service was deleted)
    del arm.state.lbs["kubernetes-internal"]
    launched = await azure.create(claim())
    assert lb_listings(arm) == 2
    refused, accepted = nic_puts(arm)[2:]
    assert f"{LB_ID}/kubernetes-internal/backendAddressPools/kubernetes" in pools_of(refused)
    assert pools_of(accepted) == [
        f"{LB_ID}/kubernetes/backendAddressPools/kubernetes",
        f"{LB_ID}/kubernetes/backendAddressPools/aksOutboundBackendPool",
    ]
    assert "aks-" + (launched.metadata.name or "") in arm.state.vms


async def test_a_pool_still_missing_after_the_refresh_fails_the_launch_cleanly(
    azure: AzureCloudProvider, arm: ArmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ARM lists the pools but refuses every reference to them (a pool deleted between
    # the listing and the NIC PUT, twice)
    monkeypatch.setattr(arm, "backend_pool_ids", set)
    with pytest.raises(CreateError) as raised:
        await azure.create(claim())
    assert raised.value.reason == "NetworkInterfaceCreationFailed"
    assert "InvalidResourceReference" in str(raised.value)
    assert "backendAddressPools/kubernetes" in str(raised.value)
    assert lb_listings(arm) == 2 and len(nic_puts(arm)) == 2  # one refresh, one retry
    assert not arm.state.nics and not arm.state.vms


async def test_on_the_aks_managed_vnet_the_nic_gets_no_nsg(
    azure: AzureCloudProvider, arm: ArmServer, node_classes: StaticNodeClasses
) -> None:
    arm.add_subnet(MANAGED_SUBNET)
    node_classes.items["default"] = await ready_node_class(azure, vnetSubnetID=MANAGED_SUBNET)
    await azure.create(claim())
    [nic] = nic_puts(arm)
    assert "networkSecurityGroup" not in nic["properties"]
    assert len(pools_of(nic)) == 2


async def test_a_failed_load_balancer_listing_fails_the_launch_before_anything_is_made(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    arm.fail("lb.list", "AuthorizationFailed", status=403)
    with pytest.raises(CreateError) as raised:
        await azure.create(claim())
    assert raised.value.reason == "LoadBalancerListFailed"
    assert "AuthorizationFailed" in str(raised.value)
    assert not arm.state.nics and not arm.state.vms


@pytest.mark.parametrize(
    ("subnet", "managed"),
    [
        (MANAGED_SUBNET, True),
        (MANAGED_SUBNET.replace("aks-subnet", "other"), False),
        (MANAGED_SUBNET.replace(NODE_RG, "rg-mine"), False),
        (MANAGED_SUBNET.replace("aks-vnet-12345678", "aks-vnet"), False),
        (MANAGED_SUBNET.upper(), True),
        ("not-a-subnet", False),
    ],
)
def test_the_aks_managed_vnet_is_told_as_karpenter_azure_tells_it(
    subnet: str, managed: bool
) -> None:
    assert is_aks_managed_vnet(NODE_RG, subnet) is managed
