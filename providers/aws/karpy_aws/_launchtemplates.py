"""Launch templates: what one holds, and the templates themselves.

**Contents** (:class:`TemplateContents`, Karpenter AWS's pkg/providers/launchtemplate):
one template per distinct launch configuration of a plan (AMI, NodeClass, kubelet,
labels and taints, reservation): the user data the AMI family's bootstrap reads, the
NodeClass's network interfaces, metadata options, block devices and CPU options, the
instance profile and placement group, and the tags of the interfaces (and spot requests)
a launch creates. The dry-run validation (:mod:`karpy_aws._validation`) builds its
template with the same code, so it asks about what a launch sends.

**Templates** (:class:`LaunchTemplates`): named ``karpenter.k8s.aws/<hash of its
data>`` as Karpenter AWS names them, created on first use and garbage-collected once
unused. Naming by content makes creation idempotent: two replicas, or a retry after a
crash, compute the same name and find the template already there
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

from karpy.apis import NodeClaim
from karpy.apis import labels as wk
from karpy.cloudprovider import NodeClassNotReadyError
from karpy.scheduling import resources as res
from karpy_aws._clients import AWSClients
from karpy_aws._cluster import ClusterDiscovery
from karpy_aws._cpuoptions import cpu_options
from karpy_aws._errors import error_code, is_already_exists, is_not_found
from karpy_aws._fleet import FleetPlan, TemplateKey
from karpy_aws._instances import nodepool_tags
from karpy_aws._network import network_interfaces
from karpy_aws._placement import PlacementGroup, PlacementGroups
from karpy_aws._reservations import reservation_template_data
from karpy_aws._userdata import BootstrapOptions, UserDataError, user_data
from karpy_aws.apis import labels as aws
from karpy_aws.apis.ec2nodeclass import EC2NodeClass

__all__ = [
    "LT_CLUSTER_TAG",
    "LT_NAME_PREFIX",
    "LaunchTemplates",
    "TemplateContents",
    "launch_template_name",
]

log = logging.getLogger("karpy.aws.launchtemplate")

LT_NAME_PREFIX: Final = "karpenter.k8s.aws/"
LT_CLUSTER_TAG: Final = "karpenter.k8s.aws/cluster"

_DEFAULT_BLOCK_DEVICES: Final[Mapping[str, list[dict[str, Any]]]] = {
    aws.AMI_FAMILY_BOTTLEROCKET: [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {"VolumeSize": 4, "VolumeType": "gp3", "Encrypted": True},
        },
        {
            "DeviceName": "/dev/xvdb",
            "Ebs": {"VolumeSize": 20, "VolumeType": "gp3", "Encrypted": True},
        },
    ],
}
_DEFAULT_ROOT: Final = [
    {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3", "Encrypted": True}}
]


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


# -- what a template holds -------------------------------------------------------------


class TemplateContents:
    """Builds the launch templates of a cluster's launches (see the module doc): the
    cluster's name and discovered facts, the EC2 client (whose SDK model decides whether
    ``CpuOptions`` can be sent), the placement groups, the templates to ensure, and
    ``reserved_capacity``, Karpenter's ReservedCapacity gate, read at each template
    because the provider's gate may be turned while it runs."""

    def __init__(
        self,
        *,
        cluster_name: str,
        cluster: ClusterDiscovery,
        clients: AWSClients,
        placement_groups: PlacementGroups,
        launch_templates: LaunchTemplates,
        reserved_capacity: Callable[[], bool],
    ) -> None:
        self._cluster_name = cluster_name
        self._cluster = cluster
        self._clients = clients
        self._placement_groups = placement_groups
        self._launch_templates = launch_templates
        self._reserved_capacity = reserved_capacity

    def data(
        self,
        node_class: EC2NodeClass,
        template: TemplateKey,
        nodeclaim: NodeClaim,
        placement: PlacementGroup | None = None,
        *,
        capacity_type: str,
        tags: Mapping[str, str],
    ) -> dict[str, Any]:
        """The ``LaunchTemplateData`` of CreateLaunchTemplate for ``template`` of
        ``node_class`` launching ``nodeclaim`` (in ``placement``, if any): the AMI, user
        data, network interfaces, metadata options, tags, reservation, instance profile,
        block devices and CPU options."""
        spec = node_class.spec
        family = spec.ami_family_resolved()
        facts = self._cluster.facts
        # the status controller keeps such a class not Ready; this is the last guard
        missing = facts.missing_for(family)
        if missing:
            raise NodeClassNotReadyError(
                f"EC2NodeClass {node_class.metadata.name!r}: nodes could not join, "
                f"unknown: {'; '.join(missing)}"
            )
        tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
        taints = [t.to_dict() for t in (*nodeclaim.spec.taints, *nodeclaim.spec.startup_taints)]
        taints.append({"key": "karpenter.sh/unregistered", "effect": "NoExecute"})
        kubelet = spec.kubelet.to_dict() if spec.kubelet else {}
        # Karpenter's resolver: maxPods is the instance type's pod capacity unless set,
        # clusterDNS the kube-dns Service's IP unless set
        if kubelet.get("maxPods") is None:
            kubelet["maxPods"] = template.max_pods
        if not kubelet.get("clusterDNS") and facts.dns_ip:
            kubelet["clusterDNS"] = [facts.dns_ip]
        options = BootstrapOptions(
            cluster_name=self._cluster_name,
            cluster_endpoint=facts.endpoint,
            ca_bundle=facts.ca_bundle,
            cluster_cidr=facts.service_cidr,
            kubelet=kubelet,
            labels=_node_labels(nodeclaim),
            taints=taints,
            custom_user_data=spec.user_data,
            instance_store_policy=spec.instance_store_policy,
        )
        try:
            encoded = user_data(family, options)
        except UserDataError as exc:
            raise NodeClassNotReadyError(
                f"EC2NodeClass {node_class.metadata.name!r}: {exc}"
            ) from exc
        meta = spec.metadata_options
        data: dict[str, Any] = {
            "ImageId": template.image_id,
            "UserData": encoded,
            # the security groups travel on the interfaces (EC2 refuses both)
            "NetworkInterfaces": network_interfaces(
                node_class, efa_count=template.efa_count, ip_family=facts.ip_family
            ),
            "MetadataOptions": {
                "HttpEndpoint": meta.http_endpoint,
                "HttpProtocolIpv6": meta.http_protocol_ipv6,
                "HttpPutResponseHopLimit": meta.http_put_response_hop_limit,
                "HttpTokens": meta.http_tokens,
                # pinned, as Karpenter does: an account-wide default of "enabled" would
                # otherwise apply, and karpy's tag keys (kubernetes.io/cluster/<name>,
                # karpenter.k8s.aws/ec2nodeclass) are not valid instance-metadata tag keys
                "InstanceMetadataTags": "disabled",
            },
            "Monitoring": {"Enabled": bool(spec.detailed_monitoring)},
            # the network interfaces (and spot requests) the launch creates are tagged from
            # the template: the policy allows creating them only with the cluster's tags
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": tag_list}
                for kind in (
                    ("network-interface", "spot-instances-request")
                    if capacity_type == wk.CAPACITY_TYPE_SPOT
                    else ("network-interface",)
                )
            ],
        }
        data.update(reservation_template_data(
            template.reservation_id, template.market_type, targeted=self._reserved_capacity()
        ))
        if node_class.status.instance_profile:
            data["IamInstanceProfile"] = {"Name": node_class.status.instance_profile}
        if placement is not None:
            data["Placement"] = {"GroupId": placement.id}
        devices = _block_devices(node_class)
        if devices:
            data["BlockDeviceMappings"] = devices
        cpu = cpu_options(node_class, self._clients.ec2)
        if cpu is not None:
            data["CpuOptions"] = cpu
        return data

    async def for_plan(
        self, plan: FleetPlan, node_class: EC2NodeClass, nodeclaim: NodeClaim
    ) -> dict[TemplateKey, str]:
        """The name of each template ``plan`` launches from, by its key, made if
        missing: the cluster resolved, the NodePool's tags, the class's placement
        group (NodeClassNotReadyError when its selector finds none)."""
        await self._cluster.resolve()  # cached once complete: no call per launch
        tags = nodepool_tags(
            self._cluster_name,
            nodeclaim.metadata.labels.get(wk.LABEL_NODEPOOL, ""),
            node_class.metadata.name or "",
            node_class.spec.tags,
        )
        placement = await self._placement_groups.get(node_class)
        if node_class.spec.placement_group_selector is not None and placement is None:
            raise NodeClassNotReadyError(
                f"EC2NodeClass {node_class.metadata.name!r}: the placement group its "
                "placementGroupSelector names is not found or not available"
            )
        return {
            template: await self._launch_templates.ensure(
                self.data(
                    node_class,
                    template,
                    nodeclaim,
                    placement,
                    capacity_type=plan.capacity_type,
                    tags=tags,
                ),
                tags=tags,
            )
            for template in plan.templates()
        }


