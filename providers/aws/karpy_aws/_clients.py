"""The AWS service clients the provider uses, opened once and closed with it.

Every client retries in botocore's *adaptive* mode (client-side rate limiting on top of
exponential backoff), so throttling (RequestLimitExceeded, 5xx) slows karpy down rather
than failing a launch. Every API call is counted per ``service:Operation`` in
:attr:`AWSClients.calls`, which is how the benchmarks report EC2 calls per node.
"""

from __future__ import annotations

from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol

import aioboto3
from botocore.config import Config

from karpy_aws._settings import AWSSettings

__all__ = ["RETRY_CONFIG", "AWSAccess", "AWSClients"]

RETRY_CONFIG = Config(
    retries={"mode": "adaptive", "max_attempts": 10},
    connect_timeout=10,
    read_timeout=30,
    user_agent_extra="karpy",
)
"""botocore client configuration: adaptive retries, bounded timeouts."""


@dataclass
class AWSClients:
    """EC2, SSM, IAM, SQS, Pricing and EKS clients (``Any``: aiobotocore ships no
    types). ``eks`` (DescribeCluster, for cluster discovery) may be None in tests that
    build clients by hand."""

    ec2: Any
    ssm: Any
    iam: Any
    sqs: Any
    pricing: Any
    eks: Any = None
    calls: Counter[str] = field(default_factory=Counter)
    _stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    @classmethod
    async def open(
        cls, settings: AWSSettings, *, session: aioboto3.Session | None = None
    ) -> AWSClients:
        """Open every client for ``settings`` (region, endpoints)."""
        session = session or aioboto3.Session()
        stack = AsyncExitStack()
        calls: Counter[str] = Counter()

        async def client(service: str, region: str, endpoint: str | None) -> Any:
            made = await stack.enter_async_context(
                session.client(
                    service, region_name=region, endpoint_url=endpoint, config=RETRY_CONFIG
                )
            )

            def count(model: Any, **_: Any) -> None:
                calls[f"{service}:{model.name}"] += 1

            made.meta.events.register(
                f"before-call.{made.meta.service_model.endpoint_prefix}.*", count
            )
            return made

        try:
            ec2 = await client("ec2", settings.region, settings.endpoint_url)
            ssm = await client("ssm", settings.region, settings.endpoint_url)
            iam = await client("iam", settings.region, settings.endpoint_url)
            sqs = await client("sqs", settings.region, settings.endpoint_url)
            eks = await client("eks", settings.region, settings.endpoint_url)
            # the Pricing API lives in a few regions only; us-east-1 serves every region's prices
            pricing = await client(
                "pricing", "us-east-1", settings.pricing_endpoint_url or settings.endpoint_url
            )
        except BaseException:
            await stack.aclose()
            raise
        return cls(
            ec2=ec2,
            ssm=ssm,
            iam=iam,
            sqs=sqs,
            pricing=pricing,
            eks=eks,
            calls=calls,
            _stack=stack,
        )

    def services(self) -> list[Any]:
        """Every client opened (``eks`` when present)."""
        return [c for c in (self.ec2, self.ssm, self.iam, self.sqs, self.pricing, self.eks)
                if c is not None]

    async def aclose(self) -> None:
        """Close every client."""
        await self._stack.aclose()


class AWSAccess(Protocol):
    """What the provider's controllers need of it to call AWS: its settings and clients
    (the provider is one; they take this, not the provider class, so no controller
    module imports the provider's)."""

    @property
    def settings(self) -> AWSSettings:
        """The provider's settings (cluster name, region, interruption queue ...)."""
        ...

    @property
    def clients(self) -> AWSClients:
        """The AWS service clients."""
        ...
