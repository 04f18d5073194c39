"""The ``karpenter.sh/v1`` NodeClaim: one request for one node, and the parts of its spec
that a NodePool's template shares (requirements, taints, NodeClass reference, durations)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Annotated, Final, Literal, Self

from pydantic import Field, model_validator

from karpy.apis.conditions import CONDITION_READY, ConditionSet, utc_now
from karpy.apis.core import (
    LABEL_KEY_PATTERN,
    Condition,
    LabelValue,
    ObjectMeta,
    Resource,
    Taint,
)
from karpy.apis.duration import (
    DURATION_OR_NEVER_PATTERN,
    DURATION_PATTERN,
    parse_duration,
    parse_nillable_duration,
)
from karpy.apis.labels import GROUP
from karpy.apis.model import (
    CRDInfo,
    KubeModel,
    PrinterColumn,
    ResourceList,
    Rule,
    validations,
)
from karpy.apis.strconv import parse_go_int

__all__ = [
    "CONDITION_CONSISTENT_STATE_FOUND",
    "CONDITION_CONSOLIDATABLE",
    "CONDITION_DISRUPTION_REASON",
    "CONDITION_DRAINED",
    "CONDITION_DRIFTED",
    "CONDITION_INITIALIZED",
    "CONDITION_INSTANCE_TERMINATING",
    "CONDITION_LAUNCHED",
    "CONDITION_READY",
    "CONDITION_REGISTERED",
    "CONDITION_VOLUMES_DETACHED",
    "NODECLAIM_CONDITION_TYPES",
    "NodeClaim",
    "NodeClaimCondition",
    "NodeClaimSpec",
    "NodeClaimStatus",
    "NodeClassReference",
    "NodeSelectorRequirementWithMinValues",
    "Operator",
    "ResourceRequirements",
    "requirement_rules",
]

CONDITION_LAUNCHED: Final = "Launched"
CONDITION_REGISTERED: Final = "Registered"
CONDITION_INITIALIZED: Final = "Initialized"
CONDITION_CONSOLIDATABLE: Final = "Consolidatable"
CONDITION_DRIFTED: Final = "Drifted"
CONDITION_DRAINED: Final = "Drained"
CONDITION_VOLUMES_DETACHED: Final = "VolumesDetached"
CONDITION_INSTANCE_TERMINATING: Final = "InstanceTerminating"
CONDITION_CONSISTENT_STATE_FOUND: Final = "ConsistentStateFound"
CONDITION_DISRUPTION_REASON: Final = "DisruptionReason"

#: Every condition type a NodeClaim carries, Ready first.
NODECLAIM_CONDITION_TYPES: Final = (
    CONDITION_READY,
    CONDITION_LAUNCHED,
    CONDITION_REGISTERED,
    CONDITION_INITIALIZED,
    CONDITION_CONSOLIDATABLE,
    CONDITION_DRIFTED,
    CONDITION_DRAINED,
    CONDITION_VOLUMES_DETACHED,
    CONDITION_INSTANCE_TERMINATING,
    CONDITION_CONSISTENT_STATE_FOUND,
    CONDITION_DISRUPTION_REASON,
)

#: Karpenter's operators: the core node-selector ones plus Gte and Lte (Karpenter v1.9).
Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]


class NodeSelectorRequirementWithMinValues(KubeModel):
    """A node selector requirement (key, operator, values) with an optional minValues:
    the least number of distinct values the launched capacity must keep open."""

    key: str = Field(
        max_length=316,
        pattern=LABEL_KEY_PATTERN,
        description="The label key the requirement applies to.",
        json_schema_extra={"x-karpy-label-restrictions": "key"},
    )
    operator: Operator = Field(
        description=(
            "How the key relates to the values: In, NotIn, Exists, DoesNotExist, Gt, Lt, "
            "Gte or Lte."
        ),
        json_schema_extra={"x-karpy-required": True},
    )
    values: Annotated[
        list[LabelValue], Field(json_schema_extra={"x-kubernetes-list-type": "atomic"})
    ] = Field(
        default_factory=list,
        description=(
            "The values. In and NotIn need at least one, Exists and DoesNotExist none, "
            "Gt, Lt, Gte and Lte exactly one integer."
        ),
    )
    min_values: int | None = Field(
        None,
        ge=1,
        le=50,
        description=(
            "The minimum number of distinct values of this key that the chosen instance "
            "types must span (In only); scheduling keeps that much flexibility."
        ),
    )

    @model_validator(mode="after")
    def _integer_value(self) -> Self:
        # The CRD's rule reads the value with CEL's int(), which is Go's
        # strconv.ParseInt(s, 10, 64): "1_000", "\u0661" and 20-digit values are refused there,
        # so the model refuses them too instead of failing in scheduling later.
        if self.operator in ("Gt", "Lt", "Gte", "Lte"):
            if len(self.values) != 1:
                raise ValueError(f"values: operator {self.operator} needs exactly one value")
            try:
                number = parse_go_int(self.values[0])
            except ValueError as err:
                raise ValueError(f"values: {err}") from None
            if number < 0:
                raise ValueError(f"values: {self.values[0]!r} must be an integer >= 0")
        return self


def requirement_rules() -> dict[str, object]:
    """The CEL rules Karpenter puts on every requirements list."""
    return validations(
        Rule(
            "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
            "requirements with operator 'In' must have a value defined",
        ),
        Rule(
            "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || "
            "x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive "
            "integer value",
        ),
        Rule(
            "self.all(x, (x.operator == 'In' && has(x.minValues)) ? "
            "x.values.size() >= x.minValues : true)",
            "requirements with 'minValues' must have at least that many values specified "
            "in the 'values' field",
        ),
        **{"x-kubernetes-list-type": "atomic"},
    )


class NodeClassReference(KubeModel):
    """Names the provider-specific NodeClass (e.g. an EC2NodeClass) nodes are built from."""

    group: str = Field(
        pattern=r"^[^/]*$",
        description="The API group of the NodeClass, e.g. karpenter.k8s.aws.",
        json_schema_extra=validations(Rule("self != ''", "group may not be empty")),
    )
    kind: str = Field(
        description="The kind of the NodeClass, e.g. EC2NodeClass.",
        json_schema_extra=validations(Rule("self != ''", "kind may not be empty")),
    )
    name: str = Field(
        description="The name of the NodeClass object.",
        json_schema_extra=validations(Rule("self != ''", "name may not be empty")),
    )


class ResourceRequirements(KubeModel):
    """Resources a NodeClaim needs from its node."""

    requests: ResourceList = Field(
        default_factory=dict,
        description="The minimum resources the node must offer (the pods' requests plus overhead).",
    )


# Field definitions shared by NodeClaimSpec and NodePool's NodeClaimTemplateSpec.

TaintList = Annotated[list[Taint], Field(json_schema_extra={"x-kubernetes-list-type": "atomic"})]

TAINTS_DESCRIPTION: Final = "Taints applied to the node."
STARTUP_TAINTS_DESCRIPTION: Final = (
    "Taints applied to the node at startup that something else (typically a DaemonSet) is "
    "expected to remove. Pods need not tolerate them to get a node provisioned."
)
REQUIREMENTS_DESCRIPTION: Final = (
    "Requirements on node labels (instance type, zone, capacity type, architecture, ...) "
    "that every node launched must satisfy."
)
TERMINATION_GRACE_PERIOD_DESCRIPTION: Final = (
    "The longest time the node may spend draining once its deletion starts. When it runs "
    "out, remaining pods are deleted even if PDBs or karpenter.sh/do-not-disrupt block "
    "eviction. Unset: wait for pods indefinitely."
)
EXPIRE_AFTER_DESCRIPTION: Final = (
    "How long after creation the node is replaced (e.g. 720h), or Never."
)


class _NodeClaimSpecBase(KubeModel):
    """Fields NodeClaimSpec and NodePool's NodeClaimTemplateSpec share."""

    taints: TaintList = Field(default_factory=list, description=TAINTS_DESCRIPTION)
    startup_taints: TaintList = Field(default_factory=list, description=STARTUP_TAINTS_DESCRIPTION)
    requirements: Annotated[
        list[NodeSelectorRequirementWithMinValues],
        Field(max_length=100, json_schema_extra=requirement_rules()),
    ] = Field(description=REQUIREMENTS_DESCRIPTION)
    termination_grace_period: str | None = Field(
        None, pattern=DURATION_PATTERN, description=TERMINATION_GRACE_PERIOD_DESCRIPTION
    )
    expire_after: str = Field(
        "720h", pattern=DURATION_OR_NEVER_PATTERN, description=EXPIRE_AFTER_DESCRIPTION
    )

    @property
    def expire_after_timedelta(self) -> timedelta | None:
        """``expireAfter`` as a timedelta; None for Never."""
        return parse_nillable_duration(self.expire_after)

    @property
    def termination_grace_period_timedelta(self) -> timedelta | None:
        """``terminationGracePeriod`` as a timedelta; None when unset."""
        tgp = self.termination_grace_period
        return None if tgp is None else parse_duration(tgp)


