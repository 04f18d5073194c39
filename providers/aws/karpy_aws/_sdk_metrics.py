"""The AWS SDK request metrics Karpenter AWS exports, measured on botocore's events.

Karpenter AWS wraps its SDK config with jonathan-innis/aws-sdk-go-prometheus (v0.1.1),
which publishes, per API call, labelled ``service`` (the SDK's service ID: ``EC2``,
``SSM``, ``IAM``, ``SQS``, ``Pricing``, ``EKS``), ``action`` (the operation:
``CreateFleet``) and ``code`` (the HTTP status, ``-1`` when no answer came):

- ``aws_sdk_go_request_total`` and ``aws_sdk_go_request_duration_seconds``: one per call,
  its code the last attempt's, its time from the call to its final answer, retries in;
- ``aws_sdk_go_request_retry_count``: a histogram of the retries each call made
  (buckets 0..10);
- ``aws_sdk_go_request_attempt_total`` (one per HTTP attempt, labelled with that
  attempt's code) and ``aws_sdk_go_request_attempt_duration_seconds`` (each attempt's
  time, labelled — as that library does — with the *call's* final code).

karpy-aws calls AWS through aiobotocore, whose clients emit the same moments as events:
``before-call`` (a call starts), ``request-created`` (an attempt starts; botocore makes
a new request per retry), ``response-received`` (an attempt ended, with its status or
its exception), ``after-call`` / ``after-call-error`` (the call ended). The call's state
rides in the request context botocore hands to each of them.
"""

from __future__ import annotations

import time
from typing import Any, Final

from opentelemetry.metrics import Meter

__all__ = ["SdkMetrics"]

#: ``prometheus.ExponentialBuckets(0.01, 1.5, 20)``
LATENCY_BUCKETS: Final = tuple(0.01 * 1.5**i for i in range(20))
RETRY_BUCKETS: Final = tuple(float(i) for i in range(11))
_KEY: Final = "karpy.sdk_metrics"
NO_ANSWER: Final = -1


class SdkMetrics:
    """The five instruments, and the botocore event handlers that record into them."""

    def __init__(self, meter: Meter) -> None:
        self._requests = meter.create_counter(
            "aws_sdk_go_request_total", description="The total number of AWS SDK Go requests"
        )
        self._attempts = meter.create_counter(
            "aws_sdk_go_request_attempt_total",
            description="The total number of AWS SDK Go request attempts",
        )
        self._latency = meter.create_histogram(
            "aws_sdk_go_request_duration_seconds", unit="s",
            description="Latency of AWS SDK Go requests",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self._attempt_latency = meter.create_histogram(
            "aws_sdk_go_request_attempt_duration_seconds", unit="s",
            description="Latency of AWS SDK Go request attempts",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self._retries = meter.create_histogram(
            "aws_sdk_go_request_retry_count",
            description="The total number of AWS SDK Go retry attempts per request",
            explicit_bucket_boundaries_advisory=RETRY_BUCKETS,
        )

    def attach(self, client: Any) -> None:
        """Record the calls of one aiobotocore ``client`` (instead of whatever SdkMetrics
        was attached to it before)."""
        events = client.meta.events
        hyphenized = client.meta.service_model.service_id.hyphenize()
        for event, handler in (
            ("before-call", self._call_started),
            ("request-created", self._attempt_started),
            ("response-received", self._attempt_ended),
            ("after-call", self._call_answered),
            ("after-call-error", self._call_failed),
        ):
            name, unique = f"{event}.{hyphenized}", f"{_KEY}.{event}"
            events.unregister(name, unique_id=unique)
            events.register(name, handler, unique_id=unique)

    # -- botocore event handlers (keyword arguments as botocore passes them) -----------

    def _call_started(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        context[_KEY] = {
            "service": str(model.service_model.service_id),
            "action": model.name,
            "start": time.perf_counter(),
            "attempt_start": None,
            "attempts": [],  # (code, seconds) per attempt
        }

    def _attempt_started(self, request: Any, **_: Any) -> None:
        state = (getattr(request, "context", None) or {}).get(_KEY)
        if state is not None:
            state["attempt_start"] = time.perf_counter()

    def _attempt_ended(
        self, context: dict[str, Any], response_dict: dict[str, Any] | None, **_: Any
    ) -> None:
        state = context.get(_KEY)
        if state is None or state["attempt_start"] is None:
            return
        code = int(response_dict["status_code"]) if response_dict else NO_ANSWER
        state["attempts"].append((code, time.perf_counter() - state["attempt_start"]))
        state["attempt_start"] = None

    def _call_answered(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        self._call_ended(context, int(http_response.status_code))

    def _call_failed(self, context: dict[str, Any], **_: Any) -> None:
        state = context.get(_KEY)
        attempts = state["attempts"] if state is not None else []
        self._call_ended(context, attempts[-1][0] if attempts else NO_ANSWER)

    def _call_ended(self, context: dict[str, Any], code: int) -> None:
        state = context.pop(_KEY, None)
        if state is None:
            return
        labels = {"service": state["service"], "action": state["action"], "code": str(code)}
        self._requests.add(1, labels)
        self._latency.record(time.perf_counter() - state["start"], labels)
        attempts: list[tuple[int, float]] = state["attempts"]
        self._retries.record(max(0, len(attempts) - 1), labels)
        for attempt_code, seconds in attempts:
            self._attempts.add(1, {**labels, "code": str(attempt_code)})
            self._attempt_latency.record(seconds, labels)
