"""Offline mode of the AWS provider: built with ``offline=true`` it opens no client and
makes no call, and prices a NodePool's instance types from the shipped tables exactly
as the online provider prices them from the same data (moto's instance types, the
shipped on-demand table)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from karpy_aws import EC2_NODE_CLASS_KIND, AWSCloudProvider, AWSSettings, AWSSettingsError
from karpy_aws._offline import OfflineAWSCloudProvider
from karpy_aws._settings import check_settings
from karpy_aws._shippedtypes import from_row, offline_instance_types, to_row
from karpy_aws._staticdata import static_data
from karpy_aws.apis import EC2NodeClass

from karpy.apis import NodeClaim, NodePool
from karpy.cloudprovider import InstanceType, NodeClassNotReadyError, ProviderContext
from karpy.cloudprovider.errors import OfflineError
from karpy.cloudprovider.registry import build_provider, close_provider
from karpy.runtime.testing import FakeClient

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "providers/aws/scripts/generate_offline_instance_types.py"
TABLE = ROOT / "providers/aws/karpy_aws/data/instance_types.json"
# vt1.3xlarge and trn1.2xlarge: EC2 offers them in some of the class's zones only
COMPARED = (
    "m5.large", "c5.xlarge", "t3.medium", "m6g.large", "r5.2xlarge", "vt1.3xlarge", "trn1.2xlarge"
)
RECORDED_MOTO = json.loads(TABLE.read_text())["moto_version"]
same_moto = pytest.mark.skipif(
    version("moto") != RECORDED_MOTO,
    reason=f"the table was generated from moto {RECORDED_MOTO}, moto {version('moto')} is "
    "installed: regenerate it with providers/aws/scripts/generate_offline_instance_types.py",
)


def nodepool(node_class: str = "default") -> NodePool:
    return NodePool.model_validate({
        "metadata": {"name": "general"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                             "name": node_class},
            "requirements": [],
        }}},
    })  # fmt: skip


def node_class(subnets: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "role": "KarpenterNodeRole-demo",
        },
        "status": {"subnets": subnets if subnets is not None else [
            {"id": "subnet-a", "zone": "us-east-1a", "zoneID": "use1-az1"},
            {"id": "subnet-b", "zone": "us-east-1b", "zoneID": "use1-az2"},
        ]},
    }


async def offline_provider(
    manifest: dict[str, Any] | None = None, **settings: str
) -> Any:
    client = FakeClient()
    client.add(EC2_NODE_CLASS_KIND, manifest or node_class())
    return await build_provider("aws", ProviderContext(
        client=client,  # type: ignore[arg-type]  # the fake has the reads the getter makes
        cluster_name="",
        settings={"offline": "true", "region": "us-east-1", **settings},
    ))  # fmt: skip


def by_name(types: Any) -> dict[str, InstanceType]:
    return {it.name: it for it in types}


async def test_offline_prices_every_type_in_the_node_class_zones_with_no_network(
    no_network: list[str],
) -> None:
    provider = await offline_provider()
    try:
        assert isinstance(provider, OfflineAWSCloudProvider) and provider.name == "aws"
        types = by_name(await provider.get_instance_types(nodepool()))
    finally:
        await close_provider(provider)
    assert len(types) > 1000
    on_demand = static_data().on_demand_prices["us-east-1"]
    m5 = types["m5.large"]
    assert {(o.zone, o.capacity_type) for o in m5.offerings} == {
        (z, c) for z in ("us-east-1a", "us-east-1b") for c in ("on-demand", "spot")
    }
    # spot is seeded with the on-demand price, as Karpenter AWS does before it has
    # any spot price history
    assert {o.price for o in m5.offerings} == {on_demand["m5.large"]}
    assert all(o.available for o in m5.offerings)
    assert list(m5.requirements["topology.k8s.aws/zone-id"].sorted_values()) == [
        "use1-az1", "use1-az2"]
    assert m5.capacity["cpu"] == 2000 and m5.capacity["pods"] == 29


async def test_offline_matches_what_the_online_provider_builds_from_moto(
    aws_provider: AWSCloudProvider, default_node_class: EC2NodeClass
) -> None:
    """Same NodeClass (resolved against moto), same settings: the same capacity,
    overhead, labels and on-demand offerings, available in the same zones. (Spot
    differs by design: moto answers spot price history with 0.00001, offline seeds spot
    with on-demand.)"""
    online = by_name(await aws_provider.get_instance_types(nodepool()))

    async def get(name: str) -> EC2NodeClass | None:
        return default_node_class if name == "default" else None

    settings = AWSSettings.from_settings(
        {"offline": "true", "region": "us-east-1"}, cluster_name="", environ={}
    )
    offline = by_name(
        await OfflineAWSCloudProvider(settings=settings, node_classes=get)
        .get_instance_types(nodepool())
    )
    for name in COMPARED:
        a, b = online[name], offline[name]
        assert a.capacity == b.capacity, name
        assert a.allocatable == b.allocatable, name
        assert a.requirements.labels() == b.requirements.labels(), name
        want = {(o.zone, o.price) for o in a.offerings
                if o.capacity_type == "on-demand" and o.available}
        got = {(o.zone, o.price) for o in b.offerings
               if o.capacity_type == "on-demand" and o.available}
        assert want and want == got, name
    assert set(online) <= set(offline)


@same_moto
def test_the_table_rows_describe_the_types_as_moto_does() -> None:
    """Every shipped row builds the same instance type as moto's full description."""
    from karpy_aws._instancetypes import NodeClassShape, SubnetZone, build_instance_type
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    shape = NodeClassShape(zones=(SubnetZone("us-east-1a"),))

    def build(info: Any) -> Any:
        it = build_instance_type(info, region="us-east-1", offered_zones=("us-east-1a",),
                                 shape=shape, price=lambda *_: 1.0, unavailable=lambda _: False)
        return it and (it.capacity, it.allocatable, it.requirements.labels())

    shipped = offline_instance_types()
    assert shipped and set(shipped) <= set(INSTANCE_TYPES)
    for name, info in shipped.items():
        assert build(info) == build(INSTANCE_TYPES[name]), name
        assert from_row(name, to_row(info)) == info