class NodeClaimSpec(_NodeClaimSpecBase):
    """What node to launch: requirements, taints, NodeClass and resources. Immutable."""

    resources: ResourceRequirements = Field(
        default_factory=ResourceRequirements,
        description="The resources the node must provide.",
    )
    node_class_ref: NodeClassReference = Field(
        description="The NodeClass holding the provider-specific configuration."
    )


class NodeClaimCondition(Condition):
    """One observation of the NodeClaim's state.

    Karpenter's NodeClaim CRD lets reason be empty and message be absent, so this
    schema is looser than the Condition of other kinds.
    """

    reason: str = Field(
        "",
        max_length=1024,
        description="A CamelCase, machine-readable reason for the last transition.",
        json_schema_extra={"pattern": r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$"},
    )
    message: str = Field(
        "",
        max_length=32768,
        description="A human-readable message about the last transition; may be empty.",
    )


NodeClaimConditionList = Annotated[
    list[NodeClaimCondition],
    Field(
        json_schema_extra={
            "x-kubernetes-list-map-keys": ["type"],
            "x-kubernetes-list-type": "map",
        }
    ),
]


class NodeClaimStatus(KubeModel):
    """What karpy observed of the NodeClaim's instance and node."""

    node_name: str | None = Field(None, description="The name of the Node object.")
    provider_id: str | None = Field(
        None, alias="providerID", description="The cloud provider's ID of the instance."
    )
    image_id: str | None = Field(
        None, alias="imageID", description="The image the instance booted from."
    )
    capacity: ResourceList = Field(
        default_factory=dict, description="The estimated full capacity of the node."
    )
    allocatable: ResourceList = Field(
        default_factory=dict,
        description="The estimated capacity left for pods after system reservations.",
    )
    conditions: NodeClaimConditionList = Field(
        default_factory=list,
        description=(
            "Launched, Registered, Initialized, Ready, and the disruption conditions "
            "(Consolidatable, Drifted, Drained, VolumesDetached, InstanceTerminating, "
            "DisruptionReason)."
        ),
    )
    last_pod_event_time: datetime | None = Field(
        None,
        description="When a pod was last bound to or removed from the node.",
    )


class NodeClaim(Resource):
    """A request for one node, created by the provisioner from a NodePool (or by hand)."""

    crd = CRDInfo(
        group=GROUP,
        version="v1",
        kind="NodeClaim",
        plural="nodeclaims",
        singular="nodeclaim",
        categories=("karpenter",),
        required=("spec",),
        printer_columns=(
            PrinterColumn("Type", r".metadata.labels.node\.kubernetes\.io/instance-type"),
            PrinterColumn("Capacity", r".metadata.labels.karpenter\.sh/capacity-type"),
            PrinterColumn("Zone", r".metadata.labels.topology\.kubernetes\.io/zone"),
            PrinterColumn("Node", ".status.nodeName"),
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
            PrinterColumn("ImageID", ".status.imageID", priority=1),
            PrinterColumn("ID", ".status.providerID", priority=1),
            PrinterColumn("NodePool", r".metadata.labels.karpenter\.sh/nodepool", priority=1),
            PrinterColumn("NodeClass", ".spec.nodeClassRef.name", priority=1),
            PrinterColumn("Drifted", '.status.conditions[?(@.type=="Drifted")].status', priority=1),
        ),
    )

    api_version: Literal["karpenter.sh/v1"] = Field("karpenter.sh/v1", alias="apiVersion")
    kind: Literal["NodeClaim"] = "NodeClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeClaimSpec = Field(
        description="The node to launch. Immutable once created.",
        json_schema_extra=validations(Rule("self == oldSelf", "spec is immutable")),
    )
    status: NodeClaimStatus = Field(default_factory=NodeClaimStatus)

    def status_conditions(
        self, *, now: Callable[[], datetime] = utc_now
    ) -> ConditionSet[NodeClaimCondition]:
        """The NodeClaim's conditions: Ready summarises Launched, Registered, Initialized."""
        return ConditionSet.of(
            self.metadata,
            self.status.conditions,
            NodeClaimCondition,
            dependents=(CONDITION_LAUNCHED, CONDITION_REGISTERED, CONDITION_INITIALIZED),
            now=now,
        )
