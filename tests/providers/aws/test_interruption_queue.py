"""The interruption controller against moto's SQS (no control plane needed): a message
it cannot read is deleted and counted, never left to come back every visibility timeout."""

from __future__ import annotations

import dataclasses

import boto3
from karpy_aws import AWSCloudProvider
from karpy_aws._interruption import InterruptionController
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from karpy.runtime.testing import FakeClient

DEEP = 100_000


def counter(reader: InMemoryMetricReader, name: str) -> float:
    data = reader.get_metrics_data()
    return sum(
        point.value  # type: ignore[union-attr]
        for rm in (data.resource_metrics if data else ())
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == name
        for point in metric.data.data_points
    )


async def test_a_deeply_nested_body_is_deleted_and_counted(aws_provider: AWSCloudProvider) -> None:
    # The queue and its messages are the test's (and EventBridge's) doing, not karpy's:
    # a client of the test's own, which the IAM check does not judge. The queue is named
    # after the cluster, as Karpenter's policy (and its CloudFormation template) has it.
    settings = aws_provider.settings
    sqs = boto3.client("sqs", region_name=settings.region, endpoint_url=settings.endpoint_url)
    queue = settings.cluster_name
    url = sqs.create_queue(QueueName=queue)["QueueUrl"]
    sqs.purge_queue(QueueUrl=url)
    bodies = ["[" * DEEP + "]" * DEEP, "{not json"]  # the second: an ordinary malformed one
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    reader = InMemoryMetricReader()
    aws_provider.settings = dataclasses.replace(settings, interruption_queue=queue)
    try:
        controller = InterruptionController(
            aws_provider, FakeClient(),
            meter=MeterProvider(metric_readers=[reader]).get_meter("karpenter"),
        )
        handled = 0
        for _ in range(5):  # moto may hand out fewer than asked per receive
            handled += await controller.poll_once(wait_seconds=0)
            if handled == len(bodies):
                break
        assert handled == len(bodies)
    finally:
        aws_provider.settings = settings
    attrs = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )
    assert sum(int(v) for v in attrs["Attributes"].values()) == 0  # none will come back
    assert counter(reader, "karpenter_interruption_deleted_messages_total") == len(bodies)
    sqs.delete_queue(QueueUrl=url)