def _volume_gib(size: str | None) -> int | None:
    if not size:
        return None
    return max(1, -(-res.to_canonical(res.EPHEMERAL_STORAGE, size) // 2**30))


def _block_devices(node_class: EC2NodeClass) -> list[dict[str, Any]]:
    family = node_class.spec.ami_family_resolved()
    if not node_class.spec.block_device_mappings:
        return (
            _DEFAULT_BLOCK_DEVICES.get(family, _DEFAULT_ROOT)
            if family != aws.AMI_FAMILY_CUSTOM
            else []
        )
    out = []
    for mapping in node_class.spec.block_device_mappings:
        ebs: dict[str, Any] = {}
        if mapping.ebs is not None:
            e = mapping.ebs
            for key, value in (
                ("DeleteOnTermination", e.delete_on_termination),
                ("Encrypted", e.encrypted),
                ("Iops", e.iops),
                ("KmsKeyId", e.kms_key_id),
                ("SnapshotId", e.snapshot_id),
                ("Throughput", e.throughput),
                ("VolumeInitializationRate", e.volume_initialization_rate),
                ("VolumeSize", _volume_gib(e.volume_size)),
                ("VolumeType", e.volume_type),
            ):
                if value is not None:
                    ebs[key] = value
        out.append({"DeviceName": mapping.device_name, "Ebs": ebs})
    return out


def _node_labels(nodeclaim: NodeClaim) -> dict[str, str]:
    """Labels the kubelet may set on itself (not the kubernetes.io/k8s.io domains)."""
    return {
        k: v
        for k, v in nodeclaim.metadata.labels.items()
        if not (k.split("/")[0].endswith("kubernetes.io") or k.split("/")[0].endswith("k8s.io"))
        or "/" not in k
    }
