"""The ``nodeclaim.tagging`` controller: the instance's ``Name``, ``karpenter.sh/nodeclaim``
and ``eks:eks-cluster-name`` tags, written until they are (Karpenter AWS's
pkg/controllers/nodeclaim/tagging, checked against v1.14.1).

Launch writes the NodeClaim's tags once, right after CreateFleet; if that CreateTags
fails the instance would stay without them (and Karpenter's ``Name`` is the Node's
name, not known at launch). This controller makes it hold: for each NodeClaim of an
EC2NodeClass that has a ``status.nodeName``, is not being deleted and does not carry
both ``karpenter.k8s.aws/tagged: "true"`` and
``compatibility.karpenter.k8s.aws/cluster-name-tagged: "true"``, it reads the instance
(DescribeInstances, uncached), writes the tags it lacks (``Name`` = the Node's name; a
tag already present, the user's own ``Name`` among them, is left as it is), then sets
both annotations so the NodeClaim is not looked at again. A failure is raised, so the
manager retries it with backoff until it succeeds; an instance that no longer exists
ends the work quietly (its NodeClaim is going away). One worker, and a pause of
``pace`` seconds after each CreateTags (1 s, as Karpenter: CreateTags shares EC2's
mutating-call budget with CreateFleet).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Final

from botocore.exceptions import ClientError

from karpy.cloudprovider import NODE_CLAIM
from karpy.runtime import Client, Request, Result
from karpy.runtime import errors as kerrors
from karpy_aws._clients import AWSAccess
from karpy_aws._instances import instance_id
from karpy_aws.apis import labels as aws

__all__ = ["TAGGING_PACE", "TaggingController", "is_taggable"]

log = logging.getLogger("karpy.aws.tagging")

TAGGING_PACE: Final = 1.0
"""Seconds to wait after each CreateTags (Karpenter AWS's one call per second)."""

_GONE_CODES: Final = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})


def is_taggable(nodeclaim: Mapping[str, Any]) -> bool:
    """Whether this NodeClaim's instance may still lack its tags (Karpenter's isTaggable):
    not both annotations set, a Node name known, not being deleted."""
    meta = nodeclaim.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if (annotations.get(aws.ANNOTATION_INSTANCE_TAGGED) == "true"
            and annotations.get(aws.ANNOTATION_CLUSTER_NAME_TAGGED) == "true"):
        return False
    if not (nodeclaim.get("status") or {}).get("nodeName"):
        return False
    return not meta.get("deletionTimestamp")


def _is_ours(nodeclaim: Mapping[str, Any]) -> bool:
    ref = (nodeclaim.get("spec") or {}).get("nodeClassRef") or {}
    return ref.get("group") == aws.GROUP and ref.get("kind") == "EC2NodeClass"


def wanted(nodeclaim: Mapping[str, Any]) -> bool:
    """The controller's event filter: a NodeClaim of an EC2NodeClass that is taggable."""
    return _is_ours(nodeclaim) and is_taggable(nodeclaim)


class TaggingController:
    """Writes a launched instance's NodeClaim tags until they are (see the module doc)."""

    name = "nodeclaim.tagging"

    def __init__(self, provider: AWSAccess, client: Client, *, pace: float = TAGGING_PACE) -> None:
        self._provider = provider
        self._client = client
        self._pace = pace

    async def reconcile(self, request: Request) -> Result:
        try:
            nodeclaim = await self._client.get(NODE_CLAIM, request.name)
        except kerrors.NotFound:
            return Result()
        if not wanted(nodeclaim):
            return Result()
        status = nodeclaim.get("status") or {}
        try:
            iid = instance_id(str(status.get("providerID") or ""))
        except Exception as exc:
            # not retried: the provider ID will change first (Karpenter does the same)
            log.error("failed parsing instance id", extra={"error": str(exc)})
            return Result()
        if not await self._tag(iid, request.name, str(status["nodeName"])):
            return Result()  # the instance is gone: nothing to tag, the NodeClaim follows
        with contextlib.suppress(kerrors.NotFound):  # deleted meanwhile: nothing to mark
            await self._client.patch(NODE_CLAIM, request.name, {"metadata": {"annotations": {
                aws.ANNOTATION_INSTANCE_TAGGED: "true",
                aws.ANNOTATION_CLUSTER_NAME_TAGGED: "true",
            }}})  # fmt: skip
        return Result()

    async def _tag(self, iid: str, nodeclaim: str, node_name: str) -> bool:
        """Write the tags the instance lacks; False if the instance does not exist."""
        tags = {
            aws.TAG_NAME: node_name,
            aws.TAG_NODECLAIM: nodeclaim,
            aws.TAG_EKS_CLUSTER_NAME: self._provider.settings.cluster_name,
        }
        ec2 = self._provider.clients.ec2
        try:
            answer = await ec2.describe_instances(InstanceIds=[iid])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _GONE_CODES:
                return False
            raise
        instances = [i for r in answer.get("Reservations") or () for i in r.get("Instances") or ()]
        if not instances or (instances[0].get("State") or {}).get("Name") == "terminated":
            return False
        present = {str(t.get("Key")) for t in instances[0].get("Tags") or ()}
        missing = {k: v for k, v in tags.items() if k not in present}
        if not missing:
            return True
        try:
            await ec2.create_tags(
                Resources=[iid], Tags=[{"Key": k, "Value": v} for k, v in missing.items()]
            )
        finally:
            if self._pace > 0:
                await asyncio.sleep(self._pace)
        log.debug("tagged instance", extra={"id": iid, "tags": sorted(missing)})
        return True
