"""EC2 instances as NodeClaims: provider IDs, the tags karpy writes, and the NodeClaim
that ``get``/``list`` return for an instance.

Provider IDs are ``aws:///<zone>/<instance-id>`` as the AWS cloud-controller writes
them. Instances are found by tag (Karpenter AWS's): ``karpenter.sh/nodepool``,
``karpenter.k8s.aws/ec2nodeclass`` and ``eks:eks-cluster-name=<cluster>``; an instance
in state ``terminated`` counts as gone, one ``shutting-down`` still exists.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from karpy.apis import NodeClaim
from karpy.apis import labels as wk
from karpy.cloudprovider import InstanceType, NodeClaimNotFoundError
from karpy.scheduling import resources as res
from karpy_aws.apis import labels as aws

__all__ = [
    "LIVE_STATES",
    "cluster_tags",
    "instance_id",
    "launch_tags",
    "nodeclaim_from_instance",
    "nodeclaim_tags",
    "nodepool_tags",
    "provider_id",
]

#: instance states that count as "exists" (Karpenter's instanceStateFilter)
LIVE_STATES: Final = ("pending", "running", "stopping", "stopped", "shutting-down")
_PROVIDER_ID = re.compile(r"^aws:///(?P<zone>[^/]*)/(?P<id>i-[0-9a-z]+)$")


def provider_id(zone: str, instance: str) -> str:
    """``aws:///<zone>/<instance-id>``."""
    return f"aws:///{zone}/{instance}"


def instance_id(provider: str) -> str:
    """The instance ID of an AWS provider ID; NodeClaimNotFoundError if it is not one."""
    match = _PROVIDER_ID.match(provider or "")
    if match is None:
        raise NodeClaimNotFoundError(
            f"{provider!r} is not an AWS provider ID (aws:///<zone>/<instance-id>)",
            provider_id=provider,
        )
    return match.group("id")


def cluster_tags(cluster_name: str) -> dict[str, str]:
    """The tags that mark a resource as this cluster's."""
    return {
        f"kubernetes.io/cluster/{cluster_name}": "owned",
        aws.TAG_EKS_CLUSTER_NAME: cluster_name,
    }


def nodepool_tags(
    cluster_name: str, nodepool: str, node_class_name: str, user_tags: Mapping[str, str]
) -> dict[str, str]:
    """The tags of everything launched for a NodePool (launch templates, and the fleet's
    instances, volumes, network interfaces and spot requests): the user's ``spec.tags``,
    then Karpenter's (which win; Karpenter AWS's ``utils.GetTags``). The same for every
    NodeClaim of a NodePool, so identical launches can be batched.

    Karpenter's controller policy allows CreateLaunchTemplate, CreateFleet/RunInstances
    and their tagging only with ``kubernetes.io/cluster/<cluster>=owned``,
    ``eks:eks-cluster-name=<cluster>`` and a ``karpenter.sh/nodepool`` tag in the request,
    and launching from, or deleting, a template only when the template carries the first
    and the last."""
    return {
        **user_tags,
        **cluster_tags(cluster_name),
        aws.TAG_NODEPOOL: nodepool,
        aws.TAG_NODECLASS: node_class_name,
    }


def nodeclaim_tags(nodeclaim: NodeClaim, user_tags: Mapping[str, str]) -> dict[str, str]:
    """The tags written on the instance once it exists (Karpenter's tagging controller
    writes the same keys): ``karpenter.sh/nodeclaim`` and, unless the user set one,
    ``Name``."""
    tags = {aws.TAG_NODECLAIM: nodeclaim.metadata.name or ""}
    if aws.TAG_NAME not in user_tags:
        tags[aws.TAG_NAME] = (
            f"{nodeclaim.metadata.labels.get(wk.LABEL_NODEPOOL, '')}/{nodeclaim.metadata.name}"
        )
    return tags


