"""The EC2NodeClass status controller (``nodeclass``): resolves selectors into
``status`` and the Ready conditions, and owns the ``karpenter.k8s.aws/termination``
finalizer.

Each reconcile resolves subnets, security groups, AMIs and the instance profile
(:func:`karpy_aws._resolve.resolve_status`), checks that its nodes could join (the
AMI family's user data is rendered; the cluster's endpoint, CA and service CIDR are
known, :mod:`karpy_aws._cluster`), validates by dry runs that the controller may launch
with them (:mod:`karpy_aws._validation`, ``ValidationSucceeded``), then writes the status
once, only when it changed, and comes back after a minute (Karpenter's AMI/subnet
refresh interval), so a new AMI release or a retagged subnet shows up without an event.
On deletion it waits until no NodeClaim refers to the class, then deletes the instance
profile it created and this class's launch templates, and releases the finalizer.
"""

from __future__ import annotations

import logging
from typing import Any, Final, Protocol

from karpy.cloudprovider import NODE_CLAIM
from karpy.runtime import Client, EventRecorder, ReportsServerVersion, Request, Result, thaw
from karpy.runtime import errors as kerrors
from karpy_aws._clients import AWSAccess, AWSClients
from karpy_aws._cluster import ClusterDiscovery
from karpy_aws._kinds import EC2_NODE_CLASS
from karpy_aws._launchtemplates import LaunchTemplates
from karpy_aws._refresh import ResolutionCaches
from karpy_aws._reservations import CapacityReservations, next_reservation_change
from karpy_aws._resolve import Validator, delete_instance_profile, resolve_status
from karpy_aws.apis import labels as aws
from karpy_aws.apis.ec2nodeclass import EC2NodeClass

__all__ = [
    "NodeClassParts",
    "NodeClassStatusController",
    "eks_minor_version",
    "kubernetes_minor_version",
]

log = logging.getLogger("karpy.aws.nodeclass")

REFRESH_INTERVAL: Final = 60.0


async def kubernetes_minor_version(client: ReportsServerVersion) -> str:
    """The API server's ``major.minor`` (e.g. ``1.31``), which picks the EKS AMIs."""
    return (await client.server_version()).major_minor


async def eks_minor_version(clients: AWSClients, cluster_name: str) -> str:
    """The cluster's Kubernetes version as EKS DescribeCluster reports it (``1.31``):
    Karpenter AWS's source of the version under ``EKS_CONTROL_PLANE=true``, for control
    planes whose API server reports a version that does not name the EKS AMIs. A failed
    call raises, so the reconcile is retried, as upstream fails its version update."""
    answer = await clients.eks.describe_cluster(name=cluster_name)
    version = str((answer.get("cluster") or {}).get("version") or "")
    if not version:
        raise ValueError(
            f"EKS DescribeCluster of {cluster_name!r} reported no Kubernetes version "
            "(eksControlPlane / EKS_CONTROL_PLANE is true); unset it for a cluster that is "
            "not EKS"
        )
    return version


class NodeClassParts(AWSAccess, Protocol):
    """What the status controller needs of the provider: AWS, the cluster's facts, the
    dry-run validation, the resolution caches, the capacity reservations, and the
    launch templates a deleted class leaves."""

    @property
    def cluster(self) -> ClusterDiscovery:
        """What nodes are told about the cluster."""
        ...

    @property
    def validation(self) -> Validator:
        """The ValidationSucceeded dry runs (:mod:`karpy_aws._validation`)."""
        ...

    @property
    def resolution_caches(self) -> ResolutionCaches:
        """Resolved AMIs and subnets, reused for their refresh intervals."""
        ...

    @property
    def reservations(self) -> CapacityReservations:
        """The capacity reservations and their slots left."""
        ...

    @property
    def launch_templates(self) -> LaunchTemplates:
        """The cluster's launch templates."""
        ...


