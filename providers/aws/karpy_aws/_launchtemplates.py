"""Launch templates: one per distinct launch configuration (AMI, NodeClass, kubelet,
labels and taints), named ``karpenter.k8s.aws/<hash of its data>`` as Karpenter AWS
names them, created on first use and garbage-collected once unused.

Naming by content makes creation idempotent: two replicas, or a retry after a crash,
compute the same name and find the template already there
(``InvalidLaunchTemplateName.AlreadyExistsException`` counts as success). Every template
carries the tags Karpenter's controller policy requires of the templates it may launch
from and delete (``kubernetes.io/cluster/<cluster>=owned``, ``eks:eks-cluster-name``,
``karpenter.sh/nodepool``, ``karpenter.k8s.aws/ec2nodeclass``; the caller passes them),
and ``karpenter.k8s.aws/cluster: <cluster>`` so GC only ever touches karpy's templates of
this cluster.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from karpy_aws._clients import AWSClients
from karpy_aws._errors import error_code, is_already_exists, is_not_found
from karpy_aws.apis import labels as aws

__all__ = ["LT_CLUSTER_TAG", "LT_NAME_PREFIX", "LaunchTemplates", "launch_template_name"]

log = logging.getLogger("karpy.aws.launchtemplate")

LT_NAME_PREFIX: Final = "karpenter.k8s.aws/"
LT_CLUSTER_TAG: Final = "karpenter.k8s.aws/cluster"


def launch_template_name(data: Mapping[str, Any]) -> str:
    """The name of the template holding ``data`` (a stable hash of it)."""
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    return f"{LT_NAME_PREFIX}{int(digest[:16], 16)}"


class LaunchTemplates:
    """Ensures templates exist (cached by name) and deletes the unused ones."""

    def __init__(
        self,
        clients: AWSClients,
        *,
        cluster_name: str,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clients = clients
        self._cluster = cluster_name
        self._known: set[str] = set()
        self._creating: dict[str, asyncio.Lock] = {}
        self._now = monotonic
        self._started = monotonic()
        #: template name -> when a launch last used it (monotonic seconds)
        self.last_used: dict[str, float] = {}

    async def ensure(self, data: Mapping[str, Any], *, tags: Mapping[str, str]) -> str:
        """The name of a template with ``data`` tagged ``tags``, creating it if needed
        (the tags count in the name: they decide what the IAM policy lets it launch)."""
        name = launch_template_name({"data": data, "tags": tags})
        self.last_used[name] = self._now()
        if name in self._known:
            return name
        # concurrent launches of one configuration create the template once
        lock = self._creating.setdefault(name, asyncio.Lock())
        async with lock:
            if name not in self._known:
                await self._create(name, data, tags)
        self._creating.pop(name, None)
        return name

    async def _create(self, name: str, data: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        all_tags = [
            {"Key": k, "Value": v} for k, v in {**tags, LT_CLUSTER_TAG: self._cluster}.items()
        ]
        try:
            await self._clients.ec2.create_launch_template(
                LaunchTemplateName=name,
                LaunchTemplateData=dict(data),
                TagSpecifications=[{"ResourceType": "launch-template", "Tags": all_tags}],
            )
            log.info("created launch template", extra={"launch-template-name": name})
        except Exception as exc:
            if not (is_already_exists(exc) or "AlreadyExists" in str(exc)):
                raise
        self._known.add(name)

    def invalidate(self, name: str) -> None:
        """Forget that ``name`` exists (CreateFleet said it does not)."""
        self._known.discard(name)

    async def list_names(self, *, node_class: str | None = None) -> list[str]:
        """The names of this cluster's templates (of one EC2NodeClass if given)."""
        names: list[str] = []
        filters = [{"Name": f"tag:{LT_CLUSTER_TAG}", "Values": [self._cluster]}]
        if node_class is not None:
            filters.append({"Name": f"tag:{aws.TAG_NODECLASS}", "Values": [node_class]})
        paginator = self._clients.ec2.get_paginator("describe_launch_templates")
        async for page in paginator.paginate(Filters=filters):
            names.extend(t["LaunchTemplateName"] for t in page.get("LaunchTemplates", []))
        return sorted(names)

    async def delete_for_node_class(self, node_class: str) -> list[str]:
        """Delete every template of ``node_class`` (it is being deleted)."""
        names = await self.list_names(node_class=node_class)
        for name in names:
            await self._delete(name)
        return names

    async def _delete(self, name: str) -> None:
        try:
            await self._clients.ec2.delete_launch_template(LaunchTemplateName=name)
        except Exception as exc:
            if not is_not_found(exc):
                raise
        self._known.discard(name)
        self.last_used.pop(name, None)
        log.info("deleted launch template", extra={"launch-template-name": name})

    async def garbage_collect(self, *, unused_for: float) -> list[str]:
        """Delete this cluster's templates no launch used for ``unused_for`` seconds
        (templates made by an earlier process count as used when this one started);
        return what was deleted. Deleting a template never affects running instances."""
        now = self._now()
        deleted = []
        for name in await self.list_names():
            if now - self.last_used.get(name, self._started) < unused_for:
                continue
            try:
                await self._delete(name)
            except Exception as exc:
                if error_code(exc) != "UnauthorizedOperation":
                    raise
                # a template made before karpy tagged them as Karpenter's IAM policy requires
                # (kubernetes.io/cluster/<cluster>=owned, karpenter.sh/nodepool): the policy
                # forbids deleting it, so leave it and collect the others
                log.warning(
                    "not authorized to delete launch template, skipping it",
                    extra={"launch-template-name": name, "error": str(exc)},
                )
                continue
            deleted.append(name)
        return deleted
