"""Offline mode of the Azure provider: built with ``offline=true`` it makes no
credential, client or call, needs only the location, and prices a NodePool's instance
types from the shipped tables exactly as the online provider does on the ARM test
server (which serves the same recorded SKUs and prices)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from karpy_azure import AKS_NODE_CLASS as AKS_NODE_CLASS_KIND
from karpy_azure import AzureCloudProvider, AzureSettingsError
from karpy_azure._offline import OfflineAzureCloudProvider
from karpy_azure._settings import check_settings

from karpy.apis import NodeClaim, NodePool
from karpy.cloudprovider import InstanceType, ProviderContext
from karpy.cloudprovider.errors import OfflineError
from karpy.cloudprovider.registry import build_provider, close_provider
from karpy.runtime.testing import FakeClient

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "providers/azure/scripts/generate_offline_skus.py"
RECORDED = sorted((ROOT / "tests/providers/azure/azurearm/data").glob("azure-skus-*.json"))


def nodepool() -> NodePool:
    return NodePool.model_validate({
        "metadata": {"name": "general"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass",
                             "name": "default"},
            "requirements": [],
        }}},
    })  # fmt: skip


async def offline_provider(**settings: str) -> Any:
    client = FakeClient()
    client.add(AKS_NODE_CLASS_KIND, {
        "apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass",
        "metadata": {"name": "default"}, "spec": {},
    })  # fmt: skip
    return await build_provider("azure", ProviderContext(
        client=client,  # type: ignore[arg-type]  # the fake has the reads the source makes
        cluster_name="",
        settings={"offline": "true", "location": "southcentralus", **settings},
    ))  # fmt: skip


def by_name(types: Any) -> dict[str, InstanceType]:
    return {it.name: it for it in types}


async def test_offline_needs_only_the_location_and_uses_no_network(
    no_network: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for env in ("ARM_SUBSCRIPTION_ID", "AZURE_NODE_RESOURCE_GROUP", "VNET_SUBNET_ID"):
        monkeypatch.delenv(env, raising=False)
    provider = await offline_provider()
    try:
        assert isinstance(provider, OfflineAzureCloudProvider) and provider.name == "azure"
        types = by_name(await provider.get_instance_types(nodepool()))
    finally:
        await close_provider(provider)
    d2 = types["Standard_D2s_v3"]
    assert {o.zone for o in d2.offerings} == {f"southcentralus-{n}" for n in "123"}
    assert {o.capacity_type for o in d2.offerings} == {"on-demand", "spot"}
    assert all(o.price < 1 for o in d2.offerings)  # priced, not the missing-price 999
    assert "Standard_A0" not in types  # under 2 vCPUs, as online


async def test_offline_matches_the_online_provider_on_the_test_server(
    azure: AzureCloudProvider,
) -> None:
    node_class = await azure.node_classes.get("default")
    assert node_class is not None
    online = by_name(await azure.instance_types_for(node_class))
    offline_settings = {
        "offline": "true", "location": azure.settings.location,
        "nodeResourceGroup": azure.settings.node_resource_group,
    }  # fmt: skip
    provider = await offline_provider(**offline_settings)
    provider.node_classes.get = azure.node_classes.get  # the same resolved class
    offline = by_name(await provider.get_instance_types(nodepool()))
    assert set(online) == set(offline) and len(online) > 5
    for name, a in online.items():
        b = offline[name]
        assert a.capacity == b.capacity, name
        assert a.allocatable == b.allocatable, name
        assert a.requirements.labels() == b.requirements.labels(), name
        assert [(o.zone, o.capacity_type, o.price, o.available) for o in a.offerings] == [
            (o.zone, o.capacity_type, o.price, o.available) for o in b.offerings], name


async def test_a_location_without_shipped_skus_is_refused_naming_the_setting(
    no_network: list[str],
) -> None:
    with pytest.raises(Exception, match="location") as raised:
        await offline_provider(location="eastus")
    assert "eastus" in str(raised.value) and "southcentralus" in str(raised.value)


async def test_an_offline_provider_creates_nothing_and_reads_no_vm(
    no_network: list[str],
) -> None:
    provider = await offline_provider()
    claim = NodeClaim.model_validate({
        "metadata": {"name": "general-abcde"},
        "spec": {"nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass",
                                  "name": "default"}, "requirements": []},
    })  # fmt: skip
    for call in (provider.create(claim), provider.delete(claim), provider.get("azure:///x"),
                 provider.list()):
        with pytest.raises(OfflineError, match="offline"):
            await call


def test_the_shipped_sku_table_is_fresh() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check", *map(str, RECORDED)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_karpy_run_refuses_offline() -> None:
    with pytest.raises(AzureSettingsError, match="simulate"):
        check_settings({"offline": "true", "location": "southcentralus"}, cluster_name="demo",
                       environ={})
