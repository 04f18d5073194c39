"""moto in server mode for the AWS provider's tests, and where its gaps are filled.

``ThreadedMotoServer`` runs in this process on 127.0.0.1 (a free port); aioboto3 talks
to it over HTTP through ``endpoint_url``, exactly as it talks to AWS. Because the
server shares this process, gaps in moto are filled *at the server*, never in karpy:

1. **EKS AMI SSM parameters** (``/aws/service/eks/optimized-ami/...``,
   ``/aws/service/bottlerocket/...``): moto has none and refuses ``PutParameter`` on
   ``/aws/`` names, so :func:`seed_public_parameter` writes them into moto's SSM
   backend directly.
2. **The Pricing API**: moto does not implement it. :class:`PricingServer` is a small
   local HTTP handler speaking its JSON protocol (``AWSPriceListService.GetProducts``)
   with prices in the Pricing API's shape.
3. **Capacity errors from CreateFleet**: moto always launches the first override.
   :class:`FleetFaults` patches moto's in-process CreateFleet so that overrides of
   chosen (instance type, zone) pairs are removed and reported in the answer's
   ``Errors`` with ``InsufficientInstanceCapacity``, and overrides in chosen subnets
   with ``InsufficientFreeAddressesInSubnet``, as EC2 does; when none is left the
   fleet launches nothing.
4. **Throttling**: :class:`FleetFaults` can make the next N CreateFleet calls fail with
   ``RequestLimitExceeded`` (HTTP 400), which botocore retries.
5. **Launch-template security groups in fleets**: moto's CreateFleet ignores the
   template's ``SecurityGroupIds`` and its network interfaces' ``Groups`` (it reads
   only an override's ``GroupSet``), so its instances land in the default group. The
   same patch copies the template's groups (those of the interface at device index 0
   when it has interfaces) into each override, as EC2 applies them.
6. **Spot prices**: moto answers ``0.00001`` for every spot price; tests that compare
   prices use on-demand capacity or say so.
7. **What EC2 refuses in a fleet's template and moto accepts**: top-level
   ``SecurityGroupIds`` together with ``NetworkInterfaces``
   (``InvalidParameterCombination``); ``AssociatePublicIpAddress`` or prefixes on an
   ``efa-only`` interface (``InvalidParameterValue``); an ``efa`` or ``efa-only``
   interface on an override's type without EFA, or a ``NetworkCardIndex`` beyond the
   type's network cards (``InvalidParameterCombination``). The patch refuses them.
8. **ClientToken idempotency**: moto ignores CreateFleet's ``ClientToken``. The patch
   answers a repeated token with the first call's answer (launching nothing), and a
   token reused with different parameters with ``IdempotentParameterMismatch``, as EC2
   does. ``FleetFaults.lose_answer_next`` makes the next calls launch and then answer
   ``RequestTimeout`` (an answer lost on the way back), which botocore retries with the
   same token.
9. **Placement groups**: moto implements none. The patch adds ``CreatePlacementGroup``
   and ``DescribePlacementGroups`` (by name or ID, ``state`` filter; an unknown name or
   ID is ``InvalidPlacementGroup.Unknown``, as EC2 answers), and a fleet whose template
   names a ``Placement.GroupId`` that does not exist is refused the same way.
10. **Instance status checks**: moto's DescribeInstanceStatus reports every instance
    ``ok`` and ignores its filters (an ``instance-status.status=impaired`` filter
    returns healthy instances). :class:`InstanceHealth` patches it: instances it marks
    have their instance or system reachability check ``failed`` (``impaired``, with
    ``ImpairedSince``) or carry scheduled events, and the filters Karpenter AWS uses
    (``instance-status.status``, ``system-status.status``, ``event.code``, plus
    ``availability-zone`` and ``instance-state-name``) select as EC2's do; any other
    filter name is refused (``InvalidParameterValue``).
11. **Allocation strategies**: moto accepts any ``AllocationStrategy`` and always
    launches the first override. The patch refuses values EC2 does not know
    (``InvalidParameterValue``) and, for ``prioritized`` (on-demand) and
    ``capacity-optimized-prioritized`` (spot), launches the override with the lowest
    ``Priority`` (unset ranks last), as EC2 does. Price strategies keep moto's first
    override (karpy lists them cheapest first).
13. **Capacity reservations**: moto implements none. The patch adds
    ``DescribeCapacityReservations`` over the reservations a test adds with
    :meth:`FleetFaults.add_capacity_reservation` (by ``CapacityReservationIds``, an
    unknown one ``InvalidCapacityReservationId.NotFound``; filters ``state``,
    ``owner-id``, ``instance-match-criteria``, ``tag:<key>``, ``tag-key``: the ones
    karpy sends; the others EC2 documents are not modelled and are refused, so a new
    one is noticed rather than ignored; ``MaxResults`` together with IDs refused, as
    EC2 does). A fleet whose
    template targets a reservation (``CapacityReservationSpecification``) is checked as
    EC2 checks it: the reservation must exist and be active (else
    ``InvalidCapacityReservationId.NotFound``), each override must name its instance type
    and zone, a capacity block must be launched with the ``capacity-block`` market type
    and target capacity type (``InvalidParameterCombination``); an override into a
    reservation with no instance left is refused with ``ReservationCapacityExceeded``,
    and a target beyond what the reservation has left launches only what it has left
    (the rest reported with that error). The ``capacity-block`` market or target capacity
    type without a block targeted, and a preference other than
    ``capacity-reservations-only`` beside a target, are refused
    (``InvalidParameterCombination``). An untargeted on-demand launch whose template's
    ``CapacityReservationPreference`` is not ``none`` lands in an active open ODCR of its
    type and zone that has room, as EC2 places it (so opting out is tested, not assumed).
    A launch takes one of its ``AvailableInstanceCount``; terminating the instance gives
    it back. DescribeInstances reports such an instance's ``CapacityReservationId`` (and
    ``InstanceLifecycle: capacity-block`` in a block). Every CreateFleet request is kept
    in ``FleetFaults.requests``.
12. **IAM**: moto accepts every call. :func:`moto_server` enforces Karpenter's controller
    policy on every request karpy sends (iam_check.py): what the policy refuses is
    refused as AWS would, and the test fails naming the statements considered.
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
from iam_check import IAMCheck, IAMDeniedError, installed
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models.fleets import FleetsBackend
from moto.ec2.responses import EC2Response
from moto.ec2.responses.fleets import Fleets
from moto.ec2.responses.instances import InstanceResponse
from moto.server import ThreadedMotoServer
from moto.ssm.models import Parameter, ssm_backends

# moto's handlers before any FleetFaults patch (see FleetFaults.installed)
_MOTO_CREATE_FLEET_BACKEND = FleetsBackend.create_fleet
_MOTO_CREATE_FLEET_RESPONSE = Fleets.create_fleet
_MOTO_TERMINATE_INSTANCES = InstanceResponse.terminate_instances

__all__ = [
    "CLUSTER",
    "DISCOVERY",
    "ROLE",
    "SERVICE_CIDR",
    "Account",
    "FleetFaults",
    "InstanceHealth",
    "PricingServer",
    "moto_server",
    "seed_account",
    "seed_public_parameter",
    "use_test_credentials",
]

CLUSTER = "karpy-test"
SERVICE_CIDR = "10.100.0.0/16"
DISCOVERY = {"karpenter.sh/discovery": CLUSTER}
ROLE = f"KarpenterNodeRole-{CLUSTER}"


def use_test_credentials() -> None:
    """Fake credentials for moto (set only where none are set)."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        os.environ.setdefault(key, "testing")


