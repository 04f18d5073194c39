"""End to end: capacity reservations with the AWS provider, on the local control plane
and moto (its capacity-reservation gap filled at the test server, gap 13 of
moto_harness). Issue 28's moto acceptance, in one scenario on one cluster:

an EC2NodeClass selecting an ODCR and a capacity block by tag shows them in
``status.capacityReservations``; three pods that each need a node land in them (two in
the ODCR, one in the block), every CreateFleet targeting its reservation; the block
coming within 40 minutes of its end (karpy's clock moved forward) has its node drained
and replaced before the end; a Capacity Reservation Instance Interruption Warning on
the queue cordons and drains its node. Karpenter's IAM policy is enforced throughout.
"""

from __future__ import annotations

import datetime
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aioboto3
import boto3
import pytest
from iam_check import IAMCheck
from karpy_aws._kinds import EC2_NODE_CLASS_KIND
from karpy_aws._nodeclass_status import kubernetes_minor_version
from karpy_aws.apis import labels as aws
from moto.moto_api._internal.models import moto_api_backend
from moto_harness import FleetFaults, moto_server, seed_account, use_test_credentials

from karpy.controllers.settings import Settings
from karpy.runtime import Client, kinds
from karpy.state.kinds import NODE_CLAIM

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))
from aws_kubelet import MotoKubelet
from harness import karpy_operator
from kube import clean_up, connect, deployment, eventually, running_pods

pytestmark = [pytest.mark.cluster]

CLUSTER = "karpy-test"
REGION = "us-east-1"
POOL = "aws-reserved"
SELECT = "karpy-e2e-reserved"
QUEUE = CLUSTER
APP = "reserved"
TAGS = {"karpy-e2e": "reserved"}
ODCR_TYPE = "m5.xlarge"
BLOCK_TYPE = "c5.xlarge"


def node_class() -> dict[str, Any]:
    discovery = {"karpenter.sh/discovery": CLUSTER}
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": POOL},
        "spec": {
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": discovery}],
            "securityGroupSelectorTerms": [{"tags": discovery}],
            "capacityReservationSelectorTerms": [{"tags": TAGS}],
            "role": f"KarpenterNodeRole-{CLUSTER}",
        },
    }


def node_pool() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": POOL},
        "spec": {
            "template": {
                "metadata": {"labels": {SELECT: "yes"}},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": POOL,
                    },
                    "requirements": [
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["reserved", "on-demand"],
                        },
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": [ODCR_TYPE, BLOCK_TYPE],
                        },
                    ],
                    "expireAfter": "Never",
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "0s",
                "budgets": [{"nodes": "100%"}],
            },
        },
    }


async def pool_claims(client: Client) -> list[dict[str, Any]]:
    return [
        c
        for c in await client.list(NODE_CLAIM)
        if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == POOL
    ]


