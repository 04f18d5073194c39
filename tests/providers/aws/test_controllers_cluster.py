"""The controllers the AWS provider contributes, on the local control plane and moto:
the EC2NodeClass status controller writes status, conditions and its finalizer and
cleans up on deletion; the interruption controller turns queue messages into NodeClaim
deletions and survives malformed messages."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import boto3
import pytest
import pytest_asyncio
from conftest import CLUSTER, K8S_VERSION, Account, node_class_manifest
from karpy_aws import AWSCloudProvider
from karpy_aws._controllers import nodeclass_hash_spec
from karpy_aws._hash import hash_drifted
from karpy_aws._interruption import InterruptionController
from karpy_aws._kinds import EC2_NODE_CLASS_KIND
from karpy_aws._nodeclass_status import NodeClassStatusController, kubernetes_minor_version
from karpy_aws._resolve import instance_profile_name
from karpy_aws.apis import EC2NodeClass

from karpy.apis import NodeClaim
from karpy.cloudprovider import NODE_CLAIM as NODE_CLAIM_KIND
from karpy.cloudprovider import OfferingKey
from karpy.cloudprovider.nodeclass_hash import NodeClassHash
from karpy.cloudprovider.testing import eventually
from karpy.runtime import KubeClient, Request
from karpy.runtime import errors as api_errors

pytestmark = pytest.mark.cluster


@pytest_asyncio.fixture
async def client(api_client: Any) -> AsyncIterator[KubeClient]:
    async with KubeClient(api_client) as c:
        yield c


async def test_kubernetes_version_is_major_minor(client: KubeClient) -> None:
    version = await kubernetes_minor_version(client)
    major, minor = version.split(".")
    assert major == "1" and minor.isdigit() and int(minor) >= 28


async def test_status_controller_resolves_reports_and_finalizes(
    client: KubeClient, aws_provider: AWSCloudProvider, aws_account: Account
) -> None:
    name = f"status-{uuid.uuid4().hex[:6]}"
    await client.create(EC2_NODE_CLASS_KIND, node_class_manifest(name))
    controller = NodeClassStatusController(aws_provider, client, k8s_version=K8S_VERSION)
    result = await controller.reconcile(Request("", name))
    assert result.requeue_after == 60.0
    stored = await client.get(EC2_NODE_CLASS_KIND, name, live=True)
    assert "karpenter.k8s.aws/termination" in stored["metadata"]["finalizers"]
    status = stored["status"]
    assert {s["id"] for s in status["subnets"]} == set(aws_account.subnets)
    assert [g["id"] for g in status["securityGroups"]] == [aws_account.security_group]
    assert {a["id"] for a in status["amis"]} == set(aws_account.amis.values())
    assert status["instanceProfile"] == instance_profile_name("karpy-test", "us-east-1", name)
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {
        "Ready": "True",
        "SubnetsReady": "True",
        "SecurityGroupsReady": "True",
        "AMIsReady": "True",
        "InstanceProfileReady": "True",
        "ValidationSucceeded": "True",
        "PlacementGroupReady": "True",
        "CapacityReservationsReady": "True",
    }
    # a second pass with nothing changed writes nothing
    version = stored["metadata"]["resourceVersion"]
    await controller.reconcile(Request("", name))
    assert (await client.get(EC2_NODE_CLASS_KIND, name, live=True))["metadata"][
        "resourceVersion"
    ] == version

    # selectors that match nothing: not Ready, and the message says which
    await client.patch(
        EC2_NODE_CLASS_KIND,
        name,
        {"spec": {"subnetSelectorTerms": [{"tags": {"team": "nobody"}}]}},
    )
    await controller.reconcile(Request("", name))
    stored = await client.get(EC2_NODE_CLASS_KIND, name, live=True)
    by_type = {c["type"]: c for c in stored["status"]["conditions"]}
    assert by_type["SubnetsReady"]["status"] == "False"
    assert by_type["SubnetsReady"]["reason"] == "SubnetsNotFound"
    assert "nobody" in by_type["SubnetsReady"]["message"]
    assert by_type["Ready"]["status"] == "False"

    # deletion: the instance profile goes, then the finalizer, then the object
    await client.delete(EC2_NODE_CLASS_KIND, name)
    await controller.reconcile(Request("", name))
    with pytest.raises(api_errors.NotFound):
        await client.get(EC2_NODE_CLASS_KIND, name, live=True)
    with pytest.raises(Exception, match="NoSuchEntity"):
        await aws_provider.clients.iam.get_instance_profile(
            InstanceProfileName=instance_profile_name("karpy-test", "us-east-1", name)
        )


def spot_warning(instance_id: str) -> str:
    return json.dumps(
        {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "time": "2026-11-23T19:00:00Z",
            "region": "us-east-1",
            "detail": {"instance-id": instance_id, "instance-action": "terminate"},
        }
    )


async def test_interruption_deletes_the_nodeclaim_and_drops_bad_messages(
    client: KubeClient, aws_provider: AWSCloudProvider
) -> None:
    # the queue Karpenter's getting-started template creates, named after the cluster (the
    # IAM policy grants karpy that queue only); set up with the test's own client
    queue = CLUSTER
    sqs = boto3.client(
        "sqs",
        region_name=aws_provider.settings.region,
        endpoint_url=aws_provider.settings.endpoint_url,
    )
    url = sqs.create_queue(QueueName=queue)["QueueUrl"]
    sqs.purge_queue(QueueUrl=url)
    name = f"interrupted-{uuid.uuid4().hex[:6]}"
    await client.create(
        NODE_CLAIM_KIND,
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "name": name,
                "labels": {
                    "node.kubernetes.io/instance-type": "m5.large",
                    "topology.kubernetes.io/zone": "us-east-1a",
                    "karpenter.sh/capacity-type": "spot",
                },
            },
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"},
                "requirements": [],
            },
        },
    )
    await client.patch_status(
        NODE_CLAIM_KIND, name, {"status": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"}}
    )
    for body in ("{not json", spot_warning("i-0123456789abcdef0"), json.dumps({"source": "x"})):
        sqs.send_message(QueueUrl=url, MessageBody=body)

    settings = aws_provider.settings
    aws_provider.settings = dataclasses.replace(settings, interruption_queue=queue)
    try:
        controller = InterruptionController(aws_provider, client)

        async def drained() -> None:
            await controller.poll_once(wait_seconds=0)
            attrs = sqs.get_queue_attributes(
                QueueUrl=url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                ],
            )
            left = sum(int(v) for v in attrs["Attributes"].values())
            assert left == 0, f"{left} messages left on the queue"

        await eventually(drained, within=30, what="every message handled and deleted")
    finally:
        aws_provider.settings = settings
    with pytest.raises(api_errors.NotFound):
        await client.get(NODE_CLAIM_KIND, name, live=True)
    key = OfferingKey("m5.large", "us-east-1a", "spot")
    assert aws_provider.unavailable.is_unavailable(key)
    aws_provider.unavailable._until.pop(key, None)
    sqs.delete_queue(QueueUrl=url)


async def test_a_karpenter_stamped_nodeclaim_is_restamped_not_drifted_then_drifts(
    client: KubeClient, aws_provider: AWSCloudProvider
) -> None:
    # What a Karpenter AWS of hash version v4 left on the API server: the class and a
    # NodeClaim it launched, both stamped v4.
    name = f"hashed-{uuid.uuid4().hex[:6]}"
    old = {"karpenter.k8s.aws/ec2nodeclass-hash": "1234",
           "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4"}
    manifest = node_class_manifest(name)
    manifest["metadata"] = {"name": name, "annotations": old}
    await client.create(EC2_NODE_CLASS_KIND, manifest)
    await client.create(NODE_CLAIM_KIND, {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "annotations": old},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                  "name": name},
                 "requirements": []},
    })  # fmt: skip
    try:
        controller = NodeClassHash(nodeclass_hash_spec(aws_provider.cluster.hash_ca_bundle), client)

        async def read() -> tuple[EC2NodeClass, NodeClaim]:
            node_class = await client.get(EC2_NODE_CLASS_KIND, name, live=True)
            nodeclaim = await client.get(NODE_CLAIM_KIND, name, live=True)
            return EC2NodeClass.from_dict(node_class), NodeClaim.from_dict(nodeclaim)

        await controller.reconcile(Request("", name))
        node_class, nodeclaim = await read()
        stamped = node_class.metadata.annotations
        current = stamped["karpenter.k8s.aws/ec2nodeclass-hash"]
        assert stamped["karpenter.k8s.aws/ec2nodeclass-hash-version"] == "v5"
        assert nodeclaim.metadata.annotations == {
            "karpenter.k8s.aws/ec2nodeclass-hash": current,
            "karpenter.k8s.aws/ec2nodeclass-hash-version": "v5",
        }
        assert not hash_drifted(nodeclaim, node_class)

        await client.patch(EC2_NODE_CLASS_KIND, name, {"spec": {"tags": {"team": "b"}}})
        await controller.reconcile(Request("", name))
        node_class, nodeclaim = await read()
        assert nodeclaim.metadata.annotations["karpenter.k8s.aws/ec2nodeclass-hash"] == current
        assert hash_drifted(nodeclaim, node_class)
    finally:
        # Left behind, the unlaunched NodeClaim would stay on the cluster the later
        # tests share.
        for kind in (NODE_CLAIM_KIND, EC2_NODE_CLASS_KIND):
            with contextlib.suppress(api_errors.NotFound):
                await client.delete(kind, name)