@dataclass(frozen=True)
class Account:
    """What :func:`seed_account` put into moto."""

    url: str
    faults: FleetFaults
    subnets: dict[str, str]  # subnet id -> zone
    security_group: str
    amis: dict[str, str]  # arch (x86_64, arm64) -> AMI id
    #: EKS DescribeCluster of the cluster: the service CIDR and the CA bundle
    service_cidr: str = SERVICE_CIDR
    ca_bundle: str = ""


def seed_account(
    url: str,
    faults: FleetFaults,
    *,
    cluster: str = CLUSTER,
    region: str = "us-east-1",
    k8s_versions: tuple[str, ...] = ("1.31",),
) -> Account:
    """Make moto's account look like an EKS cluster's: the EKS cluster itself (IPv4,
    service CIDR :data:`SERVICE_CIDR`), three subnets and a security group tagged
    ``karpenter.sh/discovery``, the node role, and the EKS AL2023 AMI parameters for
    ``k8s_versions`` pointing at moto's own AMIs."""
    kw = {"region_name": region, "endpoint_url": url}
    ec2 = boto3.client("ec2", **kw)
    subnets = {s["SubnetId"]: s["AvailabilityZone"] for s in ec2.describe_subnets()["Subnets"]}
    chosen = dict(sorted(subnets.items(), key=lambda kv: kv[1])[:3])
    tags = [{"Key": "karpenter.sh/discovery", "Value": cluster}]
    ec2.create_tags(Resources=list(chosen), Tags=tags)
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    # moto's backends live in the process, shared by every server it starts: a second
    # seeding in the same test session (the e2e test, then the unit tests) finds the
    # first one's objects, so seeding reuses them.
    existing = ec2.describe_security_groups(
        Filters=[{"Name": "group-name", "Values": [f"{cluster}-nodes"]}]
    )["SecurityGroups"]
    if existing:
        group = existing[0]["GroupId"]
    else:
        group = ec2.create_security_group(
            GroupName=f"{cluster}-nodes", Description="karpy test nodes", VpcId=vpc
        )["GroupId"]
    ec2.create_tags(Resources=[group], Tags=tags)
    iam = boto3.client("iam", **kw)
    with suppress(iam.exceptions.EntityAlreadyExistsException):
        iam.create_role(RoleName=f"KarpenterNodeRole-{cluster}", AssumeRolePolicyDocument="{}")
    eks = boto3.client("eks", **kw)
    with suppress(eks.exceptions.ResourceInUseException):
        eks.create_cluster(
            name=cluster,
            roleArn=f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/{cluster}-cluster",
            resourcesVpcConfig={"subnetIds": list(chosen), "securityGroupIds": [group]},
            kubernetesNetworkConfig={"serviceIpv4Cidr": SERVICE_CIDR, "ipFamily": "ipv4"},
        )
    ca_bundle = eks.describe_cluster(name=cluster)["cluster"]["certificateAuthority"]["data"]
    amis = {}
    for arch in ("x86_64", "arm64"):
        image = ec2.describe_images(
            Owners=["amazon"], Filters=[{"Name": "architecture", "Values": [arch]}]
        )["Images"][0]["ImageId"]
        amis[arch] = image
        for version in k8s_versions:
            seed_public_parameter(
                region,
                f"/aws/service/eks/optimized-ami/{version}/amazon-linux-2023/{arch}/standard/"
                "recommended/image_id",
                image,
            )
    return Account(
        url=url,
        faults=faults,
        subnets=chosen,
        security_group=group,
        amis=amis,
        ca_bundle=ca_bundle,
    )


