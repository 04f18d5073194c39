"""Plays the kubelet of moto's EC2 instances for the AWS end-to-end test.

moto launches no machines, so nothing would ever join the cluster. :class:`MotoKubelet`
does what a booting instance's kubelet does with karpy's user data: for every running
instance tagged for the cluster, it registers a Node named after the instance's private
DNS name, with providerID ``aws:///<zone>/<instance-id>``, the labels and taints the
user data asks for (the NodeClaim's, plus ``karpenter.sh/unregistered:NoExecute``) and
the capacity of its instance type. The Node carries kwok's annotation, so kwok then
plays its kubelet (Ready, pods Running). It never deletes Nodes: karpy's termination
does that, as with real instances.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from karpy.runtime import Client, kinds
from karpy.runtime import errors as api_errors
from karpy.state.kinds import NODE_CLAIM

__all__ = ["MotoKubelet"]

KWOK = "kwok.x-k8s.io/node"


class MotoKubelet:
    """Registers a Node for each running instance of ``cluster`` (see module doc)."""

    def __init__(self, client: Client, ec2: Any, *, cluster: str, period: float = 0.5) -> None:
        self._client = client
        self._ec2 = ec2
        self._cluster = cluster
        self._period = period
        self.registered: dict[str, str] = {}  # instance id -> node name

    async def sync_once(self) -> int:
        """Register what is missing; return how many Nodes were created."""
        pages = self._ec2.get_paginator("describe_instances").paginate(
            Filters=[
                {"Name": "tag:eks:eks-cluster-name", "Values": [self._cluster]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )
        created = 0
        async for page in pages:
            for reservation in page.get("Reservations", []):
                for instance in reservation.get("Instances", []):
                    if instance["InstanceId"] not in self.registered:
                        created += await self._register(instance)
        return created

    async def _register(self, instance: dict[str, Any]) -> int:
        tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
        claim_name = tags.get("karpenter.sh/nodeclaim")
        if not claim_name:
            return 0
        try:
            claim = await self._client.get(NODE_CLAIM, claim_name, live=True)
        except api_errors.NotFound:
            return 0
        status = claim.get("status") or {}
        if not status.get("providerID"):
            return 0  # not launched yet as far as karpy knows; the next round will see it
        zone = instance["Placement"]["AvailabilityZone"]
        name = instance.get("PrivateDnsName") or f"{instance['InstanceId']}.ec2.internal"
        spec = claim.get("spec") or {}
        labels = {
            **(claim["metadata"].get("labels") or {}),
            "kubernetes.io/hostname": name,
            KWOK: "fake",
        }
        taints = [
            *(spec.get("taints") or []),
            *(spec.get("startupTaints") or []),
            {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
        ]
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": {KWOK: "fake"}},
            "spec": {"providerID": f"aws:///{zone}/{instance['InstanceId']}", "taints": taints},
            "status": {
                "capacity": dict(status.get("capacity") or {}),
                "allocatable": dict(status.get("allocatable") or {}),
            },
        }
        with contextlib.suppress(api_errors.AlreadyExists):
            await self._client.create(kinds.NODE, node)
        self.registered[instance["InstanceId"]] = name
        return 1

    async def run(self) -> None:
        """Sync every ``period`` seconds until cancelled."""
        while True:
            await self.sync_once()
            await asyncio.sleep(self._period)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[MotoKubelet]:
        """Run in the background for the block."""
        task = asyncio.create_task(self.run(), name="e2e:moto-kubelet")
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
