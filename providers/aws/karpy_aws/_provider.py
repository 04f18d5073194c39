"""The AWS CloudProvider: karpy's protocol on EC2 (aioboto3), following Karpenter AWS's
pkg/cloudprovider/cloudprovider.go.

``create`` reads the NodeClaim's EC2NodeClass (it must be Ready: subnets, security
groups, AMIs and instance profile resolved by the status controller), builds the
instance types for it, and launches through CreateFleet (:mod:`karpy_aws._fleet`) from
launch templates whose contents :mod:`karpy_aws._launchtemplates` builds.
``get``/``list``/``delete`` work on instances found by tag; ``delete`` is two-phase:
the first call terminates, later calls raise NodeClaimNotFoundError once EC2 reports
the instance ``terminated``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError
from opentelemetry.metrics import Meter

from karpy.apis import NodeClaim, NodePool
from karpy.apis import labels as wk
from karpy.cloudprovider import (
    CreateError,
    DriftReason,
    InstanceType,
    LaunchOverlays,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
    NoOverlays,
    ProviderContext,
    RepairPolicy,
    UnavailableOfferings,
)
from karpy.cloudprovider.launch import LaunchChoice, launched_nodeclaim
from karpy.runtime import Client, Kind, Manager
from karpy_aws._batcher import CreateFleetBatcher
from karpy_aws._catalog import Catalog
from karpy_aws._clients import AWSClients
from karpy_aws._cluster import ClusterDiscovery
from karpy_aws._controllers import register_controllers
from karpy_aws._errors import is_launch_template_not_found, is_not_found, reason_message
from karpy_aws._fleet import (
    PlanCache,
    UnexpectedInstanceTypeError,
    fleet_context,
    fleet_outcome,
    fleet_request,
)
from karpy_aws._hash import HASH_VERSION, hash_drifted, node_class_hash
from karpy_aws._instances import (
    LIVE_STATES,
    instance_id,
    nodeclaim_from_instance,
    nodeclaim_tags,
    nodepool_tags,
    provider_id,
)
from karpy_aws._instancetypes import NodeClassShape, SubnetZone, build_instance_type
from karpy_aws._interruption_handler import ANNOTATION_REBALANCE_RECOMMENDED
from karpy_aws._kinds import EC2_NODE_CLASS
from karpy_aws._launchtemplates import LaunchTemplates, TemplateContents
from karpy_aws._metrics import AWSMetrics, launch_failure_reason
from karpy_aws._nodeclasses import NodeClassGetter
from karpy_aws._placement import PlacementGroups
from karpy_aws._pricing import PricingProvider
from karpy_aws._refresh import ResolutionCaches
from karpy_aws._repair import REPAIR_POLICIES
from karpy_aws._reservations import CapacityReservations
from karpy_aws._sdk_metrics import SdkMetrics
from karpy_aws._settings import PROVIDER_SETTINGS, AWSSettings, check_settings
from karpy_aws._validation import NodeClassValidation
from karpy_aws.apis import labels as aws
from karpy_aws.apis.ec2nodeclass import EC2NodeClass

if TYPE_CHECKING:
    from karpy_aws._offline import OfflineAWSCloudProvider

__all__ = ["AWSCloudProvider"]

log = logging.getLogger("karpy.aws")


def _ready(node_class: EC2NodeClass) -> tuple[bool, str]:
    ready = next((c for c in node_class.status.conditions if c.type == "Ready"), None)
    if ready is None:
        return (
            False,
            "its Ready condition is not set yet (the status controller has not resolved it)",
        )
    if ready.status != "True":
        # name what is wrong, not only that a dependent condition is
        why = "; ".join(
            f"{c.type}: {c.message}"
            for c in node_class.status.conditions
            if c.type != "Ready" and c.status == "False" and c.message
        )
        return False, f"Ready={ready.status} ({ready.reason}: {why or ready.message})"
    return True, ""


class AWSCloudProvider:
    """karpy's CloudProvider for EC2 (entry point ``aws``)."""

    #: Its settings, for ``karpy run --help`` (karpy.cloudprovider.ProviderSetting).
    SETTINGS: Final = PROVIDER_SETTINGS

    @staticmethod
    def check_settings(
        settings: Mapping[str, str], *, cluster_name: str, environ: Mapping[str, str]
    ) -> None:
        """Refuse bad settings at start-up, before any AWS client is opened."""
        check_settings(settings, cluster_name=cluster_name, environ=environ)

    def __init__(
        self,
        *,
        settings: AWSSettings,
        clients: AWSClients,
        node_classes: NodeClassGetter,
        client: Client | None = None,
        unavailable: UnavailableOfferings | None = None,
        owns_clients: bool = True,
        cluster: ClusterDiscovery | None = None,
        reserved_capacity: bool = True,
        overlays: LaunchOverlays | None = None,
    ) -> None:
        self.settings = settings
        #: the NodeOverlays in force, applied to the catalogue a launch plans from
        self.overlays: LaunchOverlays = overlays or NoOverlays()
        self.clients = clients
        #: what nodes are told about the cluster (endpoint, CA, service CIDR, DNS)
        self.cluster = cluster or ClusterDiscovery(clients, settings)
        self.unavailable = unavailable or UnavailableOfferings()
        self.pricing = PricingProvider(
            clients, region=settings.region, isolated_vpc=settings.isolated_vpc
        )
        #: capacity reservations and their slots left (see karpy_aws._reservations)
        self.reservations = CapacityReservations(clients)
        self.catalog = Catalog(
            clients, settings, self.pricing, self.unavailable, reservations=self.reservations,
            reserved_capacity=reserved_capacity,
        )
        self.launch_templates = LaunchTemplates(clients, cluster_name=settings.cluster_name)
        # through a lambda, so a test (or benchmark) that wraps clients.ec2.create_fleet
        # sees the merged calls
        self.fleets = CreateFleetBatcher(
            lambda **kw: self.clients.ec2.create_fleet(**kw),
            # an instance launched for a caller that was cancelled meanwhile is ended at
            # once rather than left running until garbage collection finds it
            release=lambda ids: self.clients.ec2.terminate_instances(InstanceIds=ids),
        )
        self.placement_groups = PlacementGroups(clients)
        #: what a launch's templates hold, made before its CreateFleet
        self.template_contents = TemplateContents(
            cluster_name=settings.cluster_name,
            cluster=self.cluster,
            clients=clients,
            placement_groups=self.placement_groups,
            launch_templates=self.launch_templates,
            reserved_capacity=lambda: self.reserved_capacity,
        )
        self._plans = PlanCache()
        #: the EC2NodeClass dry-run validation (ValidationSucceeded)
        self.validation = NodeClassValidation(
            settings=settings,
            clients=clients,
            cluster=self.cluster,
            launch_templates=self.launch_templates,
            template_data=self.template_contents.data,
        )
        #: resolved AMIs, subnets and security groups, reused for AMI_REFRESH_INTERVAL,
        #: SUBNET_REFRESH_INTERVAL and SECURITY_GROUP_REFRESH_INTERVAL
        self.resolution_caches = ResolutionCaches(
            ami_ttl=settings.ami_refresh_interval,
            subnet_ttl=settings.subnet_refresh_interval,
            security_group_ttl=settings.security_group_refresh_interval,
        )
        self._node_classes = node_classes
        self._client = client
        self._owns_clients = owns_clients
        #: Karpenter AWS's launch, termination and batcher metrics, once instrumented
        self.metrics: AWSMetrics | None = None

    @property
    def reserved_capacity(self) -> bool:
        """Karpenter's ReservedCapacity gate (on by default). On: reserved offerings are
        built from the EC2NodeClass's reservations, a launch into one targets it, every
        other launch opts out of open ODCRs, and an instance in a reservation reads back
        as ``reserved`` (Karpenter AWS's targeted launch mode). Off: none of that, and EC2
        may place on-demand launches into open ODCRs (its open mode)."""
        return self.catalog.reserved_capacity

    @reserved_capacity.setter
    def reserved_capacity(self, value: bool) -> None:
        self.catalog.reserved_capacity = value

    def instrument(self, meter: Meter) -> None:
        """Record Karpenter AWS's own metrics (``_metrics``) with ``meter`` (the
        manager's, so they are on its /metrics)."""
        self.metrics = AWSMetrics(meter)
        self.fleets.metrics = self.metrics
        sdk = SdkMetrics(meter)
        for client in self.clients.services():
            sdk.attach(client)

    @classmethod
    async def from_context(
        cls, context: ProviderContext
    ) -> AWSCloudProvider | OfflineAWSCloudProvider:
        """The ``karpy.cloudproviders`` factory (the ``aws`` entry point names this
        class): see :func:`karpy_aws._factory.from_context`."""
        from karpy_aws._factory import from_context

        return await from_context(context)

    @property
    def name(self) -> str:
        return "aws"

    async def aclose(self) -> None:
        """Cancel the CreateFleet batches still waiting and close the AWS clients (when
        this provider opened them)."""
        await self.fleets.aclose()
        if self._owns_clients:
            await self.clients.aclose()

    # -- NodeClass ---------------------------------------------------------------------

    async def _ready_node_class(self, nodeclaim: NodeClaim) -> EC2NodeClass:
        ref = nodeclaim.spec.node_class_ref
        node_class = await self._node_classes(ref.name)
        if node_class is None:
            raise NodeClassNotReadyError(
                f"nodeclaim {nodeclaim.metadata.name}: EC2NodeClass {ref.name!r} does not exist"
            )
        if node_class.metadata.deletion_timestamp is not None:
            raise NodeClassNotReadyError(f"EC2NodeClass {ref.name!r} is terminating")
        ok, why = _ready(node_class)
        if not ok:
            raise NodeClassNotReadyError(f"EC2NodeClass {ref.name!r} is not ready: {why}")
        return node_class

    # -- instance types ----------------------------------------------------------------

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        name = nodepool.spec.template.spec.node_class_ref.name
        node_class = await self._node_classes(name)
        # an error, not an empty list: the core caches an answer per NodePool generation
        # for minutes, and an empty one would outlive the NodeClass becoming Ready
        if node_class is None:
            raise NodeClassNotReadyError(
                f"nodepool {nodepool.metadata.name}: EC2NodeClass {name!r} does not exist"
            )
        ok, why = _ready(node_class)
        if not ok or not node_class.status.subnets:
            raise NodeClassNotReadyError(
                f"nodepool {nodepool.metadata.name}: EC2NodeClass {name!r} is not ready: "
                f"{why or 'no subnets resolved'}"
            )
        return await self.catalog.instance_types(NodeClassShape.of(node_class))

    # -- create ------------------------------------------------------------------------

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        node_class = await self._ready_node_class(nodeclaim)
        # as the core planned them: an overlay's extended resource must fit here too
        instance_types = self.overlays.apply(
            nodeclaim, await self.catalog.instance_types(NodeClassShape.of(node_class))
        )
        self.unavailable.expire()  # what is due, before the plan reads the cache
        plan = self._plans.plan(
            nodeclaim, node_class, instance_types, self.unavailable, now=time.monotonic()
        )
        tags = nodepool_tags(
            self.settings.cluster_name,
            nodeclaim.metadata.labels.get(wk.LABEL_NODEPOOL, ""),
            node_class.metadata.name or "",
            node_class.spec.tags,
        )
        response: Mapping[str, Any] | None = None
        for attempt in range(2):
            templates = await self.template_contents.for_plan(plan, node_class, nodeclaim)
            try:
                response = await self.fleets.create_fleet(
                    fleet_request(
                        plan, templates, tags, context=fleet_context(nodeclaim, node_class)
                    ),
                    nodeclaim=nodeclaim.metadata.name or "",
                )
                break
            except Exception as exc:
                if is_launch_template_not_found(exc) and attempt == 0:
                    # GC (or a user) deleted a template we had cached: make it again, once
                    for name in templates.values():
                        self.launch_templates.invalidate(name)
                    continue
                if is_launch_template_not_found(exc) or _is_client_error(exc):
                    reason, message = reason_message(exc)
                    raise CreateError(f"creating fleet request: {message}", reason=reason) from exc
                raise
        assert response is not None
        self._count_launch_failures(response, plan.capacity_type, node_class)
        try:
            outcome = fleet_outcome(
                nodeclaim, plan, response, self.unavailable, self.reservations
            )
        except UnexpectedInstanceTypeError as exc:
            # the instance exists: end it now rather than leave it to garbage collection
            try:
                await self.clients.ec2.terminate_instances(InstanceIds=[exc.instance_id])
            except Exception as failed:  # garbage collection will find it (it is tagged)
                log.error(
                    "failed terminating instance of an unexpected type",
                    extra={"id": exc.instance_id, "error": str(failed)},
                )
            raise
        await self._tag_instance(outcome.instance_id, nodeclaim, node_class)
        o = outcome.override
        if o.offering.reserved:
            self.reservations.mark_launched(o.offering.reservation_id)
        launched = launched_nodeclaim(
            nodeclaim,
            LaunchChoice(o.instance_type, o.offering),
            provider_id=provider_id(o.offering.zone, outcome.instance_id),
            image_id=o.image_id,
        )
        launched.metadata.labels[aws.LABEL_NODECLASS] = node_class.metadata.name or ""
        launched.metadata.annotations = {
            **launched.metadata.annotations,
            aws.ANNOTATION_EC2NODECLASS_HASH: node_class_hash(
                node_class, self.cluster.hash_ca_bundle
            ),
            aws.ANNOTATION_EC2NODECLASS_HASH_VERSION: HASH_VERSION,
        }
        log.info(
            "launched instance",
            extra={
                "id": outcome.instance_id,
                "hostname": "",
                "instance-type": o.instance_type.name,
                "zone": o.offering.zone,
                "capacity-type": o.offering.capacity_type,
                "capacity": dict(launched.status.capacity),
            },
        )
        return launched

    async def _tag_instance(
        self, iid: str, nodeclaim: NodeClaim, node_class: EC2NodeClass
    ) -> None:
        """Write the NodeClaim's own tags on its instance. A failure is logged, not
        raised: the instance exists and is the NodeClaim's, and failing the launch
        would make the core launch a second one."""
        tags = nodeclaim_tags(nodeclaim, node_class.spec.tags)
        try:
            await self.clients.ec2.create_tags(
                Resources=[iid], Tags=[{"Key": k, "Value": v} for k, v in tags.items()]
            )
        except Exception as exc:  # botocore has retried throttling and 5xx already
            log.warning(
                "failed tagging instance",
                extra={"id": iid, "nodeclaim": nodeclaim.metadata.name, "error": str(exc)},
            )

    # -- get / list / delete -----------------------------------------------------------

    def _count_launch_failures(
        self, response: Mapping[str, Any], capacity_type: str, node_class: EC2NodeClass
    ) -> None:
        """karpenter_cloudprovider_instance_launch_failures_total: one per offering
        CreateFleet refused, its zone (or its subnet's) and that zone's ID."""
        if self.metrics is None:
            return
        subnets = node_class.status.subnets
        zone_of_subnet = {s.id: s.zone for s in subnets}
        zone_ids = {s.zone: s.zone_id or "" for s in subnets}
        for error in response.get("Errors") or []:
            overrides = (error.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
            zone = str(overrides.get("AvailabilityZone") or "") or zone_of_subnet.get(
                str(overrides.get("SubnetId") or ""), "")
            self.metrics.launch_failures.add(1, {
                "zone": zone,
                "zone_id": zone_ids.get(zone, ""),
                "capacity_type": capacity_type,
                "reason": launch_failure_reason(
                    str(error.get("ErrorCode") or ""), str(error.get("ErrorMessage") or "")
                ),
            })

    async def _describe(self, iid: str) -> Mapping[str, Any] | None:
        try:
            answer = await self.clients.ec2.describe_instances(
                InstanceIds=[iid],
                Filters=[{"Name": "instance-state-name", "Values": list(LIVE_STATES)}],
            )
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise
        for reservation in answer.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                if instance["InstanceId"] == iid and instance["State"]["Name"] in LIVE_STATES:
                    return dict(instance)
        return None

    def _instance_type_for(self, instance: Mapping[str, Any]) -> InstanceType | None:
        info = self.catalog.infos.get(str(instance.get("InstanceType")))
        if info is None:
            return None
        zone = instance.get("Placement", {}).get("AvailabilityZone", "")
        return build_instance_type(
            info,
            region=self.settings.region,
            offered_zones=(zone,),
            shape=NodeClassShape(zones=(SubnetZone(zone),)),
            price=self.pricing.price,
            unavailable=lambda _: False,
            reserved_enis=self.settings.reserved_enis,
            vm_memory_overhead_percent=self.settings.vm_memory_overhead_percent,
        )

    async def get(self, provider_id: str) -> NodeClaim:
        instance = await self._describe(instance_id(provider_id))
        if instance is None:
            raise NodeClaimNotFoundError(
                f"instance {provider_id} not found", provider_id=provider_id
            )
        await self.catalog.refresh()
        return nodeclaim_from_instance(
            instance, self._instance_type_for(instance), region=self.settings.region,
            reserved_capacity=self.reserved_capacity,
        )

    async def list(self) -> Sequence[NodeClaim]:
        await self.catalog.refresh()
        found: list[NodeClaim] = []
        paginator = self.clients.ec2.get_paginator("describe_instances")
        async for page in paginator.paginate(
            Filters=[
                {"Name": "tag-key", "Values": [aws.TAG_NODEPOOL]},
                {"Name": "tag-key", "Values": [aws.TAG_NODECLASS]},
                {"Name": f"tag:{aws.TAG_EKS_CLUSTER_NAME}", "Values": [self.settings.cluster_name]},
                {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
            ]
        ):
            for reservation in page.get("Reservations", []):
                for instance in reservation.get("Instances", []):
                    if instance["State"]["Name"] in LIVE_STATES:
                        found.append(
                            nodeclaim_from_instance(
                                instance,
                                self._instance_type_for(instance),
                                region=self.settings.region,
                                reserved_capacity=self.reserved_capacity,
                            )
                        )
        return found

    async def delete(self, nodeclaim: NodeClaim) -> None:
        pid = nodeclaim.status.provider_id or ""
        iid = instance_id(pid)
        instance = await self._describe(iid)
        if instance is None:
            raise NodeClaimNotFoundError(f"instance {pid} is terminated", provider_id=pid)
        if instance["State"]["Name"] == "shutting-down":
            return
        try:
            await self.clients.ec2.terminate_instances(InstanceIds=[iid])
        except Exception as exc:
            if self.metrics is not None:
                placement = instance.get("Placement") or {}
                self.metrics.termination_failures.add(1, {
                    "zone": str(placement.get("AvailabilityZone") or ""),
                    "zone_id": str(placement.get("AvailabilityZoneId") or ""),
                })
            if is_not_found(exc):
                raise NodeClaimNotFoundError(f"instance {pid} not found", provider_id=pid) from exc
            raise
        if instance.get("CapacityReservationId"):
            self.reservations.mark_terminated(str(instance["CapacityReservationId"]))
        log.info("terminating instance", extra={"id": iid, "nodeclaim": nodeclaim.metadata.name})

    # -- drift, repair, kinds ----------------------------------------------------------

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        if ANNOTATION_REBALANCE_RECOMMENDED in (nodeclaim.metadata.annotations or {}):
            # EC2 recommended moving off this spot instance and its NodePool opted in
            # (karpy_aws._interruption_handler): replace it gracefully, cost-checked.
            return DriftReason("RebalanceRecommendation")
        node_class = await self._node_classes(nodeclaim.spec.node_class_ref.name)
        if node_class is None:
            return None
        if hash_drifted(nodeclaim, node_class):
            return DriftReason("NodeClassDrift")
        if not nodeclaim.status.provider_id:
            return None
        instance = await self._describe(instance_id(nodeclaim.status.provider_id))
        if instance is None:
            return None
        amis = {a.id for a in node_class.status.amis}
        if amis and instance.get("ImageId") not in amis:
            return DriftReason("AMIDrift")
        subnets = {s.id for s in node_class.status.subnets}
        if subnets and instance.get("SubnetId") not in subnets:
            return DriftReason("SubnetDrift")
        groups = {g["GroupId"] for g in instance.get("SecurityGroups", [])}
        wanted = {g.id for g in node_class.status.security_groups}
        if groups and wanted and groups != wanted:
            return DriftReason("SecurityGroupDrift")
        return None

    def repair_policies(self) -> Sequence[RepairPolicy]:
        return REPAIR_POLICIES

    def supported_node_classes(self) -> Sequence[Kind]:
        return (EC2_NODE_CLASS,)

    # -- controllers -------------------------------------------------------------------

    def register_controllers(self, manager: Manager) -> None:
        """Add the EC2NodeClass status controller (``nodeclass``), launch-template
        garbage collection, and the interruption controller when ``interruptionQueue``
        is set (see :mod:`karpy_aws._controllers`)."""
        register_controllers(self, manager)


def _is_client_error(exc: BaseException) -> bool:
    if not isinstance(exc, ClientError):
        return False
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    code = str(exc.response.get("Error", {}).get("Code", ""))
    # throttling and 5xx have been retried by botocore already; let the core retry them
    return 400 <= status < 500 and code not in (
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
    )