@contextmanager
def moto_server(*, iam: IAMCheck | None = None) -> Iterator[str]:
    """Run moto's server on 127.0.0.1 (free port); yield its URL.

    ``iam`` (by default Karpenter's controller policy for the test cluster) is enforced
    on karpy's requests; calls it refused that nobody expected raise IAMDeniedError when the
    server stops (and replace the error the block raised, which they likely caused)."""
    check = iam or IAMCheck.karpenter(cluster=CLUSTER, region="us-east-1")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        with installed(check, port=int(port)):
            yield f"http://{host}:{port}"
    except BaseException as exc:
        denials = check.take_denials()
        if denials:
            raise IAMDeniedError(denials) from exc
        raise
    finally:
        server.stop()
    check.raise_for_denials()


def seed_public_parameter(region: str, name: str, value: str) -> None:
    """Put an AWS public SSM parameter (``/aws/service/...``) into moto's backend."""
    backend = ssm_backends[DEFAULT_ACCOUNT_ID][region]
    backend._parameters[name].append(
        Parameter(
            account_id=DEFAULT_ACCOUNT_ID,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=datetime.datetime.now(datetime.UTC),
            version=len(backend._parameters[name]) + 1,
            data_type="text",
        )
    )


@dataclass
class FleetFaults:
    """Faults injected into moto's CreateFleet (gap 3 and 4 above)."""

    #: (instance type, zone) pairs with no capacity; zone "*" means every zone
    no_capacity: set[tuple[str, str]] = field(default_factory=set)
    #: subnets with no free address (InsufficientFreeAddressesInSubnet)
    full_subnets: set[str] = field(default_factory=set)
    throttle_next: int = 0
    calls: int = 0
    #: ClientToken -> (the call's parameters, its answer)
    tokens: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    #: calls answered from ``tokens`` (a repeated ClientToken)
    replayed: int = 0
    #: calls still to launch and then fail with RequestTimeout (their answer lost)
    lose_answer_next: int = 0
    #: placement group name -> its description (gap 9)
    placement_groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: seconds CreateFleet waits, after launching its instances, before it answers (a
    #: slow API answer: the window in which a client killed has instances it never saw)
    answer_delay: float = 0.0
    #: answers that launched instances and were then held back by ``answer_delay``
    held: int = 0
    #: capacity reservation ID -> its description (gap 13)
    capacity_reservations: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: instance ID -> the capacity reservation it launched into
    reserved_instances: dict[str, str] = field(default_factory=dict)
    #: every CreateFleet request moto answered, as moto parsed it (newest last)
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: the instances those held answers launched, in order
    held_instances: list[str] = field(default_factory=list)
    _local: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_capacity_reservation(
        self,
        instance_type: str,
        zone: str,
        *,
        count: int = 1,
        tags: dict[str, str] | None = None,
        match: str = "targeted",
        reservation_type: str = "default",
        end: datetime.datetime | None = None,
        owner: str = DEFAULT_ACCOUNT_ID,
        rid: str = "",
    ) -> str:
        """Add an active capacity reservation (gap 13); returns its ID (``rid``, or a
        new one)."""
        with self._lock:
            rid = rid or f"cr-{len(self.capacity_reservations) + 1:017x}"
            self.capacity_reservations[rid] = {
                "CapacityReservationId": rid,
                "OwnerId": owner,
                "InstanceType": instance_type,
                "InstancePlatform": "Linux/UNIX",
                "AvailabilityZone": zone,
                "Tenancy": "default",
                "TotalInstanceCount": count,
                "AvailableInstanceCount": count,
                "State": "active",
                "InstanceMatchCriteria": match,
                "ReservationType": reservation_type,
                "EndDateType": "limited" if end else "unlimited",
                **({"EndDate": end} if end else {}),
                "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()],
            }
        return rid

    def _reservation_target(self, data: dict[str, Any]) -> dict[str, Any] | None:
        spec = data.get("CapacityReservationSpecification") or {}
        rid = (spec.get("CapacityReservationTarget") or {}).get("CapacityReservationId")
        if not rid:
            return None
        found = self.capacity_reservations.get(rid)
        if found is None or found["State"] != "active":
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation '{rid}' does not exist or is not active.",
            )
        return found

    def _refused(self, instance_type: str, zone: str) -> bool:
        return (instance_type, zone) in self.no_capacity or (instance_type, "*") in self.no_capacity

    @contextmanager
    def installed(self) -> Iterator[FleetFaults]:
        """Patch moto's CreateFleet while the context is open."""
        # moto's own, not whatever is installed now: an install inside another (a
        # cluster test's moto server under the session's) must not run the outer one's
        # checks, which know nothing of this one's reservations
        original_backend = _MOTO_CREATE_FLEET_BACKEND
        original_response = _MOTO_CREATE_FLEET_RESPONSE
        original_terminate = _MOTO_TERMINATE_INSTANCES
        faults = self

        def backend(self_: Any, *args: Any, **kwargs: Any) -> Any:
            with faults._lock:
                faults.requests.append(copy.deepcopy(kwargs))
            configs = kwargs["launch_template_configs"] = _by_allocation_strategy(
                kwargs.get("on_demand_options") or {},
                kwargs.get("spot_options") or {},
                kwargs["launch_template_configs"],
            )
            for config in configs:
                spec = config.get("LaunchTemplateSpecification", {})
                template = (
                    self_.get_launch_template_by_name(spec["LaunchTemplateName"])
                    if spec.get("LaunchTemplateName")
                    else self_.get_launch_template(spec["LaunchTemplateId"])
                )
                data = template.latest_version().data
                _refuse_invalid_interfaces(self_, data, config.get("Overrides", []))
                reservation = faults._reservation_target(data)
                if reservation is not None:
                    _refuse_invalid_reservation_launch(
                        reservation, data, config.get("Overrides", []), kwargs
                    )
                    config["_reservation"] = reservation["CapacityReservationId"]
                else:
                    _refuse_untargeted_capacity_block(data, kwargs)
                    config["_opts_out"] = (
                        (data.get("CapacityReservationSpecification") or {}).get(
                            "CapacityReservationPreference"
                        )
                        == "none"
                    )
                group_id = (data.get("Placement") or {}).get("GroupId")
                if group_id and not any(
                    g["GroupId"] == group_id for g in faults.placement_groups.values()
                ):
                    raise EC2ClientError(
                        "InvalidPlacementGroup.Unknown",
                        f"The Placement Group '{group_id}' is unknown.",
                    )
                interfaces = data.get("NetworkInterfaces") or []
                primary = [i for i in interfaces if int(i.get("DeviceIndex", 0)) == 0]
                groups = (
                    (primary[0].get("Groups") or primary[0].get("SecurityGroupIds") or [])
                    if primary
                    else data.get("SecurityGroupIds") or []
                )
                for override in config.get("Overrides", []):
                    override.setdefault("GroupSet", list(groups))
            errors: list[dict[str, Any]] = []
            kept_configs = []
            reserved: dict[int, str] = {}  # index in kept_configs -> its reservation
            opts_out: dict[int, bool] = {}  # index in kept_configs -> preference "none"
            for config in configs:
                kept = []
                rid = config.pop("_reservation", None)
                none = config.pop("_opts_out", False)
                for override in config.get("Overrides", []):
                    zone = override.get("AvailabilityZone", "")
                    full = override.get("SubnetId", "") in faults.full_subnets
                    if rid and faults.capacity_reservations[rid]["AvailableInstanceCount"] < 1:
                        errors.append(
                            {
                                "LaunchTemplateAndOverrides": {
                                    "LaunchTemplateSpecification": config[
                                        "LaunchTemplateSpecification"
                                    ],
                                    "Overrides": override,
                                },
                                "Lifecycle": "on-demand",
                                "ErrorCode": "ReservationCapacityExceeded",
                                "ErrorMessage": "Insufficient capacity in the capacity "
                                f"reservation {rid}.",
                            }
                        )
                    elif full or faults._refused(override.get("InstanceType", ""), zone):
                        errors.append(
                            {
                                "LaunchTemplateAndOverrides": {
                                    "LaunchTemplateSpecification": config[
                                        "LaunchTemplateSpecification"
                                    ],
                                    "Overrides": override,
                                },
                                "Lifecycle": kwargs["target_capacity_specification"].get(
                                    "DefaultTargetCapacityType", "on-demand"
                                ),
                                "ErrorCode": (
                                    "InsufficientFreeAddressesInSubnet"
                                    if full
                                    else "InsufficientInstanceCapacity"
                                ),
                                "ErrorMessage": (
                                    f"There are not enough free addresses in subnet "
                                    f"'{override.get('SubnetId')}' to satisfy the requested "
                                    "number of instances."
                                    if full
                                    else "We currently do not have sufficient "
                                    f"{override.get('InstanceType')} capacity in {zone}."
                                ),
                            }
                        )
                    else:
                        kept.append(override)
                if kept:
                    kept_configs.append({**config, "Overrides": kept})
                    opts_out[len(kept_configs) - 1] = none
                    if rid:
                        reserved[len(kept_configs) - 1] = rid
            faults._local.errors = errors
            faults._local.empty = not kept_configs
            if not kept_configs:
                return None
            kwargs["launch_template_configs"] = kept_configs
            target = dict(kwargs["target_capacity_specification"])
            if target.get("DefaultTargetCapacityType") == "capacity-block":
                # moto knows on-demand and spot only; a block launches on-demand
                target["DefaultTargetCapacityType"] = "on-demand"
            first = reserved.get(0)  # moto launches from the first config's first override
            if first is not None:
                # EC2 launches no more into a reservation than it has left; the rest of
                # the target is reported as an error
                left = int(faults.capacity_reservations[first]["AvailableInstanceCount"])
                wanted = int(target.get("TotalTargetCapacity", 1))
                if wanted > left:
                    target["TotalTargetCapacity"] = left
                    config = kept_configs[0]
                    errors.append(
                        {
                            "LaunchTemplateAndOverrides": {
                                "LaunchTemplateSpecification": config[
                                    "LaunchTemplateSpecification"
                                ],
                                "Overrides": config["Overrides"][0],
                            },
                            "Lifecycle": "on-demand",
                            "ErrorCode": "ReservationCapacityExceeded",
                            "ErrorMessage": "Insufficient capacity in the capacity "
                            f"reservation {first}.",
                        }
                    )
            kwargs["target_capacity_specification"] = target
            fleet = original_backend(self_, *args, **kwargs)
            rid = first
            if rid is None and fleet is not None and not opts_out.get(0, False):
                # EC2 places an untargeted on-demand launch whose preference is open (or
                # unset) into an active open ODCR of its type and zone that has room
                _absorb_into_open_reservations(faults, fleet)
            if rid is not None and fleet is not None:
                with faults._lock:
                    reservation = faults.capacity_reservations[rid]
                    for item in fleet.on_demand_instances:
                        reservation["AvailableInstanceCount"] -= 1
                        faults.reserved_instances[str(item["instance"].id)] = rid
                        # DescribeInstances reports the reservation (moto's serializer
                        # reads the shape's member names off the instance)
                        item["instance"].CapacityReservationId = rid
                        if reservation["ReservationType"] == "capacity-block":
                            item["instance"].lifecycle = "capacity-block"
            return fleet

        def response(self_: Any) -> Any:
            with faults._lock:
                faults.calls += 1
                if faults.throttle_next > 0:
                    faults.throttle_next -= 1
                    raise EC2ClientError("RequestLimitExceeded", "Request limit exceeded.")
            token = self_._get_param("ClientToken")
            params = json.dumps(
                {k: v for k, v in self_.querystring.items() if k != "ClientToken"},
                sort_keys=True,
                default=str,
            )
            if token:
                with faults._lock:
                    seen = faults.tokens.get(token)
                if seen is not None:
                    if seen[0] != params:
                        raise EC2ClientError(
                            "IdempotentParameterMismatch",
                            f"Client token {token} was used with different parameters.",
                        )
                    faults.replayed += 1
                    return ActionResult(seen[1])
            faults._local.errors = []
            faults._local.empty = False
            try:
                result = original_response(self_)
            except AttributeError:
                # the backend launched nothing (every override refused)
                if not faults._local.empty:
                    raise
                result = ActionResult({"FleetId": "fleet-00000000-karpy-ice", "Instances": []})
            payload = result.result
            assert isinstance(payload, dict)
            if faults._local.errors:
                payload["Errors"] = faults._local.errors
            if faults._local.empty:
                payload["Instances"] = []
            if token:
                with faults._lock:
                    faults.tokens[token] = (params, payload)
                    lost = faults.lose_answer_next > 0
                    faults.lose_answer_next -= int(lost)
                if lost:
                    raise EC2ClientError("RequestTimeout", "The request timed out.")
            delay = faults.answer_delay
            if delay > 0 and payload.get("Instances"):
                with faults._lock:
                    faults.held += 1
                    faults.held_instances += [
                        str(i) for launched in payload["Instances"]
                        for i in launched.get("InstanceIds") or []
                    ]
                time.sleep(delay)  # this request's server thread only
            return result

        def terminate_instances(self_: Any) -> Any:
            result = original_terminate(self_)
            with faults._lock:
                for iid in self_._get_param("InstanceIds") or []:
                    rid = faults.reserved_instances.pop(iid, None)
                    if rid is not None:
                        faults.capacity_reservations[rid]["AvailableInstanceCount"] += 1
            return result

        def describe_capacity_reservations(self_: Any) -> Any:
            ids = self_._get_param("CapacityReservationIds") or []
            if ids and self_._get_param("MaxResults"):
                raise EC2ClientError(
                    "InvalidParameterCombination",
                    "The parameter CapacityReservationIds cannot be used with MaxResults",
                )
            with faults._lock:
                found = [dict(r) for r in faults.capacity_reservations.values()]
            for rid in ids:
                if not any(r["CapacityReservationId"] == rid for r in found):
                    raise EC2ClientError(
                        "InvalidCapacityReservationId.NotFound",
                        f"The capacity reservation ID '{rid}' does not exist.",
                    )
            if ids:
                found = [r for r in found if r["CapacityReservationId"] in ids]
            for name, values in self_._filters_from_querystring().items():
                found = [r for r in found if set(_reservation_field(r, name)) & set(values)]
            return ActionResult({"CapacityReservations": found})

        def create_placement_group(self_: Any) -> Any:
            name = self_._get_param("GroupName")
            with faults._lock:
                if name in faults.placement_groups:
                    raise EC2ClientError(
                        "InvalidPlacementGroup.Duplicate",
                        f"The Placement Group '{name}' already exists.",
                    )
                group = {
                    "GroupName": name,
                    "GroupId": f"pg-{len(faults.placement_groups) + 1:017x}",
                    "Strategy": self_._get_param("Strategy") or "cluster",
                    "State": "available",
                    "PartitionCount": int(self_._get_param("PartitionCount") or 0),
                }
                faults.placement_groups[name] = group
            return ActionResult({"PlacementGroup": group})

        def describe_placement_groups(self_: Any) -> Any:
            names = self_._get_param("GroupNames") or []
            ids = self_._get_param("GroupIds") or []
            groups = list(faults.placement_groups.values())
            for wanted, key in ((names, "GroupName"), (ids, "GroupId")):
                for value in wanted:
                    if not any(g[key] == value for g in groups):
                        raise EC2ClientError(
                            "InvalidPlacementGroup.Unknown",
                            f"The Placement Group '{value}' is unknown.",
                        )
                if wanted:
                    groups = [g for g in groups if g[key] in wanted]
            for f in self_._get_param("Filters") or []:
                if f.get("Name") == "state":
                    groups = [g for g in groups if g["State"] in f.get("Values", [])]
            return ActionResult({"PlacementGroups": groups})

        patches: list[tuple[type, str, Any]] = [
            (InstanceResponse, "terminate_instances", terminate_instances),
            (EC2Response, "describe_capacity_reservations", describe_capacity_reservations),
            (FleetsBackend, "create_fleet", backend),
            (Fleets, "create_fleet", response),
            (EC2Response, "create_placement_group", create_placement_group),
            (EC2Response, "describe_placement_groups", describe_placement_groups),
        ]
        # What each class had of its own before, restored exactly on exit, so an install
        # inside another (a cluster test's own moto server under the session's) leaves
        # the outer one's patches in place.
        missing = object()
        saved = [(cls, name, vars(cls).get(name, missing)) for cls, name, _ in patches]
        for cls, name, patch in patches:
            setattr(cls, name, patch)
        try:
            yield self
        finally:
            for cls, name, before in reversed(saved):
                if before is missing:
                    delattr(cls, name)
                else:
                    setattr(cls, name, before)