def launch_tags(
    cluster_name: str, nodeclaim: NodeClaim, node_class_name: str, user_tags: Mapping[str, str]
) -> dict[str, str]:
    """Every tag of a launched instance: :func:`nodepool_tags` and :func:`nodeclaim_tags`."""
    nodepool = nodeclaim.metadata.labels.get(wk.LABEL_NODEPOOL, "")
    return {
        **nodepool_tags(cluster_name, nodepool, node_class_name, user_tags),
        **nodeclaim_tags(nodeclaim, user_tags),
    }


def nodeclaim_from_instance(
    instance: Mapping[str, Any],
    instance_type: InstanceType | None,
    *,
    region: str,
    reserved_capacity: bool = True,
) -> NodeClaim:
    """The NodeClaim ``get``/``list`` return for a described instance. With the
    ReservedCapacity gate off, an instance EC2 placed in an open ODCR is on-demand, as
    Karpenter AWS reads it then (no reservation labels, so nothing drifts)."""
    tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
    zone = instance.get("Placement", {}).get("AvailabilityZone", "")
    lifecycle = instance.get("InstanceLifecycle")
    reservation = (
        "" if lifecycle == "spot" or not reserved_capacity
        else str(instance.get("CapacityReservationId") or "")
    )
    capacity_type = (
        wk.CAPACITY_TYPE_SPOT
        if lifecycle == "spot"
        else wk.CAPACITY_TYPE_RESERVED
        if reservation
        else wk.CAPACITY_TYPE_ON_DEMAND
    )
    labels: dict[str, str] = {}
    if instance_type is not None:
        labels.update(instance_type.requirements.labels())
    if reservation:
        # an instance in a reservation, as Karpenter AWS reads it (its instance lifecycle
        # says whether the reservation is a capacity block, or interruptible)
        labels[aws.LABEL_CAPACITY_RESERVATION_ID] = reservation
        labels[aws.LABEL_CAPACITY_RESERVATION_TYPE] = (
            "capacity-block" if lifecycle == "capacity-block" else "default"
        )
        labels[aws.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE] = str(
            lifecycle == "interruptible-capacity-reservation"
        ).lower()
    labels.update(
        {
            wk.LABEL_INSTANCE_TYPE: str(instance.get("InstanceType", "")),
            wk.LABEL_ZONE: zone,
            wk.LABEL_REGION: region,
            wk.LABEL_CAPACITY_TYPE: capacity_type,
        }
    )
    if instance.get("Architecture") in ("x86_64", "arm64"):
        labels[wk.LABEL_ARCH] = "amd64" if instance["Architecture"] == "x86_64" else "arm64"
    labels.setdefault(wk.LABEL_OS, "windows" if instance.get("Platform") == "windows" else "linux")
    if tags.get(aws.TAG_NODEPOOL):
        labels[wk.LABEL_NODEPOOL] = tags[aws.TAG_NODEPOOL]
    if tags.get(aws.TAG_NODECLASS):
        labels[aws.LABEL_NODECLASS] = tags[aws.TAG_NODECLASS]
    launched = instance.get("LaunchTime")
    metadata: dict[str, Any] = {
        "name": tags.get(aws.TAG_NODECLAIM, ""),
        "labels": labels,
    }
    if isinstance(launched, datetime):
        metadata["creationTimestamp"] = launched.isoformat()
    status: dict[str, Any] = {
        "providerID": provider_id(zone, str(instance["InstanceId"])),
        "imageID": instance.get("ImageId"),
    }
    if instance_type is not None:
        status["capacity"] = res.format_resource_list(instance_type.capacity)
        status["allocatable"] = res.format_resource_list(instance_type.allocatable)
    return NodeClaim.model_validate(
        {
            "metadata": metadata,
            "spec": {
                "nodeClassRef": {
                    "group": aws.GROUP,
                    "kind": "EC2NodeClass",
                    "name": tags.get(aws.TAG_NODECLASS, ""),
                },
                "requirements": [],
            },
            "status": status,
        }
    )
