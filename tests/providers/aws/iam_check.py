"""Karpenter's controller IAM policy enforced at the moto server, on every request karpy
sends: the test double refuses what AWS would refuse a controller holding that policy.

The hook wraps moto's ``BaseResponse.call_action``, through which every request of the
in-process moto server passes once moto has read it. Requests whose User-Agent carries
``karpy`` (karpy's botocore config, ``user_agent_extra``) are checked; the tests' own
seeding and the fake kubelet's calls are not. Each call becomes one or more
authorizations (iam_eval.Request), as AWS's service authorization reference describes:

* EC2 ``Describe*``: the action on ``*`` with ``aws:RequestedRegion``;
* ``CreateLaunchTemplate``: the new launch template with the request's tags
  (``aws:RequestTag/<key>``, ``aws:TagKeys``), and ``ec2:CreateTags`` on it with
  ``ec2:CreateAction`` when it is tagged on creation;
* ``CreateFleet`` / ``RunInstances``: every resource the launch touches. Existing ones
  carry their tags from moto's state (``aws:ResourceTag/<key>``): each launch template,
  image, subnet, security group, snapshot, placement group and capacity reservation
  (a template's ``CapacityReservationTarget``). Created ones carry the
  tags the request *and the launch template's* ``TagSpecifications`` give their resource
  type: instance, volume, network interface, fleet (CreateFleet), spot request (spot);
  each tagged one also needs ``ec2:CreateTags`` with ``ec2:CreateAction``. A launch
  template naming an instance profile passes its role: ``iam:PassRole`` with
  ``iam:PassedToService=ec2.amazonaws.com``;
* ``CreateTags``, ``TerminateInstances``, ``DeleteLaunchTemplate``: each named resource
  with its tags from moto;
* IAM instance profiles: the profile's ARN with its tags from moto (request tags for
  ``CreateInstanceProfile``/``TagInstanceProfile``); ``AddRoleToInstanceProfile`` also
  passes the role;
* SSM parameters (public ``/aws/service/...`` ones have no account in their ARN), SQS
  queues, the EKS cluster: their ARNs; ``sts:GetCallerIdentity`` needs no permission;
  any other call: its action on ``*``.

A refused call gets AWS's answer (EC2 ``UnauthorizedOperation``, HTTP 403, else
``AccessDenied``/``AccessDeniedException``) and is recorded as a :class:`Denial` that names
every statement considered and why it did not apply; the test fails on it unless it
expected it (:meth:`IAMCheck.expecting_denials`). An EC2 call with ``DryRun`` is answered
here: ``UnauthorizedOperation`` if denied, else ``DryRunOperation`` (HTTP 412), as EC2 does.

Not modelled: the Pricing API (served by PricingServer, not moto; the policy allows
``pricing:GetProducts`` on ``*`` unconditionally), resource-based policies, SCPs.
"""

from __future__ import annotations

import threading
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from iam_eval import Decision, Request, evaluate
from iam_policy import controller_policy
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.common_types import TYPE_RESPONSE
from moto.core.exceptions import ServiceException
from moto.core.parse import PROTOCOL_PARSERS
from moto.core.request import determine_request_protocol
from moto.core.responses import ActionResult, BaseResponse
from moto.core.utils import get_service_model

__all__ = ["KARPY_USER_AGENT", "Denial", "IAMCheck", "IAMDeniedError", "installed"]

#: the token karpy's botocore clients add to their User-Agent (karpy_aws._clients)
KARPY_USER_AGENT = "karpy"

_EC2_ID_PREFIXES = {
    "i": "instance",
    "lt": "launch-template",
    "vol": "volume",
    "eni": "network-interface",
    "fleet": "fleet",
    "sir": "spot-instances-request",
    "sg": "security-group",
    "subnet": "subnet",
    "ami": "image",
    "snap": "snapshot",
}
_LAUNCHES = ("CreateFleet", "RunInstances")


@dataclass(frozen=True)
class Denial:
    """A call the policy refused, with the decision on each authorization it needed."""

    call: str  # service:Operation
    decisions: tuple[Decision, ...]

    def explain(self) -> str:
        denied = [d for d in self.decisions if not d.allowed]
        return f"{self.call} denied by Karpenter's controller policy:\n" + "\n".join(
            d.explain() for d in denied
        )


class IAMDeniedError(AssertionError):
    """Raised (in the test) for calls the policy refused that the test did not expect."""

    def __init__(self, denials: Sequence[Denial]) -> None:
        super().__init__("\n\n".join(d.explain() for d in denials))
        self.denials = list(denials)