def _reservation_field(reservation: dict[str, Any], name: str) -> list[str]:
    """The values a DescribeCapacityReservations filter ``name`` compares."""
    tags = {t["Key"]: t["Value"] for t in reservation.get("Tags", [])}
    if name.startswith("tag:"):
        key = name[4:]
        return [tags[key]] if key in tags else []
    fields = {
        "tag-key": list(tags),
        "state": [reservation["State"]],
        "owner-id": [reservation["OwnerId"]],
        "instance-match-criteria": [reservation["InstanceMatchCriteria"]],
        "instance-type": [reservation["InstanceType"]],
        "availability-zone": [reservation["AvailabilityZone"]],
    }
    if name not in fields:
        raise EC2ClientError("InvalidParameterValue", f"The filter '{name}' is invalid")
    return fields[name]


def _refuse_invalid_reservation_launch(
    reservation: dict[str, Any],
    data: dict[str, Any],
    overrides: list[dict[str, Any]],
    fleet: dict[str, Any],
) -> None:
    """What EC2 refuses in a fleet targeting ``reservation`` (gap 13)."""
    rid = reservation["CapacityReservationId"]
    for override in overrides:
        if override.get("InstanceType") != reservation["InstanceType"] or override.get(
            "AvailabilityZone", reservation["AvailabilityZone"]
        ) != reservation["AvailabilityZone"]:
            raise EC2ClientError(
                "InvalidParameterCombination",
                f"The instance type {override.get('InstanceType')} in "
                f"{override.get('AvailabilityZone')} does not match capacity reservation "
                f"{rid} ({reservation['InstanceType']} in {reservation['AvailabilityZone']}).",
            )
    preference = (data.get("CapacityReservationSpecification") or {}).get(
        "CapacityReservationPreference"
    )
    if preference not in (None, "capacity-reservations-only"):
        raise EC2ClientError(
            "InvalidParameterCombination",
            f"CapacityReservationPreference {preference!r} cannot be combined with a "
            "CapacityReservationTarget.",
        )
    block = reservation["ReservationType"] == "capacity-block"
    market = (data.get("InstanceMarketOptions") or {}).get("MarketType")
    target = fleet["target_capacity_specification"].get("DefaultTargetCapacityType")
    if block != (market == "capacity-block") or block != (target == "capacity-block"):
        raise EC2ClientError(
            "InvalidParameterCombination",
            f"Capacity reservation {rid} is a {reservation['ReservationType']} reservation; "
            f"the launch asks for market type {market!r} and target capacity type {target!r}.",
        )


