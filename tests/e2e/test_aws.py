"""End to end: karpy with the AWS provider against moto (server mode) and the local
control plane. Issue 11's e2e acceptance:

inflate 0 -> 50 -> 80 -> 0 gets its nodes through CreateFleet (on the NodeClass's
resolved AMIs), registered (tests/e2e/aws_kubelet.py plays the instances' kubelet) and
initialized, then terminated by emptiness once inflate is scaled to 0; a spot
interruption message on the queue drains and replaces that node;
injected insufficient capacity on the types in use (the cheapest) still gets the pods
Running, on other types; the EC2NodeClass shows its resolved status; nothing is left
running in moto at the end. Karpenter's controller IAM policy is enforced on every call
karpy makes (tests/providers/aws/iam_check.py): none may be refused, and the calls that
launch, tag and clean up must have been judged.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aioboto3
import pytest
from aws_kubelet import MotoKubelet
from harness import karpy_operator
from kube import clean_up, connect, deployment, eventually, gone, running_pods

from karpy.cloudprovider import OfferingKey
from karpy.controllers.settings import Settings
from karpy.runtime import Client, kinds
from karpy.runtime import errors as api_errors
from karpy.state.kinds import NODE_CLAIM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers" / "aws"))
from iam_check import IAMCheck
from karpy_aws._kinds import EC2_NODE_CLASS_KIND
from karpy_aws._nodeclass_status import kubernetes_minor_version
from moto.moto_api._internal.models import moto_api_backend
from moto_harness import (
    FleetFaults,
    moto_server,
    seed_account,
    use_test_credentials,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

CLUSTER = "karpy-test"
REGION = "us-east-1"
POOL = "aws-e2e"
SELECT = "karpy-e2e-aws"
# the interruption queue of Karpenter's getting-started template is named after the cluster,
# and its IAM policy grants that queue only
QUEUE = CLUSTER
APP = "inflate"


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
            "role": f"KarpenterNodeRole-{CLUSTER}",
        },
    }


def node_pool() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        # karpy's opt-in: a rebalance recommendation replaces the spot node, gracefully
        "metadata": {"name": POOL,
                     "annotations": {"karpy.dev/replace-on-rebalance-recommendation": "true"}},
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
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                        {
                            "key": "karpenter.k8s.aws/instance-family",
                            "operator": "In",
                            "values": ["m5", "c5", "r5"],
                        },
                        {
                            "key": "karpenter.k8s.aws/instance-cpu",
                            "operator": "In",
                            "values": ["2", "4", "8"],
                        },
                    ],
                    "expireAfter": "Never",
                },
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s",
                           "budgets": [{"nodes": "100%"}]},
        },
    }


async def instances(
    ec2: Any, states: tuple[str, ...] = ("pending", "running")
) -> list[dict[str, Any]]:
    answer = await ec2.describe_instances(
        Filters=[
            {"Name": "tag:eks:eks-cluster-name", "Values": [CLUSTER]},
            {"Name": "instance-state-name", "Values": list(states)},
        ]
    )
    return [i for r in answer["Reservations"] for i in r["Instances"]]


async def scale(client: Client, namespace: str, replicas: int) -> None:
    await client.patch(kinds.DEPLOYMENT, APP, {"spec": {"replicas": replicas}}, namespace=namespace)


@contextlib.asynccontextmanager
async def _left_clean_on_failure(client: Client, namespace: str) -> AsyncIterator[None]:
    """A failed run leaves no NodePool, NodeClaim, Node or EC2NodeClass of its own on the
    shared cluster (the tools' e2e tests, after it, would pick the aws provider from them).
    Entered after karpy, so its exit runs while karpy can still finalize them."""
    try:
        yield
    except BaseException:
        await clean_up(client, namespace, APP, [POOL], timeout=120)
        with contextlib.suppress(api_errors.NotFound):
            await client.delete(EC2_NODE_CLASS_KIND, POOL)
        try:
            await eventually(lambda: gone(client, EC2_NODE_CLASS_KIND, POOL), timeout=60,
                             what="EC2NodeClass finalized")
        except AssertionError:
            with contextlib.suppress(api_errors.NotFound):
                await client.patch(EC2_NODE_CLASS_KIND, POOL, {"metadata": {"finalizers": None}})
        raise


async def test_aws_inflate_interruption_and_ice(cluster: Any, namespace: str) -> None:
    use_test_credentials()
    iam = IAMCheck.karpenter(cluster=CLUSTER, region=REGION)

    async def eventually_allowed(check: Any, **wait: Any) -> Any:
        """``eventually``, failing at once when the policy refused one of karpy's calls
        (a refused launch would otherwise only show as a timeout)."""

        async def judged() -> Any:
            iam.raise_for_denials()
            return await check()

        return await eventually(judged, **wait)

    with moto_server(iam=iam) as url, FleetFaults().installed() as faults:
        # moto keeps its accounts in this process, across servers: start from an empty one
        # (an earlier scenario, e.g. the launch-killed chaos test, leaves its instance
        # profile behind, and then this test never sees karpy create one)
        moto_api_backend.reset()  # what POST /moto-api/reset does
        async with connect(cluster) as client:
            version = await kubernetes_minor_version(client)
            seed_account(url, faults, cluster=CLUSTER, region=REGION, k8s_versions=(version,))
            session = aioboto3.Session()
            async with (
                session.client("ec2", region_name=REGION, endpoint_url=url) as ec2,
                session.client("sqs", region_name=REGION, endpoint_url=url) as sqs,
            ):
                queue_url = (await sqs.create_queue(QueueName=QUEUE))["QueueUrl"]
                cluster.kubectl("apply", "-f", "-", input=json.dumps(node_class()))
                cluster.kubectl("apply", "-f", "-", input=json.dumps(node_pool()))
                app = deployment(APP, node_selector={SELECT: "yes"}, replicas=0, cpu="1")
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
                    _left_clean_on_failure(client, namespace),
                ):
                    provider = karpy.operator._provider
                    assert provider is not None

                    async def resolved() -> dict[str, Any] | None:
                        obj = await client.get(EC2_NODE_CLASS_KIND, POOL)
                        ready = [
                            c
                            for c in (obj.get("status") or {}).get("conditions", [])
                            if c["type"] == "Ready" and c["status"] == "True"
                        ]
                        return dict(obj["status"]) if ready else None

                    status = await eventually_allowed(
                        resolved, timeout=120, what="EC2NodeClass Ready"
                    )
                    assert (
                        len(status["subnets"]) == 3 and status["amis"] and status["securityGroups"]
                    )

                    # 0 -> 50
                    started = time.monotonic()
                    await scale(client, namespace, 50)
                    await eventually_allowed(
                        lambda: running_pods(client, namespace, APP, 50),
                        timeout=600,
                        what="50 inflate pods Running on AWS nodes",
                    )
                    print(f"\n0 -> 50 pods Running in {time.monotonic() - started:.1f}s")
                    claims = [
                        c
                        for c in await client.list(NODE_CLAIM)
                        if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == POOL
                    ]
                    launched = await instances(ec2)
                    fleets = provider.clients.calls["ec2:CreateFleet"]
                    print(
                        f"{len(claims)} nodeclaims, {len(launched)} instances "
                        f"{sorted(Counter(i['InstanceType'] for i in launched).items())}, "
                        f"{fleets} CreateFleet calls; EC2 calls: {dict(provider.clients.calls)}"
                    )
                    # nothing was taken away on the way up: a node that came up before
                    # kube-scheduler bound its pods is not empty, it is expected
                    assert not provider.clients.calls["ec2:TerminateInstances"], (
                        "instances terminated while scaling up"
                    )
                    assert len(launched) == len(claims) >= 1
                    # every instance runs an AMI the EC2NodeClass resolved (ImageId override)
                    assert {i["ImageId"] for i in launched} <= {a["id"] for a in status["amis"]}
                    # every NodeClaim was launched through CreateFleet (identical
                    # concurrent ones merged into one call by the batcher)
                    assert provider.fleets.requests >= len(claims)
                    assert 1 <= fleets <= provider.fleets.requests
                    for record in (
                        "launched nodeclaim",
                        "registered nodeclaim",
                        "initialized nodeclaim",
                    ):
                        assert karpy.messages(record), f"no {record!r} log line"

                    # spot interruption of one instance: drained, replaced, pods Running again
                    victim = launched[0]["InstanceId"]
                    await sqs.send_message(
                        QueueUrl=queue_url,
                        MessageBody=json.dumps(
                            {
                                "version": "0",
                                "id": str(uuid.uuid4()),
                                "detail-type": "EC2 Spot Instance Interruption Warning",
                                "source": "aws.ec2",
                                "time": "2026-11-23T20:00:00Z",
                                "region": REGION,
                                "detail": {"instance-id": victim, "instance-action": "terminate"},
                            }
                        ),
                    )

                    async def victim_gone() -> bool:
                        live = {i["InstanceId"] for i in await instances(ec2)}
                        return victim not in live

                    await eventually_allowed(
                        victim_gone, timeout=300, what="interrupted instance terminated"
                    )
                    await eventually_allowed(
                        lambda: running_pods(client, namespace, APP, 50),
                        timeout=600,
                        what="pods Running again after the interruption",
                    )

                    # a rebalance recommendation (issue 41, item 6: opted in on the
                    # NodePool): the node is replaced before it goes, on another offering
                    current = {i["InstanceId"]: i for i in await instances(ec2)}
                    target = sorted(current)[0]
                    at_risk = (current[target]["InstanceType"],
                               current[target]["Placement"]["AvailabilityZone"])
                    await sqs.send_message(
                        QueueUrl=queue_url,
                        MessageBody=json.dumps({
                            "version": "0", "id": str(uuid.uuid4()),
                            "detail-type": "EC2 Instance Rebalance Recommendation",
                            "source": "aws.ec2", "time": "2026-11-23T20:05:00Z",
                            "region": REGION, "detail": {"instance-id": target},
                        }),
                    )
                    started = time.monotonic()

                    async def target_gone() -> bool:
                        return target not in {i["InstanceId"] for i in await instances(ec2)}

                    await eventually_allowed(
                        target_gone, timeout=300, what="the recommended instance replaced"
                    )
                    await eventually_allowed(
                        lambda: running_pods(client, namespace, APP, 50), timeout=600,
                        what="pods Running again after the rebalance replacement",
                    )
                    drifted = [r for r in karpy.messages("disrupting node(s)")
                               if r.get("reason") == "Drifted"]
                    assert karpy.messages("replacing on rebalance recommendation")
                    assert drifted and drifted[-1]["replacement-node-count"] >= 1, drifted
                    assert provider.unavailable.is_unavailable(
                        OfferingKey(at_risk[0], at_risk[1], "spot"))
                    fresh = [i for i in await instances(ec2) if i["InstanceId"] not in current]
                    assert fresh, "no replacement instance was launched"
                    assert all((i["InstanceType"], i["Placement"]["AvailabilityZone"]) != at_risk
                               for i in fresh), "a replacement went back to the at-risk pool"
                    print(f"rebalance recommendation: {target} ({at_risk[0]} in {at_risk[1]}) "
                          f"replaced by {[i['InstanceType'] for i in fresh]} and gone "
                          f"{time.monotonic() - started:.1f} s after the message")

                    # ICE on the types karpy chose (the cheapest) still gets the pods Running
                    refused = {i["InstanceType"] for i in await instances(ec2)}
                    before = {i["InstanceId"] for i in await instances(ec2)}
                    faults.no_capacity.update((t, "*") for t in refused)
                    await scale(client, namespace, 80)
                    await eventually_allowed(
                        lambda: running_pods(client, namespace, APP, 80),
                        timeout=600,
                        what="80 pods Running with the chosen types out of capacity",
                    )
                    new = [i for i in await instances(ec2) if i["InstanceId"] not in before]
                    assert new, "no new instance for the 10 extra pods"
                    assert not {i["InstanceType"] for i in new} & refused
                    faults.no_capacity.clear()

                    # 80 -> 0: emptiness removes the nodes and termination terminates every
                    # instance, with the NodePool still there
                    await scale(client, namespace, 0)

                    async def all_terminated() -> bool:
                        return not await instances(ec2)

                    await eventually_allowed(all_terminated, timeout=300,
                                     what="every instance terminated by emptiness")
                    forced = await clean_up(client, namespace, APP, [POOL], timeout=300)
                    assert not forced, forced
                    # the EC2NodeClass's finalizer needs karpy running (and an event loop that
                    # is not blocked by a kubectl subprocess)
                    await client.delete(EC2_NODE_CLASS_KIND, POOL)
                    await eventually_allowed(
                        lambda: gone(client, EC2_NODE_CLASS_KIND, POOL), timeout=120,
                        what="EC2NodeClass finalized",
                    )
                    with pytest.raises(Exception, match="NoSuchEntity"):
                        await provider.clients.iam.get_instance_profile(
                            InstanceProfileName=status["instanceProfile"]
                        )
                assert not await instances(
                    ec2, ("pending", "running", "stopping", "stopped", "shutting-down")
                )
                iam.raise_for_denials()
                print(f"calls judged by the IAM policy: {dict(iam.allowed)}")
                for call in (
                    "ec2:CreateLaunchTemplate",
                    "ec2:CreateFleet",
                    "ec2:RunInstances",  # the EC2NodeClass validation's dry run
                    "ec2:TerminateInstances",
                    "ec2:DeleteLaunchTemplate",
                    "iam:CreateInstanceProfile",
                    "iam:DeleteInstanceProfile",
                    "sqs:ReceiveMessage",
                    "sqs:DeleteMessage",
                ):
                    assert iam.allowed[call], f"{call} never reached the IAM check"
