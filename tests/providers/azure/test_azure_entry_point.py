"""karpy finds the Azure provider through its entry point, builds it from settings, and
reports a bad setting naming it."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, cast

import pytest
from azurearm.tls import self_signed
from karpy_azure import AzureCloudProvider
from karpy_azure._factory import client_ca_bundle

from karpy.cloudprovider import CloudProvider, ContributesControllers, ProviderContext
from karpy.cloudprovider.errors import ProviderLoadError
from karpy.cloudprovider.registry import build_provider, close_provider, installed_providers
from karpy.runtime import Client, KubeClient

SUBNET = (
    "/subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Network/"
    "virtualNetworks/vnet/subnets/nodes"
)

CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()


def test_azure_is_installed_beside_kwok() -> None:
    providers = installed_providers()
    assert providers["azure"] == "karpy_azure:AzureCloudProvider"
    assert "kwok" in providers


async def test_build_provider_builds_it_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARM_SUBSCRIPTION_ID", "sub-1")
    context = ProviderContext(
        client=cast(Client, object()),  # not used until a NodeClass is read
        cluster_name="demo",
        settings={
            "nodeResourceGroup": "MC_rg_demo_westcentralus",
            "location": "westcentralus",
            "vnetSubnetID": SUBNET,
            "armEndpoint": "https://127.0.0.1:1",
            "credential": "static",
            "clusterEndpoint": "https://demo.hcp.westcentralus.azmk8s.io:443",
            "kubeletBootstrapToken": "abcdef.0123456789abcdef",
            "sshPublicKey": "ssh-rsa AAAA demo",
            "clusterCABundle": CA,
        },
    )
    provider: Any = await build_provider("azure", context)
    try:
        assert isinstance(provider, AzureCloudProvider)
        assert isinstance(provider, CloudProvider)
        # the operator calls register_controllers (status controller, NIC GC) on it
        assert isinstance(provider, ContributesControllers)
        assert provider.name == "azure"
        assert provider.settings.subscription_id == "sub-1"
        assert provider.settings.cluster_name == "demo"
        assert [str(k) for k in provider.supported_node_classes()] == [
            "AKSNodeClass.karpenter.azure.com"
        ]
    finally:
        await close_provider(provider)


async def test_a_missing_setting_fails_at_start_up_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ARM_SUBSCRIPTION_ID", raising=False)
    context = ProviderContext(client=cast(Client, object()), cluster_name="demo", settings={})
    with pytest.raises(ProviderLoadError, match="subscriptionID is required"):
        await build_provider("azure", context)


async def test_without_a_ca_to_give_nodes_it_fails_at_start_up_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARM_SUBSCRIPTION_ID", "sub-1")
    context = ProviderContext(
        client=cast(Client, object()),  # a client without a CA file to take it from
        cluster_name="demo",
        settings={
            "nodeResourceGroup": "MC_rg_demo_westcentralus",
            "location": "westcentralus",
            "vnetSubnetID": SUBNET,
            "armEndpoint": "https://127.0.0.1:1",
            "credential": "static",
            "clusterEndpoint": "https://demo.hcp.westcentralus.azmk8s.io:443",
            "kubeletBootstrapToken": "abcdef.0123456789abcdef",
            "sshPublicKey": "ssh-rsa AAAA demo",
        },
    )
    with pytest.raises(ProviderLoadError, match=r"clusterCABundle is required.*CLUSTER_CA_BUNDLE"):
        await build_provider("azure", context)


async def test_the_nodes_ca_defaults_to_the_one_karpys_client_trusts(tmp_path: Path) -> None:
    cert = self_signed(tmp_path)
    pem = cert.cert_file.read_bytes()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {
            "server": "https://127.0.0.1:6443",
            "certificate-authority-data": base64.b64encode(pem).decode()}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    }))  # fmt: skip
    client = await KubeClient.from_kubeconfig(kubeconfig)
    try:
        assert base64.b64decode(client_ca_bundle(client)) == pem
    finally:
        await client.close()