class IAMCheck:
    """The policy in force at one moto server, and what it refused."""

    def __init__(
        self,
        statements: Sequence[Mapping[str, Any]],
        *,
        account: str = DEFAULT_ACCOUNT_ID,
        partition: str = "aws",
    ) -> None:
        self.statements = list(statements)
        self.account = account
        self.partition = partition
        #: call (service:Operation) -> how many calls the policy allowed
        self.allowed: Counter[str] = Counter()
        self._denials: list[Denial] = []
        self._expected: list[list[Denial]] = []
        self._lock = threading.Lock()

    @classmethod
    def karpenter(cls, *, cluster: str, region: str) -> IAMCheck:
        """The check for Karpenter's controller policy deployed for ``cluster``."""
        return cls(controller_policy(cluster=cluster, region=region, account=DEFAULT_ACCOUNT_ID))

    # -- what tests use ----------------------------------------------------------------

    @contextmanager
    def expecting_denials(self) -> Iterator[list[Denial]]:
        """Collect the denials of the block into the yielded list instead of failing."""
        caught: list[Denial] = []
        with self._lock:
            self._expected.append(caught)
        try:
            yield caught
        finally:
            with self._lock:
                self._expected.remove(caught)

    @contextmanager
    def policy(self, statements: Sequence[Mapping[str, Any]]) -> Iterator[None]:
        """Put ``statements`` in force for the block (a narrower or wider grant)."""
        saved = self.statements
        self.statements = list(statements)
        try:
            yield
        finally:
            self.statements = saved

    def take_denials(self) -> list[Denial]:
        """The unexpected denials so far (forgotten once taken)."""
        with self._lock:
            out, self._denials = self._denials, []
        return out

    def raise_for_denials(self) -> None:
        """Raise IAMDeniedError if some call was refused unexpectedly."""
        denials = self.take_denials()
        if denials:
            raise IAMDeniedError(denials)

    # -- the hook ----------------------------------------------------------------------

    def judge(self, response: BaseResponse) -> TYPE_RESPONSE | None:
        """The answer to send instead of moto's (a refusal, or EC2's DryRunOperation), or
        None to let moto answer."""
        service = response.boto3_service_name
        operation = response._get_action()
        params = _parsed_params(response)
        requests = _Authorizations(self, service, response.region).of(operation, params)
        decisions = tuple(evaluate(self.statements, r) for r in requests)
        call = f"{service}:{operation}"
        if all(d.allowed for d in decisions):
            with self._lock:
                self.allowed[call] += 1
            if service == "ec2" and params.get("DryRun"):
                return _error(
                    response,
                    "DryRunOperation",
                    "Request would have succeeded, but DryRun flag is set.",
                    412,
                )
            return None
        denial = Denial(call=call, decisions=decisions)
        with self._lock:
            (self._expected[-1] if self._expected else self._denials).append(denial)
        first = next(d for d in decisions if not d.allowed)
        message = (
            f"User: arn:{self.partition}:sts::{self.account}:assumed-role/KarpenterController/"
            f"karpy is not authorized to perform: {first.request.action} on resource: "
            f"{first.request.resource} because no identity-based policy allows the "
            f"{first.request.action} action"
        )
        if service == "ec2":
            return _error(
                response,
                "UnauthorizedOperation",
                f"You are not authorized to perform this operation. {message}",
                403,
            )
        code = "AccessDenied" if service in ("iam", "sqs", "sts") else "AccessDeniedException"
        return _error(response, code, message, 403)


def _parsed_params(response: BaseResponse) -> dict[str, Any]:
    """The call's input in botocore's shape, read with moto's own protocol parsers."""
    request = response.normalized_request
    service_model = get_service_model(response.boto3_service_name)
    operation_model = service_model.operation_model(response._get_action())
    protocol = determine_request_protocol(service_model, request.content_type)
    parser = PROTOCOL_PARSERS[protocol](operation_model, map_type=dict)
    parsed = parser.parse(
        {
            "method": request.method,
            "values": request.values,
            "headers": request.headers,
            "body": request.data,
            "url_path": request.path,
            "url_params": response.uri_match,
        }
    )
    return dict(parsed)


class _Refusal(ServiceException):
    """An error answer of the check (defined outside moto's packages, so moto's serializer
    looks its code up in the called service's model only)."""


