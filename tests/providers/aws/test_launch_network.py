"""What the EC2NodeClass says about the instance's network, placement and volumes
reaches the launch template a fleet launches with (against moto, whose CreateFleet
refuses what EC2 refuses: see moto_harness.py, gap 7)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import boto3
import botocore.exceptions
import pytest
import pytest_asyncio
from conftest import node_class_manifest, resolved
from karpy_aws import AWSCloudProvider, AWSSettings
from karpy_aws._clients import AWSClients
from karpy_aws._hash import HASH_VERSION, hash_drifted, node_class_hash
from karpy_aws.apis import EC2NodeClass
from moto_harness import Account

from karpy.apis import labels as wk
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import NodeClassNotReadyError
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

ON_DEMAND = {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}
REF_HASHED = NodeClassReference(group="karpenter.k8s.aws", kind="EC2NodeClass", name="hashed")


def only(*types: str) -> dict[str, Any]:
    return {"key": wk.LABEL_INSTANCE_TYPE, "operator": "In", "values": list(types)}


class Launcher:
    """A provider over the session's moto clients with one EC2NodeClass, recording the
    CreateFleet requests and reading back the templates they name."""

    def __init__(self, provider: AWSCloudProvider, node_class: EC2NodeClass) -> None:
        self.provider = provider
        self.node_class = node_class
        self.requests: list[dict[str, Any]] = []
        original = provider.clients.ec2.create_fleet

        async def record(**kwargs: Any) -> Any:
            self.requests.append(kwargs)
            return await original(**kwargs)

        provider.clients.ec2.create_fleet = record
        self._original = original
        self.pool = make_nodepool(
            NodeClassReference(
                group="karpenter.k8s.aws", kind="EC2NodeClass", name=node_class.metadata.name or ""
            )
        )

    def template_data(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        ec2 = boto3.client(
            "ec2",
            region_name=self.provider.settings.region,
            endpoint_url=self.provider.settings.endpoint_url,
        )
        out = []
        for config in request["LaunchTemplateConfigs"]:
            name = config["LaunchTemplateSpecification"]["LaunchTemplateName"]
            versions = ec2.describe_launch_template_versions(LaunchTemplateName=name)
            out.append(versions["LaunchTemplateVersions"][0]["LaunchTemplateData"])
        return out


async def launcher_for(
    aws_settings: AWSSettings, aws_clients: AWSClients, name: str, **spec: object
) -> Launcher:
    node_class = await resolved(aws_clients, node_class_manifest(name, **spec))

    async def get(wanted: str) -> EC2NodeClass | None:
        return node_class if wanted == name else None

    provider = AWSCloudProvider(
        settings=aws_settings, clients=aws_clients, node_classes=get, owns_clients=False
    )
    return Launcher(provider, node_class)


@pytest_asyncio.fixture
async def launchers(
    aws_settings: AWSSettings, aws_clients: AWSClients
) -> AsyncIterator[list[Launcher]]:
    made: list[Launcher] = []
    original = aws_clients.ec2.create_fleet
    yield made
    aws_clients.ec2.create_fleet = original
    for launcher in made:
        await launcher.provider.aclose()


async def test_an_efa_nodeclaim_launches_with_one_efa_interface_per_network_card(
    aws_settings: AWSSettings, aws_clients: AWSClients, launchers: list[Launcher]
) -> None:
    launcher = await launcher_for(aws_settings, aws_clients, "efa")
    launchers.append(launcher)
    types = {it.name: it for it in await launcher.provider.get_instance_types(launcher.pool)}
    efa = {n: types[n].capacity["vpc.amazonaws.com/efa"] for n in ("c5n.18xlarge", "c6in.32xlarge")}
    assert efa == {"c5n.18xlarge": 1, "c6in.32xlarge": 2}
    launched = await launcher.provider.create(
        make_nodeclaim(
            launcher.pool,
            requests={"vpc.amazonaws.com/efa": "1", "cpu": "1"},
            requirements=[ON_DEMAND, only("c5n.18xlarge", "c6in.32xlarge")],
        )
    )
    try:
        (request,) = launcher.requests
        groups = [g.id for g in launcher.node_class.status.security_groups]
        # one template per EFA count: each type gets one EFA interface per network card
        seen = {}
        for config, data in zip(
            request["LaunchTemplateConfigs"], launcher.template_data(request), strict=True
        ):
            (name,) = {o["InstanceType"] for o in config["Overrides"]}
            interfaces = sorted(data["NetworkInterfaces"], key=lambda n: n["NetworkCardIndex"])
            seen[name] = [
                (n["NetworkCardIndex"], n["DeviceIndex"], n["InterfaceType"]) for n in interfaces
            ]
            assert all(n["Groups"] == groups for n in interfaces)
            assert "SecurityGroupIds" not in data
        assert seen == {
            "c5n.18xlarge": [(0, 0, "efa")],
            "c6in.32xlarge": [(0, 0, "efa"), (1, 1, "efa")],
        }
    finally:
        await launcher.provider.delete(launched)


async def test_a_nodeclaim_without_efa_gets_one_primary_interface(
    aws_settings: AWSSettings, aws_clients: AWSClients, launchers: list[Launcher]
) -> None:
    launcher = await launcher_for(aws_settings, aws_clients, "plain")
    launchers.append(launcher)
    launched = await launcher.provider.create(
        make_nodeclaim(launcher.pool, requirements=[ON_DEMAND, only("c6in.32xlarge")])
    )
    try:
        (data,) = launcher.template_data(launcher.requests[0])
        assert [n["DeviceIndex"] for n in data["NetworkInterfaces"]] == [0]
        assert "InterfaceType" not in data["NetworkInterfaces"][0]
    finally:
        await launcher.provider.delete(launched)


async def test_associate_public_ip_false_and_ip_prefix_count_reach_the_template(
    aws_settings: AWSSettings, aws_clients: AWSClients, launchers: list[Launcher]
) -> None:
    launcher = await launcher_for(
        aws_settings, aws_clients, "private", associatePublicIPAddress=False, ipPrefixCount=2
    )
    launchers.append(launcher)
    launched = await launcher.provider.create(
        make_nodeclaim(launcher.pool, requirements=[ON_DEMAND, only("m5.large")])
    )
    try:
        (data,) = launcher.template_data(launcher.requests[0])
        (primary,) = data["NetworkInterfaces"]
        assert primary["AssociatePublicIpAddress"] is False
        assert primary["Ipv4PrefixCount"] == 2
        assert primary["DeviceIndex"] == 0
    finally:
        await launcher.provider.delete(launched)


async def test_the_classes_network_interfaces_are_the_templates(
    aws_settings: AWSSettings, aws_clients: AWSClients, launchers: list[Launcher]
) -> None:
    launcher = await launcher_for(
        aws_settings,
        aws_clients,
        "nics",
        associatePublicIPAddress=False,
        networkInterfaces=[
            {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
            {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"},
        ],
    )
    launchers.append(launcher)
    launched = await launcher.provider.create(
        make_nodeclaim(launcher.pool, requirements=[ON_DEMAND, only("c6in.32xlarge")])
    )
    try:
        (data,) = launcher.template_data(launcher.requests[0])
        primary, efa_only = sorted(data["NetworkInterfaces"], key=lambda n: n["NetworkCardIndex"])
        assert (primary["InterfaceType"], primary["AssociatePublicIpAddress"]) == (
            "interface",
            False,
        )
        # EC2 refuses a public address or prefixes on an efa-only interface
        assert efa_only["InterfaceType"] == "efa-only"
        assert "AssociatePublicIpAddress" not in efa_only
    finally:
        await launcher.provider.delete(launched)


async def test_the_placement_group_reaches_the_template_and_a_missing_one_is_not_ready(
    aws_settings: AWSSettings,
    aws_clients: AWSClients,
    aws_account: Account,
    launchers: list[Launcher],
) -> None:
    ec2 = boto3.client("ec2", region_name=aws_settings.region, endpoint_url=aws_account.url)
    group = ec2.create_placement_group(GroupName="karpy-cluster-pg", Strategy="cluster")
    group_id = (
        group.get("PlacementGroup")
        or ec2.describe_placement_groups(GroupNames=["karpy-cluster-pg"])["PlacementGroups"][0]
    )["GroupId"]
    launcher = await launcher_for(
        aws_settings, aws_clients, "placed", placementGroupSelector={"name": "karpy-cluster-pg"}
    )
    launchers.append(launcher)
    ready = {c.type: c.status for c in launcher.node_class.status.conditions}
    assert ready["PlacementGroupReady"] == "True"
    launched = await launcher.provider.create(
        make_nodeclaim(launcher.pool, requirements=[ON_DEMAND, only("m5.large")])
    )
    try:
        (data,) = launcher.template_data(launcher.requests[0])
        assert data["Placement"]["GroupId"] == group_id
    finally:
        await launcher.provider.delete(launched)

    missing = await launcher_for(
        aws_settings, aws_clients, "misplaced", placementGroupSelector={"name": "no-such-group"}
    )
    launchers.append(missing)
    conditions = {c.type: c for c in missing.node_class.status.conditions}
    assert conditions["PlacementGroupReady"].status == "False"
    assert "placementGroupSelector" in conditions["PlacementGroupReady"].message
    assert conditions["Ready"].status == "False"
    with pytest.raises(NodeClassNotReadyError):
        await missing.provider.create(make_nodeclaim(missing.pool, requirements=[ON_DEMAND]))


async def test_volume_initialization_rate_reaches_the_block_device_mapping(
    aws_settings: AWSSettings, aws_clients: AWSClients, launchers: list[Launcher]
) -> None:
    launcher = await launcher_for(
        aws_settings,
        aws_clients,
        "volumes",
        blockDeviceMappings=[
            {
                "deviceName": "/dev/xvda",
                "ebs": {
                    "volumeSize": "40Gi",
                    "volumeType": "gp3",
                    "snapshotID": "snap-0123456789abcdef0",
                    "volumeInitializationRate": 200,
                },
            }
        ],
    )
    launchers.append(launcher)
    launched = await launcher.provider.create(
        make_nodeclaim(launcher.pool, requirements=[ON_DEMAND, only("m5.large")])
    )
    try:
        (data,) = launcher.template_data(launcher.requests[0])
        (device,) = data["BlockDeviceMappings"]
        assert device["Ebs"]["VolumeInitializationRate"] == 200
        assert device["Ebs"]["VolumeSize"] == 40
    finally:
        await launcher.provider.delete(launched)


async def test_the_fleet_context_reaches_create_fleet(
    aws_settings: AWSSettings, aws_clients: AWSClients, launchers: list[Launcher]
) -> None:
    launcher = await launcher_for(aws_settings, aws_clients, "context", context="ctx-karpy-test")
    launchers.append(launcher)
    launched = await launcher.provider.create(
        make_nodeclaim(launcher.pool, requirements=[ON_DEMAND, only("m5.large")])
    )
    try:
        assert launcher.requests[0]["Context"] == "ctx-karpy-test"
    finally:
        await launcher.provider.delete(launched)


async def test_capacity_reservation_terms_matching_nothing_resolve_to_none(
    aws_clients: AWSClients,
) -> None:
    # applied since issue 28 (test_capacity_reservations.py): a term naming a reservation
    # that does not exist selects none, and the class is Ready, as in Karpenter
    node_class = await resolved(
        aws_clients,
        node_class_manifest(
            "reserved", capacityReservationSelectorTerms=[{"id": "cr-0123456789abcdef0"}]
        ),
    )
    conditions = {c.type: c for c in node_class.status.conditions}
    assert conditions["CapacityReservationsReady"].status == "True"
    assert node_class.status.capacity_reservations == []
    assert conditions["Ready"].status == "True"


@pytest.mark.parametrize(
    ("data", "instance_type", "code"),
    [
        (
            {"SecurityGroupIds": ["sg-1"], "NetworkInterfaces": [{"DeviceIndex": 0}]},
            "m5.large",
            "InvalidParameterCombination",
        ),
        (
            {"NetworkInterfaces": [{"DeviceIndex": 0, "InterfaceType": "efa"}]},
            "m5.large",
            "InvalidParameterCombination",
        ),
        (
            {
                "NetworkInterfaces": [
                    {"DeviceIndex": 0, "NetworkCardIndex": 0},
                    {
                        "DeviceIndex": 0,
                        "NetworkCardIndex": 1,
                        "InterfaceType": "efa-only",
                        "AssociatePublicIpAddress": False,
                    },
                ]
            },
            "c6in.32xlarge",
            "InvalidParameterValue",
        ),
        (
            {"Placement": {"GroupId": "pg-0000000000000dead"}},
            "m5.large",
            "InvalidPlacementGroup.Unknown",
        ),
    ],
)
def test_the_test_double_refuses_fleets_ec2_refuses(
    aws_account: Account, data: dict[str, Any], instance_type: str, code: str
) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=aws_account.url)
    name = f"refused-{code}-{instance_type}-{len(str(data))}"
    ec2.create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={"ImageId": aws_account.amis["x86_64"], **data},
    )
    subnet = next(iter(aws_account.subnets))
    try:
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            ec2.create_fleet(
                Type="instant",
                LaunchTemplateConfigs=[
                    {
                        "LaunchTemplateSpecification": {
                            "LaunchTemplateName": name,
                            "Version": "$Latest",
                        },
                        "Overrides": [{"InstanceType": instance_type, "SubnetId": subnet}],
                    }
                ],
                TargetCapacitySpecification={
                    "TotalTargetCapacity": 1,
                    "DefaultTargetCapacityType": "on-demand",
                },
            )
        assert refused.value.response["Error"]["Code"] == code
    finally:
        ec2.delete_launch_template(LaunchTemplateName=name)


@pytest.mark.parametrize(
    "change",
    [
        {
            "networkInterfaces": [
                {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}
            ]
        },
        {"placementGroupSelector": {"name": "another-group"}},
        {"context": "ctx-other"},
    ],
)
def test_changing_what_now_reaches_the_template_drifts_the_nodes(change: dict[str, Any]) -> None:
    before = EC2NodeClass.model_validate(node_class_manifest("hashed"))
    after = EC2NodeClass.model_validate(node_class_manifest("hashed", **change))
    claim = make_nodeclaim(make_nodepool(REF_HASHED))
    claim.metadata.annotations = {
        "karpenter.k8s.aws/ec2nodeclass-hash": node_class_hash(before),
        "karpenter.k8s.aws/ec2nodeclass-hash-version": HASH_VERSION,
    }
    # As the nodeclass.hash controller stamps them (drift compares the two annotations).
    for node_class in (before, after):
        node_class.metadata.annotations = {
            "karpenter.k8s.aws/ec2nodeclass-hash": node_class_hash(node_class),
            "karpenter.k8s.aws/ec2nodeclass-hash-version": HASH_VERSION,
        }
    assert not hash_drifted(claim, before)
    assert hash_drifted(claim, after)


async def test_an_ipv6_cluster_gets_ipv6_prefixes_and_a_primary_ipv6_address(
    aws_settings: AWSSettings, aws_clients: AWSClients, launchers: list[Launcher]
) -> None:
    """In an IPv6 cluster ``ipPrefixCount`` is the interfaces' ``Ipv6PrefixCount`` (pods'
    addresses come from IPv6 prefixes) and each asks for a primary IPv6 address, as
    Karpenter builds them; an IPv4 prefix there would leave pods without addresses."""
    ipv6 = dataclasses.replace(aws_settings, cluster_cidr="fd00:10:96::/112")
    launcher = await launcher_for(ipv6, aws_clients, "ipv6", ipPrefixCount=2)
    launchers.append(launcher)
    launched = await launcher.provider.create(
        make_nodeclaim(launcher.pool, requirements=[ON_DEMAND, only("m5.large")])
    )
    try:
        (data,) = launcher.template_data(launcher.requests[0])
        (primary,) = data["NetworkInterfaces"]
        assert primary["Ipv6PrefixCount"] == 2
        assert "Ipv4PrefixCount" not in primary
        assert (primary["PrimaryIpv6"], primary["Ipv6AddressCount"]) == (True, 1)
    finally:
        await launcher.provider.delete(launched)


async def test_connection_tracking_reaches_every_interface_but_efa_only_ones(
    aws_settings: AWSSettings, aws_clients: AWSClients, launchers: list[Launcher]
) -> None:
    tracking = {"tcpEstablishedTimeout": 300, "udpStreamTimeout": 120, "udpTimeout": 45}
    launcher = await launcher_for(
        aws_settings,
        aws_clients,
        "conntrack",
        connectionTracking=tracking,
        networkInterfaces=[
            {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
            {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"},
        ],
    )
    launchers.append(launcher)
    launched = await launcher.provider.create(
        make_nodeclaim(launcher.pool, requirements=[ON_DEMAND, only("c6in.32xlarge")])
    )
    try:
        (data,) = launcher.template_data(launcher.requests[0])
        primary, efa_only = sorted(data["NetworkInterfaces"], key=lambda n: n["NetworkCardIndex"])
        assert primary["ConnectionTrackingSpecification"] == {
            "TcpEstablishedTimeout": 300,
            "UdpStreamTimeout": 120,
            "UdpTimeout": 45,
        }
        # as Karpenter AWS: EFA-only interfaces carry no IP traffic to track
        assert "ConnectionTrackingSpecification" not in efa_only
    finally:
        await launcher.provider.delete(launched)


async def test_connection_tracking_reaches_the_default_primary_interface(
    aws_settings: AWSSettings, aws_clients: AWSClients, launchers: list[Launcher]
) -> None:
    launcher = await launcher_for(
        aws_settings, aws_clients, "conntrack-udp", connectionTracking={"udpTimeout": 60}
    )
    launchers.append(launcher)
    launched = await launcher.provider.create(
        make_nodeclaim(launcher.pool, requirements=[ON_DEMAND, only("m5.large")])
    )
    try:
        (data,) = launcher.template_data(launcher.requests[0])
        (primary,) = data["NetworkInterfaces"]
        # only what the class sets: EC2 keeps its own defaults for the others
        assert primary["ConnectionTrackingSpecification"] == {"UdpTimeout": 60}
    finally:
        await launcher.provider.delete(launched)


async def test_nested_virtualization_reaches_the_template_or_is_refused_by_name(
    aws_settings: AWSSettings, aws_clients: AWSClients, launchers: list[Launcher]
) -> None:
    launcher = await launcher_for(
        aws_settings, aws_clients, "nested", cpuOptions={"nestedVirtualization": "enabled"}
    )
    launchers.append(launcher)
    # c7i's processor supports nested virtualization (moto's DescribeInstanceTypes)
    claim = make_nodeclaim(launcher.pool, requirements=[ON_DEMAND, only("c7i.large")])
    sdk = aws_clients.ec2.meta.service_model.shape_for("LaunchTemplateCpuOptionsRequest")
    if "NestedVirtualization" not in sdk.members:
        # an SDK that cannot send it: one clear error naming the field, no launch
        # without the setting
        with pytest.raises(NodeClassNotReadyError, match=r"spec\.cpuOptions\.nestedVirtualization"):
            await launcher.provider.create(claim)
        assert launcher.requests == []
        return
    launched = await launcher.provider.create(claim)
    try:
        (data,) = launcher.template_data(launcher.requests[0])
        assert data["CpuOptions"] == {"NestedVirtualization": "enabled"}
    finally:
        await launcher.provider.delete(launched)


async def test_a_class_without_cpu_options_sends_none(
    aws_settings: AWSSettings, aws_clients: AWSClients, launchers: list[Launcher]
) -> None:
    launcher = await launcher_for(aws_settings, aws_clients, "no-cpu-options", cpuOptions={})
    launchers.append(launcher)
    launched = await launcher.provider.create(
        make_nodeclaim(launcher.pool, requirements=[ON_DEMAND, only("m5.large")])
    )
    try:
        (data,) = launcher.template_data(launcher.requests[0])
        # upstream renders CpuOptions only for a set nestedVirtualization
        assert "CpuOptions" not in data
    finally:
        await launcher.provider.delete(launched)


async def test_connection_tracking_keeps_only_nitro_types_and_nested_virtualization_capable_ones(
    aws_settings: AWSSettings, aws_clients: AWSClients, launchers: list[Launcher]
) -> None:
    plain = await launcher_for(aws_settings, aws_clients, "types-plain")
    tracked = await launcher_for(
        aws_settings, aws_clients, "types-tracked", connectionTracking={"udpTimeout": 30}
    )
    nested = await launcher_for(
        aws_settings, aws_clients, "types-nested", cpuOptions={"nestedVirtualization": "enabled"}
    )
    launchers.extend([plain, tracked, nested])

    async def names(launcher: Launcher) -> set[str]:
        return {it.name for it in await launcher.provider.get_instance_types(launcher.pool)}

    every, nitro, capable = await names(plain), await names(tracked), await names(nested)
    # xen (c3, m4, ...) types cannot take a ConnectionTrackingSpecification
    assert {"m5.large", "c7i.large"} <= nitro < every
    assert "m4.large" in every - nitro
    # only processors reporting nested-virtualization (c7i yes, m5 no)
    assert "c7i.large" in capable and "m5.large" not in capable and capable < every