async def live_instances(ec2: Any) -> list[dict[str, Any]]:
    answer = await ec2.describe_instances(
        Filters=[
            {"Name": "tag:eks:eks-cluster-name", "Values": [CLUSTER]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
    )
    return [i for r in answer["Reservations"] for i in r["Instances"]]


def template_target(url: str, name: str) -> dict[str, Any]:
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=url)
    data = ec2.describe_launch_template_versions(LaunchTemplateName=name, Versions=["$Latest"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    return dict(data)


async def test_reservations_resolve_launch_drain_and_interrupt(
    cluster: Any, namespace: str
) -> None:
    use_test_credentials()
    iam = IAMCheck.karpenter(cluster=CLUSTER, region=REGION)

    async def eventually_allowed(check: Any, **wait: Any) -> Any:
        async def judged() -> Any:
            iam.raise_for_denials()
            return await check()

        return await eventually(judged, **wait)

    with moto_server(iam=iam) as url, FleetFaults().installed() as faults:
        moto_api_backend.reset()
        async with connect(cluster) as client:
            version = await kubernetes_minor_version(client)
            account = seed_account(url, faults, cluster=CLUSTER, region=REGION,
                                   k8s_versions=(version,))
            zone = sorted(account.subnets.values())[0]
            block_end = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=3)
            odcr = faults.add_capacity_reservation(ODCR_TYPE, zone, count=2, tags=TAGS)
            block = faults.add_capacity_reservation(
                BLOCK_TYPE, zone, count=1, tags=TAGS, reservation_type="capacity-block",
                end=block_end,
            )
            faults.add_capacity_reservation(ODCR_TYPE, zone, count=5, tags={"karpy-e2e": "other"})
            session = aioboto3.Session()
            async with (
                session.client("ec2", region_name=REGION, endpoint_url=url) as ec2,
                session.client("sqs", region_name=REGION, endpoint_url=url) as sqs,
            ):
                queue_url = (await sqs.create_queue(QueueName=QUEUE))["QueueUrl"]
                cluster.kubectl("apply", "-f", "-", input=json.dumps(node_class()))
                cluster.kubectl("apply", "-f", "-", input=json.dumps(node_pool()))
                # 3 CPUs: one pod per 4-vCPU node
                app = deployment(APP, node_selector={SELECT: "yes"}, replicas=0, cpu="3")
                await client.create(kinds.DEPLOYMENT, app, namespace=namespace)
                settings = {
                    "region": REGION,
                    "endpointURL": url,
                    "clusterEndpoint": "https://127.0.0.1:6443",
                    "interruptionQueue": QUEUE,
                    "isolatedVPC": "true",
                }
                async with (
                    karpy_operator(
                        cluster,
                        cloud_provider="aws",
                        provider_settings=settings,
                        settings=Settings(cluster_name=CLUSTER, disruption_validation_delay=2.0,
                                          disruption_poll_period=2.0),
                    ) as karpy,
                    MotoKubelet(client, ec2, cluster=CLUSTER).running(),
                ):
                    provider = karpy.operator._provider
                    assert provider is not None

                    # 1. the ODCR and the block, selected by tag, on the status
                    async def resolved() -> dict[str, Any] | None:
                        obj = await client.get(EC2_NODE_CLASS_KIND, POOL)
                        status = obj.get("status") or {}
                        ready = any(
                            c["type"] == "Ready" and c["status"] == "True"
                            for c in status.get("conditions", [])
                        )
                        found = ready and status.get("capacityReservations")
                        return dict(status) if found else None

                    status = await eventually_allowed(resolved, timeout=120,
                                                      what="EC2NodeClass Ready with reservations")
                    by_id = {r["id"]: r for r in status["capacityReservations"]}
                    assert set(by_id) == {odcr, block}
                    assert by_id[odcr]["instanceType"] == ODCR_TYPE
                    assert by_id[odcr]["availabilityZone"] == zone
                    assert by_id[block]["reservationType"] == "capacity-block"
                    assert by_id[block]["state"] == "active"
                    conditions = {c["type"]: c["status"] for c in status["conditions"]}
                    assert conditions["CapacityReservationsReady"] == "True"

                    # 2. three pods, one per node: all three land in the reservations
                    started = time.monotonic()
                    await client.patch(kinds.DEPLOYMENT, APP, {"spec": {"replicas": 3}},
                                       namespace=namespace)
                    await eventually_allowed(
                        lambda: running_pods(client, namespace, APP, 3),
                        timeout=300, what="3 pods Running in the reservations",
                    )
                    print(f"\n3 pods Running in {time.monotonic() - started:.1f}s")

                    # A NodeClaim's launch labels are written at the end of the lifecycle
                    # pass that also registered it (as Karpenter's): its Node can run pods
                    # a moment before they land.
                    async def launched() -> list[dict[str, Any]] | None:
                        claims = await pool_claims(client)
                        return claims if all(
                            "karpenter.sh/capacity-type" in (c["metadata"].get("labels") or {})
                            for c in claims
                        ) else None

                    claims = await eventually(launched, timeout=30, what="NodeClaims labelled")
                    in_reservation = sorted(
                        (c["metadata"]["labels"].get(aws.LABEL_CAPACITY_RESERVATION_ID, ""))
                        for c in claims
                    )
                    assert in_reservation == sorted([odcr, odcr, block]), in_reservation
                    assert all(
                        c["metadata"]["labels"]["karpenter.sh/capacity-type"] == "reserved"
                        for c in claims
                    )
                    # every launch targeted its reservation through its launch template
                    targets = []
                    for request in faults.requests:
                        for config in request["launch_template_configs"]:
                            name = config["LaunchTemplateSpecification"]["LaunchTemplateName"]
                            data = template_target(url, name)
                            spec = data.get("CapacityReservationSpecification") or {}
                            targets.append(
                                (
                                    (spec.get("CapacityReservationTarget") or {}).get(
                                        "CapacityReservationId"
                                    ),
                                    request["target_capacity_specification"][
                                        "DefaultTargetCapacityType"
                                    ],
                                    (data.get("InstanceMarketOptions") or {}).get("MarketType"),
                                )
                            )
                    assert (odcr, "on-demand", None) in targets, targets
                    assert (block, "capacity-block", "capacity-block") in targets, targets
                    assert all(t[0] in (odcr, block) for t in targets), targets

                    # 3. the block comes within 40 minutes of its end: its node is drained
                    # and replaced, before the end
                    in_block = next(
                        c for c in claims
                        if c["metadata"]["labels"][aws.LABEL_CAPACITY_RESERVATION_ID] == block
                    )
                    block_instance = in_block["status"]["providerID"].rsplit("/", 1)[-1]
                    skew = datetime.timedelta(hours=2, minutes=25)
                    provider.reservations.wall = lambda: datetime.datetime.now(
                        datetime.UTC
                    ) + skew

                    async def block_drained() -> bool:
                        live = {i["InstanceId"] for i in await live_instances(ec2)}
                        return block_instance not in live

                    await eventually_allowed(block_drained, timeout=240,
                                             what="capacity block's instance terminated")
                    assert provider.reservations.wall() < block_end
                    assert karpy.messages("initiating delete for capacity block expiration")
                    await eventually_allowed(
                        lambda: running_pods(client, namespace, APP, 3),
                        timeout=300, what="pods Running again after the block's drain",
                    )
                    provider.reservations.wall = lambda: datetime.datetime.now(datetime.UTC)

                    # 4. the interruption warning for an ODCR instance: cordoned, drained
                    claims = await pool_claims(client)
                    victim_claim = next(
                        c for c in claims
                        if c["metadata"]["labels"].get(aws.LABEL_CAPACITY_RESERVATION_ID) == odcr
                        and not c["metadata"].get("deletionTimestamp")
                    )
                    victim = victim_claim["status"]["providerID"].rsplit("/", 1)[-1]
                    await sqs.send_message(
                        QueueUrl=queue_url,
                        MessageBody=json.dumps(
                            {
                                "version": "0",
                                "id": str(uuid.uuid4()),
                                "detail-type": (
                                    "EC2 Capacity Reservation Instance Interruption Warning"
                                ),
                                "source": "aws.ec2",
                                "time": "2026-11-23T20:00:00Z",
                                "region": REGION,
                                "detail": {"instance-id": victim, "instance-action": "terminate"},
                            }
                        ),
                    )

                    async def victim_gone() -> bool:
                        live = {i["InstanceId"] for i in await live_instances(ec2)}
                        return victim not in live

                    await eventually_allowed(victim_gone, timeout=240,
                                             what="interrupted ODCR instance terminated")
                    await eventually_allowed(
                        lambda: running_pods(client, namespace, APP, 3),
                        timeout=300, what="pods Running again after the interruption",
                    )

                    await client.patch(kinds.DEPLOYMENT, APP, {"spec": {"replicas": 0}},
                                       namespace=namespace)

                    async def all_terminated() -> bool:
                        return not await live_instances(ec2)

                    await eventually_allowed(all_terminated, timeout=300,
                                             what="every instance terminated by emptiness")
                    forced = await clean_up(client, namespace, APP, [POOL], timeout=300)
                    assert not forced, forced
                    await client.delete(EC2_NODE_CLASS_KIND, POOL)
            iam.raise_for_denials()
            assert iam.allowed["ec2:DescribeCapacityReservations"]