class NodeClassStatusController:
    """Reconciles one EC2NodeClass (see the module docstring)."""

    name = "nodeclass"

    def __init__(
        self,
        provider: NodeClassParts,
        client: Client,
        recorder: EventRecorder | None = None,
        *,
        k8s_version: str | None = None,
    ) -> None:
        self._provider = provider
        self._client = client
        self._recorder = recorder
        self._k8s_version = k8s_version

    async def _version(self) -> str:
        if self._k8s_version is None:
            if self._provider.settings.eks_control_plane:
                self._k8s_version = await eks_minor_version(
                    self._provider.clients, self._provider.settings.cluster_name
                )
            elif isinstance(self._client, ReportsServerVersion):
                self._k8s_version = await kubernetes_minor_version(self._client)
            else:  # a client that cannot say the server's version (a test double)
                raise TypeError(
                    f"{type(self._client).__name__} cannot read the API server's version "
                    "(it has no server_version()): pass k8s_version="
                )
        return self._k8s_version

    async def reconcile(self, request: Request) -> Result:
        try:
            found = await self._client.get(EC2_NODE_CLASS, request.name)
        except kerrors.NotFound:
            return Result()
        raw: dict[str, Any] = thaw(found)
        node_class = EC2NodeClass.model_validate(raw)
        finalizers = list(raw.get("metadata", {}).get("finalizers") or [])
        if node_class.metadata.deletion_timestamp is not None:
            return await self._finalize(node_class, finalizers)
        if aws.TERMINATION_FINALIZER not in finalizers:
            await self._client.patch(
                EC2_NODE_CLASS,
                request.name,
                {
                    "metadata": {
                        "finalizers": [*finalizers, aws.TERMINATION_FINALIZER],
                        "resourceVersion": raw["metadata"].get("resourceVersion"),
                    }
                },
            )
        settings = self._provider.settings
        resolution = await resolve_status(
            self._provider.clients,
            node_class,
            cluster_name=settings.cluster_name,
            region=settings.region,
            k8s_version=await self._version(),
            cluster=await self._provider.cluster.resolve(),
            validate=self._provider.validation,
            caches=self._provider.resolution_caches,
            reservations=self._provider.reservations,
        )
        before = node_class.status.to_dict()
        conditions = node_class.status_conditions()
        node_class.status.subnets = resolution.status.subnets
        node_class.status.security_groups = resolution.status.security_groups
        node_class.status.capacity_reservations = resolution.status.capacity_reservations
        node_class.status.amis = resolution.status.amis
        node_class.status.instance_profile = resolution.status.instance_profile
        for kind, (ok, reason, message) in resolution.conditions.items():
            if ok:
                conditions.set_true(kind)
            else:
                conditions.set_false(kind, reason, message)
        node_class.status.conditions = list(conditions.list())
        after = node_class.status.to_dict()
        if after != before:
            await self._client.patch_status(EC2_NODE_CLASS, request.name, {"status": after})
            if not resolution.ready and self._recorder is not None:
                failed = [
                    f"{kind}: {message}"
                    for kind, (ok, _, message) in resolution.conditions.items()
                    if not ok
                ]
                self._recorder.warning(raw, "NodeClassNotReady", "; ".join(failed))
        return Result(
            requeue_after=next_reservation_change(
                resolution.status.capacity_reservations,
                self._provider.reservations.wall(),
                REFRESH_INTERVAL,
            )
        )

    async def _finalize(self, node_class: EC2NodeClass, finalizers: list[str]) -> Result:
        if aws.TERMINATION_FINALIZER not in finalizers:
            return Result()
        name = node_class.metadata.name or ""
        claims = await self._client.list(NODE_CLAIM)
        waiting = [
            c["metadata"]["name"]
            for c in claims
            if ((c.get("spec") or {}).get("nodeClassRef") or {}).get("name") == name
            and ((c.get("spec") or {}).get("nodeClassRef") or {}).get("kind") == "EC2NodeClass"
        ]
        if waiting:
            log.info(
                "waiting on nodeclaim termination",
                extra={"nodeclaims": ", ".join(sorted(waiting)[:5])},
            )
            return Result(requeue_after=10.0)
        settings = self._provider.settings
        await delete_instance_profile(
            self._provider.clients,
            node_class,
            cluster_name=settings.cluster_name,
            region=settings.region,
        )
        await self._provider.launch_templates.delete_for_node_class(name)
        await self._client.patch(
            EC2_NODE_CLASS,
            name,
            {"metadata": {"finalizers": [f for f in finalizers if f != aws.TERMINATION_FINALIZER]}},
        )
        return Result()