def _absorb_into_open_reservations(faults: FleetFaults, fleet: Any) -> None:
    with faults._lock:
        for item in fleet.on_demand_instances:
            instance = item["instance"]
            zone = instance.availability_zone
            for rid, reservation in faults.capacity_reservations.items():
                if (
                    reservation["InstanceMatchCriteria"] == "open"
                    and reservation["State"] == "active"
                    and reservation["ReservationType"] == "default"
                    and reservation["InstanceType"] == instance.instance_type
                    and reservation["AvailabilityZone"] == zone
                    and int(reservation["AvailableInstanceCount"]) > 0
                ):
                    reservation["AvailableInstanceCount"] -= 1
                    faults.reserved_instances[str(instance.id)] = rid
                    instance.CapacityReservationId = rid
                    break


def _refuse_untargeted_capacity_block(data: dict[str, Any], fleet: dict[str, Any]) -> None:
    """EC2 launches the capacity-block market type (or target capacity type) only into a
    capacity block the template targets; and a reservation preference other than
    ``capacity-reservations-only`` takes no target (checked where a target is set)."""
    market = (data.get("InstanceMarketOptions") or {}).get("MarketType")
    target = fleet["target_capacity_specification"].get("DefaultTargetCapacityType")
    if "capacity-block" in (market, target):
        raise EC2ClientError(
            "InvalidParameterCombination",
            f"Market type {market!r} and target capacity type {target!r} need a capacity "
            "block targeted by the launch template's CapacityReservationSpecification.",
        )


