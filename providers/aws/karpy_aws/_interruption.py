"""The ``interruption`` controller: long-polls the SQS interruption queue and acts on
EC2's warnings before the instance goes away (Karpenter AWS's
pkg/controllers/interruption).

A spot interruption warning, a scheduled change, or an instance stopping or
terminating deletes the instance's NodeClaim, which makes karpy's termination cordon
and drain the node and launch a replacement; a spot interruption also marks that spot
offering unavailable in the provider's cache so the replacement goes elsewhere. A
rebalance recommendation is an event only. Every message is deleted once handled;
one that cannot be parsed is logged and deleted, never retried forever, and no error
stops the loop (it backs off and polls again).

Events (reasons as Karpenter's): SpotInterrupted, SpotRebalanceRecommendation,
InstanceStopping, InstanceTerminating, InstanceUnhealthy, TerminatingOnInterruption.
Metrics: ``karpenter_interruption_received_messages_total{message_type}``,
``karpenter_interruption_deleted_messages_total``,
``karpenter_interruption_message_queue_duration_seconds``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from opentelemetry.metrics import Meter

from karpy.runtime import Client, EventRecorder
from karpy.runtime.ratelimit import Backoff
from karpy_aws._interruption_handler import InterruptionHandler, InterruptionParts
from karpy_aws._interruption_messages import (
    NO_OP,
    InterruptionMessage,
    MalformedMessageError,
    parse_message,
)

__all__ = ["InterruptionController"]

log = logging.getLogger("karpy.aws.interruption")

class InterruptionController:
    """Polls the queue named by the ``interruptionQueue`` setting (see module doc)."""

    needs_leader_election = True

    def __init__(
        self,
        provider: InterruptionParts,
        client: Client,
        recorder: EventRecorder | None = None,
        *,
        meter: Meter | None = None,
        wait_seconds: int = 20,
        max_messages: int = 10,
    ) -> None:
        self._provider = provider
        self._handler = InterruptionHandler(provider, client, recorder)
        self._wait = wait_seconds
        self._max = max_messages
        self._queue_url: str | None = None
        self._received = self._deleted = self._latency = None
        if meter is not None:
            self._received = meter.create_counter(
                "karpenter_interruption_received_messages_total",
                description="Count of messages received from the SQS queue. Broken down by "
                "message type and whether the message was actionable.",
            )
            self._deleted = meter.create_counter(
                "karpenter_interruption_deleted_messages_total",
                description="Count of messages deleted from the SQS queue.",
            )
            self._latency = meter.create_histogram(
                "karpenter_interruption_message_queue_duration_seconds",
                unit="s",
                description="Amount of time an interruption message is on the queue before "
                "it is processed by karpenter.",
            )

    async def run(self) -> None:
        """Poll until cancelled; errors back off (1 s to 1 min) and never end the loop."""
        backoff = Backoff(initial=1.0, maximum=60.0)
        while True:
            try:
                await self.poll_once()
                backoff.reset()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = backoff.next()
                log.error(
                    "failed polling the interruption queue",
                    extra={"queue": self._provider.settings.interruption_queue, "error": str(exc)},
                )
                await asyncio.sleep(delay)

    async def _url(self) -> str:
        if self._queue_url is None:
            sqs = self._provider.clients.sqs
            answer = await sqs.get_queue_url(QueueName=self._provider.settings.interruption_queue)
            self._queue_url = str(answer["QueueUrl"])
            log.info("watching interruption queue", extra={"queue": self._queue_url})
        return self._queue_url

    async def poll_once(self, *, wait_seconds: int | None = None) -> int:
        """Receive one batch and handle every message in it; return how many came."""
        url = await self._url()
        answer = await self._provider.clients.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=self._max,
            WaitTimeSeconds=self._wait if wait_seconds is None else wait_seconds,
            VisibilityTimeout=20,
            AttributeNames=["SentTimestamp"],
        )
        messages = answer.get("Messages", [])
        await asyncio.gather(*(self._handle(url, m) for m in messages))
        return len(messages)

    async def _handle(self, url: str, raw: Mapping[str, Any]) -> None:
        try:
            message = parse_message(str(raw.get("Body", "")))
        except MalformedMessageError as exc:
            log.error(
                "failed parsing interruption message",
                extra={"error": str(exc), "message-id": raw.get("MessageId", "")},
            )
            await self._delete(url, raw)
            return
        if self._received is not None:
            self._received.add(1, {"message_type": message.kind})
        if message.kind != NO_OP:
            await self._act(message)
        if self._latency is not None and message.time is not None:
            self._latency.record(max((datetime.now(UTC) - message.time).total_seconds(), 0.0))
        await self._delete(url, raw)

    async def _delete(self, url: str, raw: Mapping[str, Any]) -> None:
        await self._provider.clients.sqs.delete_message(
            QueueUrl=url, ReceiptHandle=raw["ReceiptHandle"]
        )
        if self._deleted is not None:
            self._deleted.add(1)

    async def _act(self, message: InterruptionMessage) -> None:
        await self._handler.act(message.kind, message.instance_ids)