def _error(response: BaseResponse, code: str, message: str, status: int) -> TYPE_RESPONSE:
    exc = _Refusal(code, message)
    with warnings.catch_warnings():  # codes like AccessDenied are in no service model
        warnings.simplefilter("ignore", UserWarning)
        _, headers, body = response.serialized(ActionResult(exc))
    headers["status"] = str(status)
    return status, headers, body


def _tags(items: Any) -> dict[str, str]:
    return {str(t["Key"]): str(t.get("Value", "")) for t in items or []}


def _spec_tags(specs: Any, resource_type: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for spec in specs or []:
        if spec.get("ResourceType") == resource_type:
            out.update(_tags(spec.get("Tags")))
    return out


class _Authorizations:
    """Turns one call into the authorizations AWS would make (see module doc)."""

    def __init__(self, check: IAMCheck, service: str, region: str) -> None:
        self.check = check
        self.service = service
        self.region = region
        self.account = check.account
        self.partition = check.partition

    # -- context -----------------------------------------------------------------------

    def _ctx(self, **extra: Any) -> dict[str, Any]:
        return {"aws:RequestedRegion": self.region, **extra}

    def _request_tags(self, tags: Mapping[str, str]) -> dict[str, Any]:
        ctx: dict[str, Any] = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
        if tags:
            ctx["aws:TagKeys"] = sorted(tags)
        return ctx

    def _resource_tags(self, tags: Mapping[str, str]) -> dict[str, Any]:
        return {f"aws:ResourceTag/{k}": v for k, v in tags.items()}

    def of(self, operation: str, params: Mapping[str, Any]) -> list[Request]:
        action = f"{self.service}:{operation}"
        if self.service == "sts" and operation == "GetCallerIdentity":
            return []
        handler = getattr(self, f"_{self.service}", None)
        if handler is not None:
            found: list[Request] | None = handler(operation, params)
            if found is not None:
                return found
        return [Request(action, "*", self._ctx())]

    # -- EC2 ---------------------------------------------------------------------------

    def _ec2_backend(self) -> Any:
        from moto.ec2.models import ec2_backends

        return ec2_backends[self.account][self.region]

    def _ec2_arn(self, kind: str, ident: str) -> str:
        # images and snapshots are named without an account (they may be another's)
        account = "" if kind in ("image", "snapshot") else self.account
        return f"arn:{self.partition}:ec2:{self.region}:{account}:{kind}/{ident}"

    def _existing(self, action: str, kind: str, ident: str, **extra: Any) -> Request:
        tags = dict(self._ec2_backend().tags.get(ident, {}))
        return Request(
            action,
            self._ec2_arn(kind, ident),
            self._ctx(**self._resource_tags(tags), **extra),
        )

    def _created(self, operation: str, kind: str, tags: Mapping[str, str]) -> list[Request]:
        arn = self._ec2_arn(kind, "*")
        out = [Request(f"ec2:{operation}", arn, self._ctx(**self._request_tags(tags)))]
        if tags:
            ctx = self._ctx(**self._request_tags(tags))
            ctx["ec2:CreateAction"] = operation
            out.append(Request("ec2:CreateTags", arn, ctx))
        return out

    def _launch_template(self, spec: Mapping[str, Any]) -> Any | None:
        backend = self._ec2_backend()
        try:
            if spec.get("LaunchTemplateName"):
                return backend.get_launch_template_by_name(spec["LaunchTemplateName"])
            if spec.get("LaunchTemplateId"):
                return backend.get_launch_template(spec["LaunchTemplateId"])
        except Exception:  # moto answers the missing template itself
            return None
        return None

    @staticmethod
    def _template_data(template: Any, version: str | None) -> dict[str, Any]:
        if version in (None, "$Default"):
            chosen = template.default_version()
        elif version == "$Latest":
            chosen = template.latest_version()
        else:
            chosen = template.get_version(version)
        return dict(chosen.data)

    def _ec2(self, operation: str, params: Mapping[str, Any]) -> list[Request] | None:
        action = f"ec2:{operation}"
        if operation.startswith("Describe"):
            return [Request(action, "*", self._ctx())]
        if operation == "CreateLaunchTemplate":
            tags = _spec_tags(params.get("TagSpecifications"), "launch-template")
            return self._created(operation, "launch-template", tags)
        if operation in _LAUNCHES:
            return self._launch(operation, params)
        if operation == "CreateTags":
            tags = _tags(params.get("Tags"))
            return [
                self._existing(action, self._kind(r), r, **self._request_tags(tags))
                for r in params.get("Resources", [])
            ]
        if operation == "TerminateInstances":
            return [self._existing(action, "instance", i) for i in params.get("InstanceIds", [])]
        if operation == "DeleteLaunchTemplate":
            template = self._launch_template(params)
            if template is None:
                return []
            return [self._existing(action, "launch-template", template.id)]
        return None

    @staticmethod
    def _kind(ident: str) -> str:
        return _EC2_ID_PREFIXES.get(ident.split("-", 1)[0], "unknown")

    def _launch(self, operation: str, params: Mapping[str, Any]) -> list[Request]:
        action = f"ec2:{operation}"
        out: list[Request] = []
        images: set[str] = set()
        subnets: set[str] = set()
        groups: set[str] = set()
        snapshots: set[str] = set()
        placement: set[str] = set()
        reservations: set[str] = set()
        profiles: set[str] = set()
        template_tags: dict[str, dict[str, str]] = {}
        spot = False

        def read_data(data: Mapping[str, Any]) -> None:
            nonlocal spot
            if data.get("ImageId"):
                images.add(str(data["ImageId"]))
            if data.get("SubnetId"):
                subnets.add(str(data["SubnetId"]))
            groups.update(str(g) for g in data.get("SecurityGroupIds") or [])
            for nic in data.get("NetworkInterfaces") or []:
                if nic.get("SubnetId"):
                    subnets.add(str(nic["SubnetId"]))
                groups.update(str(g) for g in nic.get("Groups") or [])
            for device in data.get("BlockDeviceMappings") or []:
                snapshot = (device.get("Ebs") or {}).get("SnapshotId")
                if snapshot:
                    snapshots.add(str(snapshot))
            where = data.get("Placement") or {}
            if where.get("GroupId") or where.get("GroupName"):
                placement.add(str(where.get("GroupId") or where.get("GroupName")))
            target = (data.get("CapacityReservationSpecification") or {}).get(
                "CapacityReservationTarget"
            ) or {}
            if target.get("CapacityReservationId"):
                reservations.add(str(target["CapacityReservationId"]))
            profile = data.get("IamInstanceProfile") or {}
            if profile.get("Name") or profile.get("Arn"):
                profiles.add(str(profile.get("Name") or str(profile["Arn"]).rsplit("/", 1)[-1]))
            if (data.get("InstanceMarketOptions") or {}).get("MarketType") == "spot":
                spot = True

        specs: list[Mapping[str, Any]] = []
        if operation == "CreateFleet":
            for config in params.get("LaunchTemplateConfigs", []):
                specs.append(config.get("LaunchTemplateSpecification") or {})
                for override in config.get("Overrides") or []:
                    read_data(override)
            target = params.get("TargetCapacitySpecification") or {}
            spot = spot or target.get("DefaultTargetCapacityType") == "spot"
        else:
            if params.get("LaunchTemplate"):
                specs.append(params["LaunchTemplate"])
            read_data(params)
        for spec in specs:
            template = self._launch_template(spec)
            if template is None:
                continue
            out.append(self._existing(action, "launch-template", template.id))
            data = self._template_data(template, spec.get("Version"))
            read_data(data)
            for tag_spec in data.get("TagSpecifications") or []:
                kind = str(tag_spec.get("ResourceType"))
                template_tags.setdefault(kind, {}).update(_tags(tag_spec.get("Tags")))
        out += [self._existing(action, "image", i) for i in sorted(images)]
        out += [self._existing(action, "subnet", s) for s in sorted(subnets)]
        out += [self._existing(action, "security-group", g) for g in sorted(groups)]
        out += [self._existing(action, "snapshot", s) for s in sorted(snapshots)]
        out += [self._existing(action, "placement-group", p) for p in sorted(placement)]
        out += [self._existing(action, "capacity-reservation", r) for r in sorted(reservations)]
        created = ["instance", "volume", "network-interface"]
        if operation == "CreateFleet":
            created.append("fleet")
        if spot:
            created.append("spot-instances-request")
        for kind in created:
            tags = {
                **template_tags.get(kind, {}),
                **_spec_tags(params.get("TagSpecifications"), kind),
            }
            out += self._created(operation, kind, tags)
        for profile in sorted(profiles):
            out += self._pass_roles_of(profile)
        return out

    # -- IAM ---------------------------------------------------------------------------

    def _iam_backend(self) -> Any:
        from moto.iam.models import iam_backends

        return iam_backends[self.account][self.partition]

    def _profile(self, name: str) -> Any | None:
        try:
            return self._iam_backend().get_instance_profile(name)
        except Exception:
            return None

    def _pass_roles_of(self, profile_name: str) -> list[Request]:
        profile = self._profile(profile_name)
        if profile is None:
            return []
        return [self._pass_role(role.arn) for role in profile.roles]

    @staticmethod
    def _pass_role(role_arn: str) -> Request:
        return Request("iam:PassRole", role_arn, {"iam:PassedToService": "ec2.amazonaws.com"})

    def _iam(self, operation: str, params: Mapping[str, Any]) -> list[Request] | None:
        action = f"iam:{operation}"
        name = params.get("InstanceProfileName")
        if name is None:
            return None
        profile = self._profile(str(name))
        path = profile.path if profile is not None else params.get("Path") or "/"
        arn = f"arn:{self.partition}:iam::{self.account}:instance-profile{path}{name}"
        ctx: dict[str, Any] = {}
        if profile is not None:
            ctx.update(self._resource_tags(_tags(_profile_tags(profile))))
        ctx.update(self._request_tags(_tags(params.get("Tags"))))
        out = [Request(action, arn, ctx)]
        if operation == "AddRoleToInstanceProfile":
            try:
                role = self._iam_backend().get_role(str(params["RoleName"]))
            except Exception:
                return out
            out.append(self._pass_role(role.arn))
        return out

    # -- SSM, SQS, EKS -----------------------------------------------------------------

    def _ssm(self, operation: str, params: Mapping[str, Any]) -> list[Request] | None:
        names = params.get("Names") or ([params["Name"]] if params.get("Name") else [])
        if not names:
            return None
        out = []
        for name in names:
            path = str(name).lstrip("/")
            account = "" if path.startswith("aws/service/") else self.account
            arn = f"arn:{self.partition}:ssm:{self.region}:{account}:parameter/{path}"
            out.append(Request(f"ssm:{operation}", arn, self._ctx()))
        return out

    def _sqs(self, operation: str, params: Mapping[str, Any]) -> list[Request] | None:
        name = params.get("QueueName")
        if name is None and params.get("QueueUrl"):
            name = urlparse(str(params["QueueUrl"])).path.rstrip("/").rsplit("/", 1)[-1]
        if name is None:
            return None
        arn = f"arn:{self.partition}:sqs:{self.region}:{self.account}:{name}"
        return [Request(f"sqs:{operation}", arn, self._ctx())]

    def _eks(self, operation: str, params: Mapping[str, Any]) -> list[Request] | None:
        name = params.get("name")
        if name is None:
            return None
        arn = f"arn:{self.partition}:eks:{self.region}:{self.account}:cluster/{name}"
        return [Request(f"eks:{operation}", arn, self._ctx())]


def _profile_tags(profile: Any) -> list[dict[str, str]]:
    tags = getattr(profile, "tags", None) or []
    if isinstance(tags, dict):
        return [{"Key": k, "Value": v} for k, v in tags.items()]
    return list(tags)


# -- installing the hook -----------------------------------------------------------------

_lock = threading.Lock()
_checks: dict[int, IAMCheck] = {}  # moto server port -> its check
_original: Any = None


def _port_of(response: BaseResponse) -> int | None:
    host = str(response.headers.get("Host", ""))
    _, _, port = host.rpartition(":")
    return int(port) if port.isdigit() else None


def _checked_call_action(self: BaseResponse) -> TYPE_RESPONSE:
    port = _port_of(self)
    check = _checks.get(port) if port is not None else None
    if check is not None and KARPY_USER_AGENT in str(self.headers.get("User-Agent", "")):
        answer = check.judge(self)
        if answer is not None:
            return answer
    result: TYPE_RESPONSE = _original(self)
    return result


@contextmanager
def installed(check: IAMCheck, *, port: int) -> Iterator[IAMCheck]:
    """Enforce ``check`` on karpy's requests to the moto server on ``port``."""
    global _original
    with _lock:
        if not _checks:
            _original = BaseResponse.call_action
            BaseResponse.call_action = _checked_call_action  # type: ignore[method-assign]
        _checks[port] = check
    try:
        yield check
    finally:
        with _lock:
            _checks.pop(port, None)
            if not _checks:
                BaseResponse.call_action = _original  # type: ignore[method-assign]