_ON_DEMAND_STRATEGIES = {"lowest-price", "prioritized"}
_SPOT_STRATEGIES = {
    "lowest-price",
    "diversified",
    "capacity-optimized",
    "capacity-optimized-prioritized",
    "price-capacity-optimized",
}


def _by_allocation_strategy(
    on_demand: dict[str, Any], spot: dict[str, Any], configs: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``configs`` refused when a strategy is one EC2 does not know, or ordered so that
    moto's first override is the one a prioritized strategy launches (gap 11)."""
    prioritized = False
    for options, known in ((on_demand, _ON_DEMAND_STRATEGIES), (spot, _SPOT_STRATEGIES)):
        strategy = options.get("AllocationStrategy")
        if strategy is not None and strategy not in known:
            raise EC2ClientError(
                "InvalidParameterValue",
                f"The allocation strategy '{strategy}' is not valid.",
            )
        prioritized = prioritized or strategy in ("prioritized", "capacity-optimized-prioritized")
    if not prioritized:
        return configs

    def priority(override: dict[str, Any]) -> float:
        value = override.get("Priority")
        return float("inf") if value is None else float(value)

    ranked = [
        {**c, "Overrides": sorted(c.get("Overrides", []), key=priority)} for c in configs
    ]
    return sorted(
        ranked, key=lambda c: min(map(priority, c["Overrides"]), default=float("inf"))
    )


def _refuse_invalid_interfaces(
    backend: Any, data: dict[str, Any], overrides: list[dict[str, Any]]
) -> None:
    """Refuse a template EC2 would refuse in a fleet (gap 7 in the module doc)."""
    interfaces = data.get("NetworkInterfaces") or []
    if not interfaces:
        return
    if data.get("SecurityGroupIds") or data.get("SecurityGroups"):
        raise EC2ClientError(
            "InvalidParameterCombination",
            "Network interfaces and an instance-level security groups may not be specified "
            "on the same request",
        )
    for nic in interfaces:
        kind = nic.get("InterfaceType", "interface")
        if kind == "efa-only" and (
            "AssociatePublicIpAddress" in nic or nic.get("Ipv4PrefixCount") is not None
        ):
            raise EC2ClientError(
                "InvalidParameterValue",
                "AssociatePublicIpAddress and prefixes are not supported on efa-only interfaces",
            )
    for override in overrides:
        name = override.get("InstanceType", "")
        info = backend.describe_instance_types([name])[0] if name else None
        if info is None:
            continue
        network = info.get("NetworkInfo", {}) if isinstance(info, dict) else {}
        cards = int(network.get("MaximumNetworkCards", 1) or 1)
        efa = bool(network.get("EfaSupported"))
        for nic in interfaces:
            if nic.get("InterfaceType") in ("efa", "efa-only") and not efa:
                raise EC2ClientError(
                    "InvalidParameterCombination",
                    f"EFA interfaces are not supported on {name}",
                )
            if int(nic.get("NetworkCardIndex", 0) or 0) >= cards:
                raise EC2ClientError(
                    "InvalidParameterCombination",
                    f"{name} has {cards} network card(s); NetworkCardIndex "
                    f"{nic.get('NetworkCardIndex')} is not valid",
                )


def price_list_item(instance_type: str, region: str, price: float) -> str:
    """One PriceList entry in the Pricing API's shape."""
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "attributes": {"instanceType": instance_type, "regionCode": region},
            },
            "terms": {
                "OnDemand": {
                    "TERM.1": {
                        "priceDimensions": {
                            "TERM.1.DIM": {"unit": "Hrs", "pricePerUnit": {"USD": f"{price:.6f}"}}
                        }
                    }
                }
            },
        }
    )


