"""The nodeclaim.tagging controller (Karpenter AWS's pkg/controllers/nodeclaim/tagging,
v1.14.1) against moto with Karpenter's IAM policy enforced: a launch whose CreateTags
failed still gets its instance's Name, karpenter.sh/nodeclaim and eks:eks-cluster-name
tags, and the NodeClaim the annotations that say it is done."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from karpy_aws import AWSCloudProvider
from karpy_aws._instances import instance_id
from karpy_aws._tagging import TaggingController, is_taggable
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.responses.tags import TagResponse

from karpy.apis import NodeClaim
from karpy.apis import labels as wk
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import NODE_CLAIM
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.runtime import Request
from karpy.runtime.testing import FakeClient

REF = NodeClassReference(group="karpenter.k8s.aws", kind="EC2NodeClass", name="default")
ON_DEMAND = {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}
TAGGED = "karpenter.k8s.aws/tagged"
CLUSTER_NAME_TAGGED = "compatibility.karpenter.k8s.aws/cluster-name-tagged"


class TagFaults:
    """While ``failing``, moto's CreateTags answers InvalidInstanceID.NotFound (EC2's
    eventual consistency just after a launch; botocore does not retry it), at the server
    in this process; ``calls`` counts the CreateTags requests that reached it."""

    def __init__(self) -> None:
        self.failing = False
        self.calls = 0


@pytest.fixture
def tag_faults() -> Iterator[TagFaults]:
    faults = TagFaults()
    original = TagResponse.create_tags

    def create_tags(self_: Any) -> Any:
        faults.calls += 1
        if faults.failing:
            raise EC2ClientError(
                "InvalidInstanceID.NotFound", "The instance ID does not exist (yet)"
            )
        return original(self_)

    TagResponse.create_tags = create_tags  # type: ignore[method-assign]
    try:
        yield faults
    finally:
        TagResponse.create_tags = original  # type: ignore[method-assign]


@pytest_asyncio.fixture
async def untagged(
    aws_provider: AWSCloudProvider, tag_faults: TagFaults
) -> AsyncIterator[NodeClaim]:
    """A NodeClaim launched while CreateTags failed (the launch still succeeds)."""
    pool = make_nodepool(REF, name="tagging")
    claim = make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND], name="tag-1")
    tag_faults.failing = True
    launched = await aws_provider.create(claim)
    tag_faults.failing = False
    launched.metadata.name = claim.metadata.name
    try:
        yield launched
    finally:
        await aws_provider.delete(launched)


async def _tags(aws_provider: AWSCloudProvider, nodeclaim: NodeClaim) -> dict[str, str]:
    iid = instance_id(nodeclaim.status.provider_id or "")
    answer = await aws_provider.clients.ec2.describe_instances(InstanceIds=[iid])
    instance = answer["Reservations"][0]["Instances"][0]
    return {t["Key"]: t["Value"] for t in instance.get("Tags") or ()}


def _stored(client: FakeClient, nodeclaim: NodeClaim, node_name: str) -> dict[str, Any]:
    obj = nodeclaim.to_dict()
    obj["status"]["nodeName"] = node_name
    return client.add(NODE_CLAIM, obj)


async def test_tags_a_failed_launch_tagging_missed_and_retries_until_done(
    aws_provider: AWSCloudProvider, untagged: NodeClaim, tag_faults: TagFaults
) -> None:
    before = await _tags(aws_provider, untagged)
    assert "karpenter.sh/nodeclaim" not in before  # what the launch's one attempt lost
    client = FakeClient()
    _stored(client, untagged, "ip-10-0-0-1.ec2.internal")
    controller = TaggingController(aws_provider, client, pace=0)
    request = Request(namespace="", name="tag-1")

    tag_faults.failing = True  # still failing: the reconcile fails, so it is retried
    with pytest.raises(Exception, match=r"InvalidInstanceID\.NotFound"):
        await controller.reconcile(request)
    stored = await client.get(NODE_CLAIM, "tag-1")
    assert TAGGED not in (stored["metadata"].get("annotations") or {})

    tag_faults.failing = False
    await controller.reconcile(request)
    after = await _tags(aws_provider, untagged)
    assert after["karpenter.sh/nodeclaim"] == "tag-1"
    assert after["Name"] == "ip-10-0-0-1.ec2.internal"  # the Node's name, as Karpenter's
    assert after["eks:eks-cluster-name"] == aws_provider.settings.cluster_name
    stored = await client.get(NODE_CLAIM, "tag-1")
    annotations = stored["metadata"]["annotations"]
    assert annotations[TAGGED] == "true" and annotations[CLUSTER_NAME_TAGGED] == "true"
    assert not is_taggable(stored)

    calls = tag_faults.calls
    await controller.reconcile(request)  # done: not looked at again
    assert tag_faults.calls == calls


async def test_waits_for_the_node_name_and_keeps_tags_already_there(
    aws_provider: AWSCloudProvider, tag_faults: TagFaults
) -> None:
    pool = make_nodepool(REF, name="tagging")
    claim = make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND], name="tag-2")
    launched = await aws_provider.create(claim)  # launch tagging worked this time
    launched.metadata.name = claim.metadata.name
    try:
        first = await _tags(aws_provider, launched)
        client = FakeClient()
        obj = launched.to_dict()
        client.add(NODE_CLAIM, obj)
        controller = TaggingController(aws_provider, client, pace=0)
        calls = tag_faults.calls
        await controller.reconcile(Request(namespace="", name="tag-2"))  # no Node name yet: nothing
        assert tag_faults.calls == calls
        assert not (await client.get(NODE_CLAIM, "tag-2"))["metadata"].get("annotations", {}).get(
            TAGGED)
        await client.patch(NODE_CLAIM, "tag-2", {"status": {"nodeName": "ip-10-0-0-2"}},
                           subresource="status")
        await controller.reconcile(Request(namespace="", name="tag-2"))
        after = await _tags(aws_provider, launched)
        # Karpenter writes only the keys the instance lacks: launch's Name stays.
        assert after["Name"] == first["Name"]
        assert after["karpenter.sh/nodeclaim"] == "tag-2"
        annotations = (await client.get(NODE_CLAIM, "tag-2"))["metadata"]["annotations"]
        assert annotations[TAGGED] == "true"
    finally:
        await aws_provider.delete(launched)
