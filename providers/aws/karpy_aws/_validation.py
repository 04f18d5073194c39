"""The EC2NodeClass's ``ValidationSucceeded`` condition: can the controller actually
launch with this class? Asked of AWS the way Karpenter AWS asks it
(pkg/controllers/nodeclass/validation.go), so missing IAM permissions show on the class's
status instead of as failed launches:

1. while subnets, security groups, AMIs or the instance profile are not resolved:
   False, ``DependenciesNotReady``; a field the installed AWS SDK cannot send
   (``cpuOptions.nestedVirtualization`` on an older botocore): False,
   ``UnsupportedConfiguration`` (karpy's reason: Karpenter's SDK always has it), dry
   runs or not;
2. ``CreateLaunchTemplate`` of the class's launch template (made for real, with the
   class's tags and an empty ``karpenter.sh/nodepool``, as Karpenter does);
3. ``CreateFleet`` with ``DryRun`` from that template, over every subnet, tagged as a
   launch is;
4. ``RunInstances`` with ``DryRun``, per subnet until one is allowed.

An ``UnauthorizedOperation`` at a step makes the condition False with Karpenter's reason
(``CreateLaunchTemplateAuthCheckFailed``, ``CreateFleetAuthCheckFailed``,
``RunInstancesAuthCheckFailed``) and a message naming the action and AWS's answer. The
dry runs stand for the launch: AWS answers ``DryRunOperation`` when it would have been
allowed. Other errors propagate (the reconcile is retried). A verdict is kept 10
minutes per (class, status, spec), as Karpenter caches it, so the status controller's
minute refresh does not repeat the calls. With ``DISABLE_DRY_RUN`` (setting
``disableDryRun``) steps 2-4 are skipped and the condition is True once the
dependencies are resolved, as Karpenter AWS does.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from karpy.apis import NodeClaim
from karpy.apis import labels as wk
from karpy.cloudprovider import NodeClassNotReadyError
from karpy_aws._clients import AWSClients
from karpy_aws._cluster import ClusterDiscovery
from karpy_aws._cpuoptions import cpu_options
from karpy_aws._errors import error_code
from karpy_aws._fleet import TemplateKey
from karpy_aws._instances import nodepool_tags
from karpy_aws._launchtemplates import LaunchTemplates
from karpy_aws._settings import AWSSettings
from karpy_aws.apis import labels as aws
from karpy_aws.apis.ec2nodeclass import (
    AMI,
    CONDITION_AMIS_READY,
    CONDITION_INSTANCE_PROFILE_READY,
    CONDITION_SECURITY_GROUPS_READY,
    CONDITION_SUBNETS_READY,
    EC2NodeClass,
)

__all__ = ["CACHE_SECONDS", "NodeClassValidation", "TemplateData", "Verdict"]

Verdict = tuple[bool, str, str]
"""``(True, "", "")`` or ``(False, reason, message)``."""

CACHE_SECONDS: Final = 600.0
_REQUIRED: Final = (
    CONDITION_AMIS_READY,
    CONDITION_INSTANCE_PROFILE_READY,
    CONDITION_SECURITY_GROUPS_READY,
    CONDITION_SUBNETS_READY,
)
#: Karpenter's fallback instance types for the dry runs, per architecture
_FALLBACK_TYPES: Final = {"amd64": "m5.large", "arm64": "m6g.large"}
_MESSAGES: Final = {
    "CreateLaunchTemplateAuthCheckFailed": (
        "Controller isn't authorized to call ec2:CreateLaunchTemplate"
    ),
    "CreateFleetAuthCheckFailed": "Controller isn't authorized to call ec2:CreateFleet",
    "RunInstancesAuthCheckFailed": "Controller isn't authorized to call ec2:RunInstances",
}


class _RefusedError(Exception):
    def __init__(self, reason: str, exc: BaseException) -> None:
        error = getattr(exc, "response", {}).get("Error", {})
        super().__init__(f"{_MESSAGES[reason]}: {error.get('Message') or exc}")
        self.reason = reason


def _unauthorized(exc: BaseException) -> bool:
    return error_code(exc) == "UnauthorizedOperation"


def _dry_run_passed(exc: BaseException) -> bool:
    return error_code(exc) == "DryRunOperation"


def _standard_ami(node_class: EC2NodeClass) -> AMI | None:
    """The first AMI for plain instances (no GPU/accelerator requirement), else the first
    (Karpenter prefers the standard variant: GPU AMIs may outgrow the block devices)."""
    for ami in node_class.status.amis:
        if not any(
            r.key in (aws.LABEL_INSTANCE_GPU_COUNT, aws.LABEL_INSTANCE_ACCELERATOR_COUNT)
            and r.operator == "Exists"
            for r in ami.requirements
        ):
            return ami
    return node_class.status.amis[0] if node_class.status.amis else None


_KUBELET_DEFAULT_MAX_PODS = 110


def _instance_type_for(ami: AMI) -> str:
    arches = next((r.values for r in ami.requirements if r.key == wk.LABEL_ARCH), ["amd64"])
    return _FALLBACK_TYPES.get(arches[0] if arches else "amd64", "m5.large")


class TemplateData(Protocol):
    """The provider's launch template data for a class, a template key and a NodeClaim
    (:meth:`karpy_aws._launchtemplates.TemplateContents.data`, the very data its launches
    use, so the dry runs ask about what a launch sends)."""

    def __call__(
        self,
        node_class: EC2NodeClass,
        template: TemplateKey,
        nodeclaim: NodeClaim,
        *,
        capacity_type: str,
        tags: Mapping[str, str],
    ) -> dict[str, Any]:
        """The ``LaunchTemplateData`` of CreateLaunchTemplate."""
        ...


class NodeClassValidation:
    """Validates EC2NodeClasses against AWS for one provider (see module doc): the
    provider's settings, clients, cluster discovery and launch templates, and
    ``template_data``, how it builds a launch template's data."""

    def __init__(
        self,
        *,
        settings: AWSSettings,
        clients: AWSClients,
        cluster: ClusterDiscovery,
        launch_templates: LaunchTemplates,
        template_data: TemplateData,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._clients = clients
        self._cluster = cluster
        self._launch_templates = launch_templates
        self._template_data = template_data
        self._now = monotonic
        self._cache: dict[str, tuple[float, Verdict]] = {}

    def _key(self, node_class: EC2NodeClass) -> str:
        state = {
            "spec": node_class.spec.to_dict(),
            "status": {k: v for k, v in node_class.status.to_dict().items() if k != "conditions"},
        }
        digest = hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()
        return f"{node_class.metadata.name}:{digest[:16]}"

    async def __call__(self, node_class: EC2NodeClass, ready: dict[str, bool]) -> Verdict:
        """The verdict for ``node_class``, whose other conditions are ``ready``."""
        if not all(ready.get(c, False) for c in _REQUIRED):
            return (
                False,
                "DependenciesNotReady",
                "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution",
            )
        try:
            # Before the dry runs and without them (DISABLE_DRY_RUN): a field this SDK
            # cannot send would fail every launch, so the class says so instead.
            cpu_options(node_class, self._clients.ec2)
        except NodeClassNotReadyError as unsupported:
            return (False, "UnsupportedConfiguration", str(unsupported))
        if self._settings.disable_dry_run:
            # DISABLE_DRY_RUN: Karpenter AWS sets the condition True without the calls
            return (True, "", "")
        key = self._key(node_class)
        cached = self._cache.get(key)
        if cached is not None and self._now() - cached[0] < CACHE_SECONDS:
            return cached[1]
        try:
            await self._check(node_class)
            verdict: Verdict = (True, "", "")
        except _RefusedError as refused:
            verdict = (False, refused.reason, str(refused))
        # one verdict per class: the previous state's goes
        prefix = f"{node_class.metadata.name}:"
        self._cache = {k: v for k, v in self._cache.items() if not k.startswith(prefix)}
        self._cache[key] = (self._now(), verdict)
        return verdict

    async def _check(self, node_class: EC2NodeClass) -> None:
        ec2 = self._clients.ec2
        name = node_class.metadata.name or ""
        ami = _standard_ami(node_class)
        if ami is None:  # AMIsReady says why
            return
        instance_type = _instance_type_for(ami)
        tags = nodepool_tags(self._settings.cluster_name, "", name, node_class.spec.tags)
        nodeclaim = NodeClaim.model_validate(
            {
                "metadata": {"name": f"{name}-validation"},
                "spec": {
                    "nodeClassRef": {"group": aws.GROUP, "kind": "EC2NodeClass", "name": name},
                    "requirements": [],
                },
            }
        )
        await self._cluster.resolve()  # the template's user data needs the cluster
        # the dry runs launch nothing: the kubelet's default maxPods stands in for the
        # instance type's pod capacity
        data = self._template_data(
            node_class,
            TemplateKey(ami.id, max_pods=_KUBELET_DEFAULT_MAX_PODS),
            nodeclaim,
            capacity_type=wk.CAPACITY_TYPE_ON_DEMAND,
            tags=tags,
        )
        try:
            template = await self._launch_templates.ensure(data, tags=tags)
        except Exception as exc:
            if _unauthorized(exc):
                raise _RefusedError("CreateLaunchTemplateAuthCheckFailed", exc) from exc
            raise
        tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
        spec = {"LaunchTemplateName": template, "Version": "$Latest"}
        subnets = [s.id for s in node_class.status.subnets]
        fleet: dict[str, Any] = {
            "DryRun": True,
            "Type": "instant",
            "LaunchTemplateConfigs": [
                {
                    "LaunchTemplateSpecification": spec,
                    "Overrides": [{"InstanceType": instance_type, "SubnetId": s} for s in subnets],
                }
            ],
            "TargetCapacitySpecification": {
                "TotalTargetCapacity": 1,
                "DefaultTargetCapacityType": wk.CAPACITY_TYPE_ON_DEMAND,
            },
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": tag_list} for kind in ("instance", "volume", "fleet")
            ],
        }
        try:
            await ec2.create_fleet(**fleet)
        except Exception as exc:
            if _unauthorized(exc):
                raise _RefusedError("CreateFleetAuthCheckFailed", exc) from exc
            if not _dry_run_passed(exc):
                raise
        first: BaseException | None = None
        for subnet in subnets:
            try:
                await ec2.run_instances(
                    DryRun=True,
                    MinCount=1,
                    MaxCount=1,
                    InstanceType=instance_type,
                    LaunchTemplate=spec,
                    SubnetId=subnet,
                    TagSpecifications=[
                        {"ResourceType": kind, "Tags": tag_list}
                        for kind in ("instance", "volume", "network-interface")
                    ],
                )
            except Exception as exc:
                if _dry_run_passed(exc):
                    return
                first = first or exc
                continue
            return
        if first is not None:
            if _unauthorized(first):
                raise _RefusedError("RunInstancesAuthCheckFailed", first) from first
            raise first