class PricingServer:
    """A local Pricing API (gap 2): answers GetProducts with ``prices`` (one page per
    ``page_size`` items, with NextToken), counting requests."""

    def __init__(self, prices: dict[str, float], *, region: str, page_size: int = 50) -> None:
        self.prices = prices
        self.region = region
        self.page_size = page_size
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                outer.requests.append(body)
                target = self.headers.get("X-Amz-Target", "")
                if not target.endswith("GetProducts"):
                    self.send_response(400)
                    self.end_headers()
                    return
                items = [
                    price_list_item(name, outer.region, price)
                    for name, price in sorted(outer.prices.items())
                ]
                start = int(body.get("NextToken") or 0)
                page = items[start : start + outer.page_size]
                answer: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": page}
                if start + outer.page_size < len(items):
                    answer["NextToken"] = str(start + outer.page_size)
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> PricingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


_STATUS_FILTERS = frozenset(
    {
        "instance-status.status",
        "system-status.status",
        "event.code",
        "availability-zone",
        "instance-state-name",
    }
)


@dataclass
class InstanceHealth:
    """Failed status checks and scheduled events reported by moto's
    DescribeInstanceStatus (gap 10 above)."""

    #: instance ID -> {"instance" or "system": when its reachability check started failing}
    impaired: dict[str, dict[str, datetime.datetime]] = field(default_factory=dict)
    #: instance ID -> scheduled event codes (``system-reboot``, ``instance-retirement``, ...)
    events: dict[str, list[str]] = field(default_factory=dict)

    def _check(self, instance_id: str, which: str) -> dict[str, Any]:
        since = self.impaired.get(instance_id, {}).get(which)
        if since is None:
            return {"Status": "ok", "Details": [{"Name": "reachability", "Status": "passed"}]}
        return {
            "Status": "impaired",
            "Details": [{"Name": "reachability", "Status": "failed", "ImpairedSince": since}],
        }

    def _status(self, instance: Any) -> dict[str, Any]:
        status: dict[str, Any] = {
            "InstanceId": instance.id,
            "AvailabilityZone": instance.placement,
            "InstanceState": {"Code": instance._state.code, "Name": instance._state.name},
            "InstanceStatus": self._check(instance.id, "instance"),
            "SystemStatus": self._check(instance.id, "system"),
        }
        now = datetime.datetime.now(datetime.UTC)
        events = [
            {
                "Code": code,
                "Description": f"The instance is scheduled for {code}",
                "NotBefore": now + datetime.timedelta(days=7),
            }
            for code in self.events.get(instance.id, [])
        ]
        if events:
            status["Events"] = events
        return status

    @contextmanager
    def installed(self) -> Iterator[InstanceHealth]:
        """Patch moto's DescribeInstanceStatus while the context is open."""
        original = InstanceResponse.describe_instance_status
        health = self

        def describe(self_: Any) -> Any:
            filters = self_._filters_from_querystring()
            for name in filters:
                if name not in _STATUS_FILTERS:
                    raise EC2ClientError(
                        "InvalidParameterValue", f"The filter '{name}' is invalid"
                    )
            instances = self_.ec2_backend.describe_instance_status(
                self_._get_param("InstanceIds", []),
                self_._get_bool_param("IncludeAllInstances", False),
                None,
            )
            statuses = [health._status(i) for i in instances]
            fields = {
                "instance-status.status": lambda s: [s["InstanceStatus"]["Status"]],
                "system-status.status": lambda s: [s["SystemStatus"]["Status"]],
                "event.code": lambda s: [e["Code"] for e in s.get("Events", [])],
                "availability-zone": lambda s: [s["AvailabilityZone"]],
                "instance-state-name": lambda s: [s["InstanceState"]["Name"]],
            }
            # names are ANDed, the values of one name ORed, as EC2 does
            statuses = [
                s for s in statuses
                if all(set(fields[n](s)) & set(values) for n, values in filters.items())
            ]
            return ActionResult({"InstanceStatuses": statuses})

        InstanceResponse.describe_instance_status = describe  # type: ignore[method-assign]
        try:
            yield self
        finally:
            InstanceResponse.describe_instance_status = original  # type: ignore[method-assign]