@same_moto
def test_the_shipped_table_is_fresh_and_small() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert TABLE.stat().st_size < 512 * 1024


async def test_zones_come_from_the_setting_when_the_status_has_no_subnets(
    no_network: list[str],
) -> None:
    provider = await offline_provider(node_class(subnets=[]))
    with pytest.raises(NodeClassNotReadyError, match="offlineZones"):
        await provider.get_instance_types(nodepool())
    provider = await offline_provider(node_class(subnets=[]), offlineZones="us-east-1c")
    m5 = by_name(await provider.get_instance_types(nodepool()))["m5.large"]
    assert {o.zone for o in m5.offerings} == {"us-east-1c"}


async def test_a_region_without_shipped_prices_is_refused_naming_the_setting(
    no_network: list[str],
) -> None:
    with pytest.raises(Exception, match="region") as raised:
        await offline_provider(region="eu-west-1")
    assert "eu-west-1" in str(raised.value) and "us-east-1" in str(raised.value)


async def test_an_offline_provider_launches_nothing_and_reads_no_instance(
    no_network: list[str],
) -> None:
    provider = await offline_provider()
    claim = NodeClaim.model_validate({
        "metadata": {"name": "general-abcde"},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                  "name": "default"}, "requirements": []},
        "status": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"},
    })  # fmt: skip
    for call in (provider.create(claim), provider.delete(claim),
                 provider.get("aws:///us-east-1a/i-0123456789abcdef0"), provider.list()):
        with pytest.raises(OfflineError, match="offline"):
            await call
    assert await provider.is_drifted(claim) is None


def test_karpy_run_refuses_offline() -> None:
    with pytest.raises(AWSSettingsError, match="simulate"):
        check_settings({"offline": "true", "region": "us-east-1"}, cluster_name="demo",
                       environ={})
