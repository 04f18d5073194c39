"""Resolving an EC2NodeClass's selectors against AWS: subnets, security groups, AMIs and
the instance profile, into ``status`` and its conditions.

One function per concern, each returning what it found and, when nothing was found,
the condition reason and a message saying which selector matched nothing (Karpenter's
reasons: SubnetsNotFound, SecurityGroupsNotFound, AMINotFound, UnsupportedAlias,
InstanceProfileNotFound). The status controller calls :func:`resolve_status`; tests
call it too, against moto, without a cluster.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.apis import labels as wk
from karpy.apis.core import NodeSelectorRequirement
from karpy_aws._clients import AWSClients
from karpy_aws._cluster import ClusterFacts
from karpy_aws._errors import is_already_exists, is_not_found
from karpy_aws._placement import describe_placement_group, selector_text
from karpy_aws._refresh import ResolutionCaches, selector_key
from karpy_aws._reservations import CapacityReservations, reservation_status
from karpy_aws._userdata import check_user_data, unsupported_family_message
from karpy_aws.apis import labels as aws
from karpy_aws.apis.ec2nodeclass import (
    AMI,
    CONDITION_AMIS_READY,
    CONDITION_CAPACITY_RESERVATIONS_READY,
    CONDITION_INSTANCE_PROFILE_READY,
    CONDITION_PLACEMENT_GROUP_READY,
    CONDITION_SECURITY_GROUPS_READY,
    CONDITION_SUBNETS_READY,
    CONDITION_VALIDATION_SUCCEEDED,
    READY_DEPENDENTS,
    AMISelectorTerm,
    CapacityReservation,
    EC2NodeClass,
    EC2NodeClassStatus,
    SecurityGroup,
    Subnet,
)

__all__ = [
    "Resolution",
    "UnfilteredAMITermError",
    "Validator",
    "alias_parameters",
    "instance_profile_name",
    "join_condition",
    "resolve_amis",
    "resolve_capacity_reservations",
    "resolve_instance_profile",
    "resolve_security_groups",
    "resolve_status",
    "resolve_subnets",
]

log = logging.getLogger("karpy.aws.nodeclass")

_ARCH = {"x86_64": "amd64", "arm64": "arm64"}

Validator = Callable[[EC2NodeClass, dict[str, bool]], Awaitable[tuple[bool, str, str]]]
"""``validate(resolved class, {condition: ok})`` -> the ValidationSucceeded outcome."""


@dataclass
class Resolution:
    """What one resolution pass found: the new status and each condition's outcome
    (``(True, "", "")`` or ``(False, reason, message)``)."""

    status: EC2NodeClassStatus
    conditions: dict[str, tuple[bool, str, str]] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        """Whether every condition Ready depends on is True."""
        return all(ok for kind, (ok, _, _) in self.conditions.items() if kind in READY_DEPENDENTS)


def _filters_for_tags(tags: Mapping[str, str]) -> list[dict[str, Any]]:
    return [
        {"Name": "tag-key", "Values": [k]} if v == "*" else {"Name": f"tag:{k}", "Values": [v]}
        for k, v in tags.items()
    ]


async def _describe_matching(
    clients: AWSClients, operation: str, key: str, id_key: str, filter_sets: list[list[Any]]
) -> dict[str, dict[str, Any]]:
    """Every resource any filter set matches (the terms are ORed), by ID."""
    found: dict[str, dict[str, Any]] = {}
    for filters in filter_sets:
        paginator = clients.ec2.get_paginator(operation)
        async for page in paginator.paginate(Filters=filters):
            for item in page.get(key, []):
                found[item[id_key]] = item
    return found


async def resolve_subnets(clients: AWSClients, node_class: EC2NodeClass) -> list[Subnet]:
    """The subnets matching any term, most free addresses first."""
    found = await _describe_matching(
        clients,
        "describe_subnets",
        "Subnets",
        "SubnetId",
        [
            [{"Name": "subnet-id", "Values": [t.id]}] if t.id else _filters_for_tags(t.tags)
            for t in node_class.spec.subnet_selector_terms
        ],
    )
    ordered = sorted(
        found.values(),
        key=lambda s: (-int(s.get("AvailableIpAddressCount", 0)), s["SubnetId"]),
    )
    return [
        Subnet(id=s["SubnetId"], zone=s["AvailabilityZone"], zone_id=s.get("AvailabilityZoneId"))
        for s in ordered
    ]


async def resolve_security_groups(
    clients: AWSClients, node_class: EC2NodeClass
) -> list[SecurityGroup]:
    """The security groups matching any term (by id, by group name, or by tags)."""
    filter_sets = []
    for term in node_class.spec.security_group_selector_terms:
        if term.id:
            filter_sets.append([{"Name": "group-id", "Values": [term.id]}])
        elif term.name:
            filter_sets.append([{"Name": "group-name", "Values": [term.name]}])
        else:
            filter_sets.append(_filters_for_tags(term.tags))
    found = await _describe_matching(
        clients, "describe_security_groups", "SecurityGroups", "GroupId", filter_sets
    )
    return [
        SecurityGroup(id=g["GroupId"], name=g.get("GroupName"))
        for g in sorted(found.values(), key=lambda g: g["GroupId"])
    ]


def alias_parameters(alias: str, k8s_version: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """SSM public parameter -> (architecture, variants it serves) for an AMI alias.

    One image may serve several variants: Bottlerocket's x86_64 image carries the
    Neuron driver, so it is both the standard and the neuron variant (as in Karpenter).

    Raises ValueError for an alias whose family karpy cannot resolve.
    """
    family, _, version = alias.partition("@")
    latest = version == "latest"
    if family == "al2023":
        out: dict[str, tuple[str, tuple[str, ...]]] = {}
        for arch, variants in (
            ("x86_64", ("standard", "nvidia", "neuron")),
            ("arm64", ("standard", "nvidia")),
        ):
            for variant in variants:
                name = (
                    "recommended"
                    if latest
                    else (f"amazon-eks-node-al2023-{arch}-{variant}-{k8s_version}-{version}")
                )
                path = (
                    f"/aws/service/eks/optimized-ami/{k8s_version}/amazon-linux-2023/"
                    f"{arch}/{variant}/{name}/image_id"
                )
                out[path] = (arch, (variant,))
        return out
    if family == "bottlerocket":
        trimmed = version if latest else version.lstrip("v")
        root = f"/aws/service/bottlerocket/aws-k8s-{k8s_version}"
        return {
            f"{root}/x86_64/{trimmed}/image_id": ("x86_64", ("standard", "neuron")),
            f"{root}/arm64/{trimmed}/image_id": ("arm64", ("standard",)),
            f"{root}-nvidia/x86_64/{trimmed}/image_id": ("x86_64", ("nvidia",)),
            f"{root}-nvidia/arm64/{trimmed}/image_id": ("arm64", ("nvidia",)),
        }
    if family == "al2":
        eks = f"/aws/service/eks/optimized-ami/{k8s_version}"

        def pinned(prefix: str) -> str:
            return "recommended" if latest else f"{prefix}-{k8s_version}-{version}"

        return {
            f"{eks}/amazon-linux-2/{pinned('amazon-eks-node')}/image_id": (
                "x86_64",
                ("standard",),
            ),
            f"{eks}/amazon-linux-2-arm64/{pinned('amazon-eks-arm64-node')}/image_id": (
                "arm64",
                ("standard",),
            ),
            f"{eks}/amazon-linux-2-gpu/{pinned('amazon-eks-gpu-node')}/image_id": (
                "x86_64",
                ("nvidia",),
            ),
        }
    raise ValueError(f"alias {alias!r}: karpy resolves al2023, al2 and bottlerocket aliases only")


def _variant_requirements(arch: str, variant: str) -> list[NodeSelectorRequirement]:
    reqs = [
        NodeSelectorRequirement(
            key="kubernetes.io/arch", operator="In", values=[_ARCH.get(arch, arch)]
        )
    ]
    if variant == "nvidia":
        reqs.append(NodeSelectorRequirement(key=aws.LABEL_INSTANCE_GPU_COUNT, operator="Exists"))
    elif variant == "neuron":
        reqs.append(
            NodeSelectorRequirement(key=aws.LABEL_INSTANCE_ACCELERATOR_COUNT, operator="Exists")
        )
    else:
        reqs.append(
            NodeSelectorRequirement(key=aws.LABEL_INSTANCE_GPU_COUNT, operator="DoesNotExist")
        )
        reqs.append(
            NodeSelectorRequirement(
                key=aws.LABEL_INSTANCE_ACCELERATOR_COUNT, operator="DoesNotExist"
            )
        )
    return reqs


async def _describe_images(clients: AWSClients, **kwargs: Any) -> list[dict[str, Any]]:
    images: list[dict[str, Any]] = []
    paginator = clients.ec2.get_paginator("describe_images")
    async for page in paginator.paginate(**kwargs):
        images.extend(page.get("Images", []))
    return images


class UnfilteredAMITermError(ValueError):
    """An AMI selector term with nothing to filter images by (the CRD refuses it too)."""


async def _ssm_image_id(clients: AWSClients, parameter: str) -> str | None:
    """The AMI ID an ``ssmParameter`` term names, or None (logged) when the parameter is
    missing or does not hold an AMI ID, as Karpenter AWS treats them. Other errors
    (AccessDenied: the controller role needs ``ssm:GetParameter`` on it) propagate."""
    try:
        answer = await clients.ssm.get_parameter(Name=parameter)
    except Exception as exc:
        if is_not_found(exc):
            log.warning("ssm parameter not found", extra={"ssmParameter": parameter})
            return None
        raise
    value = str(answer["Parameter"]["Value"])
    if not value.startswith("ami-"):
        log.warning(
            "ssm parameter value is an invalid AMI ID",
            extra={"ssmParameter": parameter, "id": value},
        )
        return None
    return value


async def resolve_amis(
    clients: AWSClients, terms: Sequence[AMISelectorTerm], *, k8s_version: str
) -> list[AMI]:
    """The AMIs the terms select, newest first per architecture and variant.

    Raises ValueError for an unsupported alias (reason UnsupportedAlias).
    """
    amis: dict[tuple[str, str], AMI] = {}
    for term in terms:
        if term.alias:
            ids: dict[str, tuple[str, tuple[str, ...]]] = {}
            for path, (arch, variants) in alias_parameters(term.alias, k8s_version).items():
                try:
                    answer = await clients.ssm.get_parameter(Name=path)
                except Exception as exc:
                    if is_not_found(exc):
                        continue
                    raise
                ids[answer["Parameter"]["Value"]] = (arch, variants)
            if not ids:
                continue
            for image in await _describe_images(clients, ImageIds=sorted(ids)):
                arch, variants = ids[image["ImageId"]]
                for variant in variants:  # one status entry per variant, as Karpenter
                    amis[(image["ImageId"], variant)] = AMI(
                        id=image["ImageId"],
                        name=image.get("Name"),
                        requirements=_variant_requirements(arch, variant),
                    )
            continue
        kwargs: dict[str, Any] = {}
        if term.id:
            kwargs["ImageIds"] = [term.id]
        elif term.ssm_parameter:
            image_id = await _ssm_image_id(clients, term.ssm_parameter)
            if image_id is None:
                continue
            # exactly the parameter's AMI, whoever owns it (as for an ``id`` term)
            kwargs["Filters"] = [{"Name": "image-id", "Values": [image_id]}]
        elif not (term.name or term.tags):
            # never an unfiltered DescribeImages: it would pick the newest image the account
            # can see, public ones included (the CRD refuses such a term; this is the guard)
            raise UnfilteredAMITermError(
                f"amiSelectorTerms {_describe_terms([term])} selects no AMI by alias, id, "
                "name, tags or ssmParameter; set one of them"
            )
        else:
            filters = _filters_for_tags(term.tags)
            if term.name:
                filters.append({"Name": "name", "Values": [term.name]})
            kwargs["Filters"] = filters
            if term.owner:
                kwargs["Owners"] = [term.owner]
            elif term.name:  # a name alone: Karpenter looks in self and amazon
                kwargs["Owners"] = ["self", "amazon"]
        images = sorted(
            await _describe_images(clients, **kwargs),
            key=lambda i: (i.get("CreationDate", ""), i["ImageId"]),
            reverse=True,
        )
        newest_per_arch: dict[str, dict[str, Any]] = {}
        for image in images:
            newest_per_arch.setdefault(image.get("Architecture", "x86_64"), image)
        for arch, image in newest_per_arch.items():
            amis[(image["ImageId"], "")] = AMI(
                id=image["ImageId"],
                name=image.get("Name"),
                deprecated=bool(image.get("DeprecationTime")) or None,
                requirements=[
                    NodeSelectorRequirement(
                        key="kubernetes.io/arch", operator="In", values=[_ARCH.get(arch, arch)]
                    )
                ],
            )
    return [amis[key] for key in sorted(amis)]


def instance_profile_name(cluster_name: str, region: str, node_class_name: str) -> str:
    """The instance profile karpy manages for a NodeClass's role:
    ``<cluster>_<stable hash of region and NodeClass>`` (at most 128 characters)."""
    digest = int.from_bytes(
        hashlib.sha256(f"{region}{node_class_name}".encode()).digest()[:8], "big"
    )
    return f"{cluster_name[:100]}_{digest}"


async def resolve_instance_profile(
    clients: AWSClients, node_class: EC2NodeClass, *, cluster_name: str, region: str
) -> str:
    """The instance profile to launch with: ``spec.instanceProfile`` (checked to exist),
    or one created/adopted for ``spec.role`` with that role in it."""
    if node_class.spec.instance_profile:
        await clients.iam.get_instance_profile(InstanceProfileName=node_class.spec.instance_profile)
        return node_class.spec.instance_profile
    role = node_class.spec.role or ""
    name = instance_profile_name(cluster_name, region, node_class.metadata.name or "")
    # Karpenter's EC2NodeClass.InstanceProfileTags: the policy lets the controller create
    # (and later change or delete) only a profile tagged with all four
    tags = [
        {"Key": k, "Value": v}
        for k, v in {
            **node_class.spec.tags,
            f"kubernetes.io/cluster/{cluster_name}": "owned",
            aws.TAG_EKS_CLUSTER_NAME: cluster_name,
            aws.TAG_NODECLASS: node_class.metadata.name or "",
            wk.LABEL_REGION: region,
        }.items()
    ]
    try:
        profile = (await clients.iam.get_instance_profile(InstanceProfileName=name))[
            "InstanceProfile"
        ]
    except Exception as exc:
        if not is_not_found(exc):
            raise
        try:
            profile = (
                await clients.iam.create_instance_profile(InstanceProfileName=name, Tags=tags)
            )["InstanceProfile"]
        except Exception as again:
            if not is_already_exists(again):
                raise
            profile = (await clients.iam.get_instance_profile(InstanceProfileName=name))[
                "InstanceProfile"
            ]
    roles = [r["RoleName"] for r in profile.get("Roles", [])]
    if role not in roles:
        for other in roles:  # the NodeClass's role changed: swap it
            await clients.iam.remove_role_from_instance_profile(
                InstanceProfileName=name, RoleName=other
            )
        await clients.iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role)
    return name


async def delete_instance_profile(
    clients: AWSClients, node_class: EC2NodeClass, *, cluster_name: str, region: str
) -> None:
    """Remove the instance profile karpy created for ``node_class`` (idempotent; a
    user-supplied ``spec.instanceProfile`` is never touched)."""
    if node_class.spec.instance_profile:
        return
    name = instance_profile_name(cluster_name, region, node_class.metadata.name or "")
    try:
        profile = (await clients.iam.get_instance_profile(InstanceProfileName=name))[
            "InstanceProfile"
        ]
    except Exception as exc:
        if is_not_found(exc):
            return
        raise
    for role in profile.get("Roles", []):
        await clients.iam.remove_role_from_instance_profile(
            InstanceProfileName=name, RoleName=role["RoleName"]
        )
    try:
        await clients.iam.delete_instance_profile(InstanceProfileName=name)
    except Exception as exc:
        if not is_not_found(exc):
            raise


def _describe_terms(terms: Iterable[Any]) -> str:
    return "; ".join(str(t.to_dict()) if hasattr(t, "to_dict") else str(t) for t in terms)


async def resolve_status(
    clients: AWSClients,
    node_class: EC2NodeClass,
    *,
    cluster_name: str,
    region: str,
    k8s_version: str,
    cluster: ClusterFacts | None = None,
    validate: Validator | None = None,
    caches: ResolutionCaches | None = None,
    reservations: CapacityReservations | None = None,
) -> Resolution:
    """Resolve every selector of ``node_class``; a failure of one concern is reported in
    its condition and does not stop the others.

    ValidationSucceeded is False when its nodes could not join: an AMI family whose
    user data karpy does not render, or (``cluster`` given) a cluster fact the family's
    user data needs that neither settings nor discovery gave (see
    :mod:`karpy_aws._cluster`). Otherwise ``validate`` (the provider's
    :class:`karpy_aws._validation.NodeClassValidation`) decides it from the resolved
    class and the other conditions; without it the condition is True.

    With ``caches`` (the provider's), subnets, security groups and AMIs are reused for the refresh
    intervals (:mod:`karpy_aws._refresh`); without, they are asked of AWS every time.

    Capacity reservations are listed through ``reservations`` (the provider's, which
    also keeps their slots left for the reserved offerings; a throwaway one without)."""
    status = EC2NodeClassStatus()
    out = Resolution(status=status)
    spec = node_class.spec

    if caches is None:
        status.subnets = await resolve_subnets(clients, node_class)
    else:
        status.subnets = await caches.subnets.get_or_resolve(
            selector_key(spec.subnet_selector_terms),
            lambda: resolve_subnets(clients, node_class),
        )
    out.conditions[CONDITION_SUBNETS_READY] = (
        (True, "", "")
        if status.subnets
        else (
            False,
            "SubnetsNotFound",
            "SubnetSelector did not match any Subnets "
            f"({_describe_terms(spec.subnet_selector_terms)})",
        )
    )
    if caches is None:
        status.security_groups = await resolve_security_groups(clients, node_class)
    else:
        status.security_groups = await caches.security_groups.get_or_resolve(
            selector_key(spec.security_group_selector_terms),
            lambda: resolve_security_groups(clients, node_class),
        )
    out.conditions[CONDITION_SECURITY_GROUPS_READY] = (
        (True, "", "")
        if status.security_groups
        else (
            False,
            "SecurityGroupsNotFound",
            "SecurityGroupSelector did not match any SecurityGroups "
            f"({_describe_terms(spec.security_group_selector_terms)})",
        )
    )
    try:
        if caches is None:
            status.amis = await resolve_amis(
                clients, spec.ami_selector_terms, k8s_version=k8s_version
            )
        else:
            status.amis = await caches.amis.get_or_resolve(
                selector_key(spec.ami_selector_terms, k8s_version),
                lambda: resolve_amis(clients, spec.ami_selector_terms, k8s_version=k8s_version),
            )
        out.conditions[CONDITION_AMIS_READY] = (
            (True, "", "")
            if status.amis
            else (
                False,
                "AMINotFound",
                "AMISelector did not match any AMIs "
                f"({_describe_terms(spec.ami_selector_terms)}, Kubernetes {k8s_version})",
            )
        )
    except UnfilteredAMITermError as exc:
        out.conditions[CONDITION_AMIS_READY] = (False, "AMINotFound", str(exc))
    except ValueError as exc:
        out.conditions[CONDITION_AMIS_READY] = (False, "UnsupportedAlias", str(exc))
    try:
        status.instance_profile = await resolve_instance_profile(
            clients, node_class, cluster_name=cluster_name, region=region
        )
        out.conditions[CONDITION_INSTANCE_PROFILE_READY] = (True, "", "")
    except Exception as exc:
        if not is_not_found(exc):
            raise
        which = spec.instance_profile or spec.role
        out.conditions[CONDITION_INSTANCE_PROFILE_READY] = (
            False,
            "InstanceProfileNotFound" if spec.instance_profile else "RoleNotFound",
            f"{'instanceProfile' if spec.instance_profile else 'role'} {which!r} "
            "was not found in IAM",
        )
    out.conditions[CONDITION_PLACEMENT_GROUP_READY] = await placement_group_condition(
        clients, node_class
    )
    status.capacity_reservations = await resolve_capacity_reservations(
        reservations or CapacityReservations(clients), node_class
    )
    out.conditions[CONDITION_CAPACITY_RESERVATIONS_READY] = (True, "", "")
    joins = join_condition(spec.ami_family_resolved(), cluster, user_data=spec.user_data)
    if not joins[0] or validate is None:
        out.conditions[CONDITION_VALIDATION_SUCCEEDED] = joins
    else:
        resolved_class = node_class.model_copy(update={"status": status})
        ready = {kind: ok for kind, (ok, _, _) in out.conditions.items()}
        out.conditions[CONDITION_VALIDATION_SUCCEEDED] = await validate(resolved_class, ready)
    return out


async def resolve_capacity_reservations(
    reservations: CapacityReservations, node_class: EC2NodeClass
) -> list[CapacityReservation]:
    """The capacity reservations the class's terms select, by ID (Karpenter's
    ``status.capacityReservations``). One EC2 reports in a shape karpy does not know is
    left out and logged; none found is not an error (CapacityReservationsReady stays
    True, as in Karpenter)."""
    found: list[CapacityReservation] = []
    now = reservations.wall()
    for reservation in await reservations.select(
        node_class.spec.capacity_reservation_selector_terms
    ):
        try:
            found.append(reservation_status(reservation, now))
        except ValueError as exc:
            log.error(
                "failed to parse discovered capacity reservations",
                extra={"nodeclass": node_class.metadata.name, "error": str(exc)},
            )
    return found


async def placement_group_condition(
    clients: AWSClients, node_class: EC2NodeClass
) -> tuple[bool, str, str]:
    """``PlacementGroupReady``: True without a selector or when its group is found."""
    selector = node_class.spec.placement_group_selector
    if selector is None:
        return (True, "", "")
    group = await describe_placement_group(clients, selector)
    if group is None:
        return (
            False,
            "PlacementGroupNotFound",
            f"placementGroupSelector: no available placement group with "
            f"{selector_text(selector)}; create it, or fix or remove the selector",
        )
    return (True, "", "")


def join_condition(
    family: str, cluster: ClusterFacts | None, *, user_data: str | None = None
) -> tuple[bool, str, str]:
    """ValidationSucceeded as far as joining goes: can karpy write user data that joins
    a node of ``family`` to the cluster, merging ``user_data`` (``spec.userData``)?"""
    unsupported = unsupported_family_message(family)
    if unsupported is not None:
        return (False, "UnsupportedAMIFamily", unsupported)
    invalid = check_user_data(family, user_data)
    if invalid is not None:
        return (False, "UserDataInvalid", invalid)
    missing = cluster.missing_for(family) if cluster is not None else []
    if missing:
        # Karpenter's reason when the service CIDR is unknown
        reason = (
            "ClusterCIDRResolutionFailed"
            if not cluster or not cluster.service_cidr
            else "ClusterDiscoveryFailed"
        )
        return (
            False,
            reason,
            f"nodes of amiFamily {family} could not join the cluster: unknown "
            + "; ".join(missing),
        )
    return (True, "", "")
