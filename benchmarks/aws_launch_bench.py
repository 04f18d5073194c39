"""Benchmark of the AWS provider's launch path against moto in server mode (not a test).

Run:  .venv/bin/python benchmarks/aws_launch_bench.py [--nodes 100] [--concurrency 100]

Starts moto's server on 127.0.0.1, seeds it like an EKS account (tests/providers/aws/
moto_harness.py), builds the AWSCloudProvider with a resolved EC2NodeClass and wraps it
as the operator does (``InstrumentedCloudProvider`` with Karpenter's metrics on), warms
the instance-type catalogue once (reported separately: moto's DescribeInstanceTypes is
slow), then launches a burst of ``--nodes`` NodeClaims through ``create``, at most
``--concurrency`` at a time (default: the lifecycle controller's 100 workers), and
prints:

* NodeClaim -> CreateFleet answered: from calling ``create`` to the answer of the
  (batched) CreateFleet that launched its instance;
* NodeClaim -> Launched: until ``create`` returns the launched NodeClaim (what the
  lifecycle controller then writes as ``Launched=True``), p50/p95, and the burst's total;
* EC2 API calls per launched node, by operation, and CreateFleet calls per node (the
  batcher merges identical concurrent requests: 35 ms idle, 1 s max, as Karpenter).

Times include moto's own request handling on this machine; they bound karpy's overhead
from above and say nothing about EC2's latency.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "providers" / "aws"))

from iam_check import IAMCheck
from karpy_aws import AWSCloudProvider, AWSSettings
from karpy_aws._clients import AWSClients
from karpy_aws._resolve import resolve_status
from karpy_aws.apis import EC2NodeClass
from moto_harness import (
    FleetFaults,
    moto_server,
    seed_account,
    use_test_credentials,
)

from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.controllers.instrumented_provider import InstrumentedCloudProvider
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodeclaim.lifecycle.controller import WORKERS
from karpy.runtime.telemetry import Metrics

CLUSTER = "karpy-bench"
REGION = "us-east-1"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def bench(url: str, nodes: int, concurrency: int) -> None:
    settings = AWSSettings(
        cluster_name=CLUSTER,
        region=REGION,
        endpoint_url=url,
        isolated_vpc=True,
        cluster_endpoint="https://127.0.0.1:6443",
    )
    clients = await AWSClients.open(settings)
    discovery = {"karpenter.sh/discovery": CLUSTER}
    node_class = EC2NodeClass.model_validate(
        {
            "metadata": {"name": "bench"},
            "spec": {
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": discovery}],
                "securityGroupSelectorTerms": [{"tags": discovery}],
                "role": f"KarpenterNodeRole-{CLUSTER}",
            },
        }
    )
    resolution = await resolve_status(
        clients, node_class, cluster_name=CLUSTER, region=REGION, k8s_version="1.31"
    )
    node_class.status = resolution.status
    conditions = node_class.status_conditions()
    for kind in resolution.conditions:
        conditions.set_true(kind)
    node_class.status.conditions = list(conditions.list())

    async def get(name: str) -> EC2NodeClass | None:
        return node_class

    provider = AWSCloudProvider(settings=settings, clients=clients, node_classes=get)
    metrics = Metrics()
    instrumented = InstrumentedCloudProvider(provider, KarpenterMetrics(metrics.meter("karpenter")))
    fleet_answered: dict[str, float] = {}
    original = provider.fleets.create_fleet

    async def timed_create_fleet(request: Any, *, nodeclaim: str) -> Any:
        answer = await original(request, nodeclaim=nodeclaim)
        fleet_answered[nodeclaim] = time.perf_counter()
        return answer

    provider.fleets.create_fleet = timed_create_fleet  # type: ignore[method-assign]
    start = time.perf_counter()
    await provider.catalog.refresh(force=True)
    pool = make_nodepool(
        NodeClassReference(group="karpenter.k8s.aws", kind="EC2NodeClass", name="bench")
    )
    await provider.get_instance_types(pool)
    warm = time.perf_counter() - start
    print(f"catalogue warm-up (DescribeInstanceTypes etc. + build): {warm:.1f}s")
    warm_calls = dict(clients.calls)
    to_fleet: list[float] = []
    to_launched: list[float] = []
    semaphore = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        claim = make_nodeclaim(
            pool,
            requests={"cpu": "1", "memory": "1Gi"},
            requirements=[
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
            ],
            name=f"bench-{i}",
        )
        async with semaphore:
            t0 = time.perf_counter()
            await instrumented.create(claim)
            t1 = time.perf_counter()
        to_fleet.append(fleet_answered[claim.metadata.name or ""] - t0)
        to_launched.append(t1 - t0)

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(nodes)))
    wall = time.perf_counter() - started
    calls = {
        k: v - warm_calls.get(k, 0) for k, v in clients.calls.items() if v - warm_calls.get(k, 0)
    }
    ec2_calls = sum(v for k, v in calls.items() if k.startswith("ec2:"))
    ms = 1000.0
    print(f"nodes launched: {nodes} (concurrency {concurrency}) in {wall:.2f}s (burst total)")
    for label, values in (
        ("NodeClaim -> CreateFleet answered", to_fleet),
        ("NodeClaim -> Launched            ", to_launched),
    ):
        print(
            f"{label}: p50 {statistics.median(values) * ms:.0f} ms, "
            f"p95 {percentile(values, 95) * ms:.0f} ms, max {max(values) * ms:.0f} ms"
        )
    fleets = calls.get("ec2:CreateFleet", 0)
    print(f"EC2 calls per launched node: {ec2_calls / nodes:.2f}  ({calls})")
    print(
        f"CreateFleet per node: {fleets / nodes:.3f} ({fleets} calls for {nodes} NodeClaims; "
        f"batcher: {provider.fleets.calls} merged calls carrying {provider.fleets.requests})"
    )
    await provider.aclose()
    await clients.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=WORKERS)
    args = parser.parse_args()
    use_test_credentials()
    import logging

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    # under Karpenter's controller IAM policy, as the tests run (tests/providers/aws/iam_check.py)
    iam = IAMCheck.karpenter(cluster=CLUSTER, region=REGION)
    with moto_server(iam=iam) as url, FleetFaults().installed() as faults:
        seed_account(url, faults, cluster=CLUSTER, region=REGION)
        asyncio.run(bench(url, args.nodes, args.concurrency))


if __name__ == "__main__":
    main()
