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
    "clusterEndpoint": "https://demo-dns.hcp.southcentralus.azmk8s.io:443",
    "kubeletBootstrapToken": "abcdef.0123456789abcdef",
    "sshPublicKey": "ssh-rsa AAAA demo",
}


def test_settings_come_from_flags_with_azure_defaults() -> None:
    s = AzureSettings.from_settings(REQUIRED, cluster_name="demo", environ={})
    assert (s.subscription_id, s.location, s.cluster_name) == ("sub-1", "southcentralus", "demo")
    assert (s.network_plugin, s.network_plugin_mode) == ("azure", "overlay")
    assert s.vm_memory_overhead_percent == 0.075
    assert s.credential == "default"
    assert s.arm_endpoint == "https://management.azure.com"
    assert (s.arm_cloud, s.launch_wait) == ("AzurePublicCloud", 30.0)


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
        "CLUSTER_ENDPOINT": "https://env.hcp.westcentralus.azmk8s.io:443",
        "KUBELET_BOOTSTRAP_TOKEN": "abcdef.0123456789abcdef",
        "SSH_PUBLIC_KEY": "ssh-rsa AAAA env",
        "NETWORK_POLICY": "cilium",
        "NETWORK_DATAPLANE": "azure",
        "DNS_SERVICE_IP": "10.2.0.10",
        "KUBELET_IDENTITY_CLIENT_ID": "61f71907-753f-4802-a901-47361c3664f2",
        "VNET_GUID": "a519e60a-cac0-40b2-b883-084477fe6f5c",
        "PROVISION_MODE": "customscript",
        "ARM_CLOUD": "AzureChinaCloud",
        "AZURE_LAUNCH_WAIT": "12.5",
    }
    s = AzureSettings.from_settings({"subscriptionID": "sub-flag"}, environ=env)
    assert (s.arm_cloud, s.launch_wait) == ("AzureChinaCloud", 12.5)
    assert s.subscription_id == "sub-flag"  # a flag beats the environment
    assert s.location == "westcentralus"
    assert s.cluster_name == "env-cluster"
    assert s.node_identities == ("/id/a", "/id/b")
    assert s.additional_tags == {"team": "infra", "cost-center": "42"}
    assert s.network_plugin_mode == ""
    assert s.api_server_name == "env.hcp.westcentralus.azmk8s.io"
    assert (s.network_policy, s.network_dataplane, s.dns_service_ip) == (
        "cilium", "azure", "10.2.0.10"
    )
    assert s.kubelet_identity_client_id == "61f71907-753f-4802-a901-47361c3664f2"
    assert s.vnet_guid == "a519e60a-cac0-40b2-b883-084477fe6f5c"
    assert s.provision_mode == "customscript"


def test_the_bootstrap_token_is_kept_out_of_repr_and_str() -> None:
    """A credential that lets any machine join the cluster: a log line or a traceback
    that prints the settings must not carry it. Only the node bootstrap reads it."""
    token = REQUIRED["kubeletBootstrapToken"]
    from_env = AzureSettings.from_settings(
        {k: v for k, v in REQUIRED.items() if k != "kubeletBootstrapToken"},
        cluster_name="demo", environ={"KUBELET_BOOTSTRAP_TOKEN": token},
    )  # fmt: skip
    for settings in (from_env, AzureSettings.from_settings(REQUIRED, cluster_name="demo")):
        for text in (repr(settings), str(settings), f"{settings}",
                     repr(settings.kubelet_bootstrap_token), str(settings.kubelet_bootstrap_token)):
            assert token not in text and "0123456789abcdef" not in text
        assert settings.kubelet_bootstrap_token.get_secret_value() == token


def test_a_missing_bootstrap_token_says_to_take_it_from_a_secret() -> None:
    settings = {k: v for k, v in REQUIRED.items() if k != "kubeletBootstrapToken"}
    with pytest.raises(AzureSettingsError) as raised:
        AzureSettings.from_settings(settings, cluster_name="demo", environ={})
    assert "KUBELET_BOOTSTRAP_TOKEN from a Secret" in str(raised.value)
    assert "settings.kubeletBootstrapTokenSecret" in str(raised.value)


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
        # what a node needs to join the cluster
        ({**REQUIRED, "clusterEndpoint": ""}, "clusterEndpoint is required.*CLUSTER_ENDPOINT"),
        ({**REQUIRED, "kubeletBootstrapToken": ""},
         "kubeletBootstrapToken is required.*KUBELET_BOOTSTRAP_TOKEN"),
        ({**REQUIRED, "sshPublicKey": ""}, "sshPublicKey is required.*SSH_PUBLIC_KEY"),
        ({**REQUIRED, "clusterEndpoint": "demo.azmk8s.io"}, "clusterEndpoint 'demo.azmk8s.io' is "
         "not an https URL"),
        ({**REQUIRED, "kubeletBootstrapToken": "secret"}, "kubeletBootstrapToken is not a "
         "bootstrap token"),
        ({**REQUIRED, "networkPlugin": "none"}, "networkPluginMode 'overlay' is invalid with "
         "networkPlugin 'none'"),
        ({**REQUIRED, "networkPolicy": "weave"}, "networkPolicy 'weave' is not one of"),
        ({**REQUIRED, "networkDataplane": "ebpf"}, "networkDataplane 'ebpf' is not one of"),
        ({**REQUIRED, "dnsServiceIP": "kube-dns"}, "dnsServiceIP 'kube-dns' is not an IP"),
        ({**REQUIRED, "kubeletIdentityClientID": "kubelet"}, "kubeletIdentityClientID 'kubelet' "
         "is not a GUID"),
        ({**REQUIRED, "clusterCABundle": "bm90IGEgY2VydA=="}, "clusterCABundle is not base64 of "
         "a PEM"),
        ({**REQUIRED, "provisionMode": "bootstrappingclient"}, "provisionMode "
         "'bootstrappingclient' is not one of aksscriptless, customscript"),
        ({**REQUIRED, "linuxAdminUsername": "1admin"}, "linuxAdminUsername '1admin' must start"),
        ({**REQUIRED, "launchWait": "-1"}, "launchWait -1.0 .*AZURE_LAUNCH_WAIT.* must be >= 0"),
    ],
)
def test_bad_settings_fail_naming_the_setting(settings: dict[str, str], message: str) -> None:
    with pytest.raises(AzureSettingsError, match=message):
        AzureSettings.from_settings(settings, cluster_name="demo", environ={})
