"""The Azure provider's settings: flags first, then the Azure provider's environment
variables; errors name the setting and how to fix it."""

from __future__ import annotations

import pytest
from karpy_azure import AzureSettings, AzureSettingsError

SUBNET = (
    "/subscriptions/sub-1/resourceGroups/rg-net/providers/Microsoft.Network/"
    "virtualNetworks/vnet/subnets/nodes"
)
REQUIRED = {
    "subscriptionID": "sub-1",
    "nodeResourceGroup": "MC_rg_demo_southcentralus",
    "location": "southcentralus",
    "vnetSubnetID": SUBNET,
}


def test_settings_come_from_flags_with_azure_defaults() -> None:
    s = AzureSettings.from_settings(REQUIRED, cluster_name="demo", environ={})
    assert (s.subscription_id, s.location, s.cluster_name) == ("sub-1", "southcentralus", "demo")
    assert (s.network_plugin, s.network_plugin_mode) == ("azure", "overlay")
    assert s.vm_memory_overhead_percent == 0.075
    assert s.credential == "default"
    assert s.arm_endpoint == "https://management.azure.com"


def test_environment_variables_are_the_fallback() -> None:
    env = {
        "ARM_SUBSCRIPTION_ID": "sub-env",
        "AZURE_NODE_RESOURCE_GROUP": "rg-env",
        "LOCATION": "West Central US",
        "CLUSTER_NAME": "env-cluster",
        "VNET_SUBNET_ID": SUBNET,
        "NODE_IDENTITIES": "/id/a,/id/b",
        "ADDITIONAL_TAGS": "team=infra,cost-center=42",
        "NETWORK_PLUGIN_MODE": "",
    }
    s = AzureSettings.from_settings({"subscriptionID": "sub-flag"}, environ=env)
    assert s.subscription_id == "sub-flag"  # a flag beats the environment
    assert s.location == "westcentralus"
    assert s.cluster_name == "env-cluster"
    assert s.node_identities == ("/id/a", "/id/b")
    assert s.additional_tags == {"team": "infra", "cost-center": "42"}
    assert s.network_plugin_mode == ""


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({**REQUIRED, "subscriptionID": ""}, "subscriptionID is required.*ARM_SUBSCRIPTION_ID"),
        ({**REQUIRED, "vnetSubnetID": "/subscriptions/x/subnets/y"}, "not a subnet"),
        ({**REQUIRED, "networkPlugin": "cilium"}, "networkPlugin 'cilium' is not one of"),
        ({**REQUIRED, "vmMemoryOverheadPercent": "lots"}, "vmMemoryOverheadPercent: 'lots'"),
        ({**REQUIRED, "credential": "static"}, "only for test servers"),
        ({**REQUIRED, "additionalTags": "novalue"}, "additionalTags: 'novalue'"),
        ({**REQUIRED, "subnetID": SUBNET}, "unknown azure provider setting.*subnetID"),
    ],
)
def test_bad_settings_fail_naming_the_setting(settings: dict[str, str], message: str) -> None:
    with pytest.raises(AzureSettingsError, match=message):
        AzureSettings.from_settings(settings, cluster_name="demo", environ={})
