"""The ``karpenter.sh/v1`` NodePool: a template for NodeClaims plus the rules for
disrupting them (consolidation, expiry, budgets), limits and a weight."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from karpy.apis.conditions import ConditionSet, utc_now
from karpy.apis.core import Condition, ConditionList, LabelValue, ObjectMeta, Resource
from karpy.apis.cron import parse_cron
from karpy.apis.duration import DURATION_OR_NEVER_PATTERN, parse_duration, parse_nillable_duration
from karpy.apis.labels import GROUP, LABEL_NODEPOOL
from karpy.apis.model import (
    CRDInfo,
    KubeModel,
    PrinterColumn,
    ResourceList,
    Rule,
    go_pattern,
    validations,
)
from karpy.apis.v1.nodeclaim import (
    NodeClaimSpec,
    NodeClassReference,
    ResourceRequirements,
    _NodeClaimSpecBase,
)
from karpy.apis.v1.nodepool_hash import nodeclaim_template_hash

__all__ = [
    "CONDITION_NODE_CLASS_READY",
    "CONDITION_NODE_REGISTRATION_HEALTHY",
    "CONDITION_VALIDATION_SUCCEEDED",
    "UNLIMITED",
    "Budget",
    "ConsolidationPolicy",
    "Disruption",
    "DisruptionReason",
    "NodeClaimTemplate",
    "NodeClaimTemplateSpec",
    "NodePool",
    "NodePoolSpec",
    "NodePoolStatus",
    "TemplateMetadata",
]

CONDITION_VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"
CONDITION_NODE_CLASS_READY: Final = "NodeClassReady"
CONDITION_NODE_REGISTRATION_HEALTHY: Final = "NodeRegistrationHealthy"

ConsolidationPolicy = Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"]
DisruptionReason = Literal["Underutilized", "Empty", "Drifted", "Unhealthy"]
"""Karpenter v1.15.0 adds ``Unhealthy``: voluntary node repair's budget reason."""

#: What "no budget limits this" looks like (Karpenter uses MaxInt32).
UNLIMITED: Final = 2**31 - 1


class Budget(KubeModel):
    """How many of a NodePool's nodes may be disrupted at once, optionally only during a
    cron window and only for some disruption reasons."""

    reasons: Annotated[
        list[DisruptionReason],
        Field(max_length=50, json_schema_extra={"x-kubernetes-list-type": "set"}),
    ] = Field(
        default_factory=list,
        description=(
            "The disruption reasons (Underutilized, Empty, Drifted, Unhealthy) this budget "
            "limits; "
            "unset: all of them."
        ),
    )
    nodes: str = Field(
        "10%",
        pattern=r"^((100|[0-9]{1,2})%|[0-9]+)$",
        description=(
            "The most nodes that may be disrupting at once: an integer or a percentage of "
            "the NodePool's nodes (rounded up)."
        ),
        json_schema_extra={"x-karpy-required": True},
    )
    schedule: str | None = Field(
        None,
        pattern=go_pattern(
            r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))"
            r"|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
        ),
        description=(
            "A cron schedule (UTC) at which the budget starts being active for `duration`; "
            "unset: always active. Requires duration."
        ),
    )
    duration: str | None = Field(
        None,
        pattern=r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$",
        description=(
            "How long the budget stays active after each schedule hit, in hours and "
            "minutes (e.g. 8h, 1h30m). Requires schedule."
        ),
    )

    @field_validator("duration")
    @classmethod
    def _go_duration(cls, value: str | None) -> str | None:
        # The pattern lets "99999999h" through; Go (and so Karpenter) cannot hold it.
        if value is not None:
            parse_duration(value)
        return value

    def is_active(self, now: datetime) -> bool:
        """Whether the budget applies at ``now``.

        It is active when a schedule hit falls within the last ``duration``, read as
        Karpenter reads it (:mod:`karpy.apis.cron`). Raises ValueError (CronError) when
        robfig/cron would refuse the schedule.
        """
        if self.schedule is None and self.duration is None:
            return True
        if self.schedule is None or self.duration is None:
            raise ValueError("a budget's schedule and duration must be set together")
        now = now.astimezone(UTC)
        # Karpenter's IsActive: the next hit after (now - duration) is not after now. A
        # schedule that never fires has Go's zero time as its next hit: active.
        next_hit = parse_cron(self.schedule).next_after(now - parse_duration(self.duration))
        return next_hit is None or next_hit <= now

    def allowed_disruptions(self, now: datetime, num_nodes: int) -> int:
        """How many nodes this budget lets be disrupted now; ``UNLIMITED`` when inactive.

        A percentage rounds up, as Kubernetes does for maxUnavailable. A broken
        schedule fails closed (0).
        """
        try:
            if not self.is_active(now):
                return UNLIMITED
        except ValueError:
            return 0
        if self.nodes.endswith("%"):
            return math.ceil(num_nodes * int(self.nodes[:-1]) / 100)
        return int(self.nodes)


class Disruption(KubeModel):
    """When and how fast karpy may disrupt the NodePool's nodes."""

    consolidate_after: str = Field(
        "0s",
        pattern=DURATION_OR_NEVER_PATTERN,
        description=(
            "How long a node must have had no pod scheduled or removed before it may be "
            "consolidated (e.g. 30s, 5m), or Never."
        ),
    )
    consolidation_policy: ConsolidationPolicy = Field(
        "WhenEmptyOrUnderutilized",
        description=(
            "Which nodes consolidation may remove: WhenEmpty (only nodes without "
            "workload pods), WhenEmptyOrUnderutilized (also nodes whose pods fit "
            "elsewhere or on a cheaper node), or Balanced (like WhenEmptyOrUnderutilized, "
            "but a move must save at least half as large a share of the NodePool's cost "
            "as the share of its pods it disrupts)."
        ),
    )
    budgets: Annotated[
        list[Budget],
        Field(
            max_length=50,
            json_schema_extra=validations(
                Rule(
                    "self.all(x, has(x.schedule) == has(x.duration))",
                    "'schedule' must be set with 'duration'",
                ),
                default=[{"nodes": "10%"}],
                **{"x-kubernetes-list-type": "atomic"},
            ),
        ),
    ] = Field(
        default_factory=lambda: [Budget(nodes="10%")],
        description=(
            "Limits on how many nodes may be disrupting at once; the most restrictive "
            "active budget wins. Default: one budget of 10%."
        ),
    )

    @field_validator("consolidate_after")
    @classmethod
    def _go_duration(cls, value: str) -> str:
        parse_nillable_duration(value)  # within Go's limit, or a ValueError naming it
        return value

    @property
    def consolidate_after_timedelta(self) -> timedelta | None:
        """``consolidateAfter`` as a timedelta; None for Never."""
        return parse_nillable_duration(self.consolidate_after)


class TemplateMetadata(KubeModel):
    """Labels and annotations every NodeClaim (and its Node) gets."""

    labels: Annotated[
        dict[str, LabelValue],
        Field(
            max_length=100,
            json_schema_extra={
                "x-kubernetes-map-type": "atomic",
                "x-karpy-label-restrictions": "map",
            },
        ),
    ] = Field(default_factory=dict, description="Labels added to every node.")
    annotations: Annotated[
        dict[str, str], Field(json_schema_extra={"x-kubernetes-map-type": "granular"})
    ] = Field(default_factory=dict, description="Annotations added to every node.")


class NodeClaimTemplateSpec(_NodeClaimSpecBase):
    """The NodeClaim spec a NodePool stamps out (without resources, which the
    provisioner computes)."""

    node_class_ref: NodeClassReference = Field(
        description="The NodeClass holding the provider-specific configuration.",
        json_schema_extra=validations(
            Rule("self.group == oldSelf.group", "nodeClassRef.group is immutable"),
            Rule("self.kind == oldSelf.kind", "nodeClassRef.kind is immutable"),
        ),
    )

    @field_validator("expire_after", "termination_grace_period")
    @classmethod
    def _go_duration(cls, value: str | None) -> str | None:
        # A NodePool refuses what a NodeClaim stamped from it could not use.
        if value is not None:
            parse_nillable_duration(value)
        return value


class NodeClaimTemplate(KubeModel):
    """The template of the NodeClaims a NodePool launches."""

    metadata: TemplateMetadata = Field(
        default_factory=TemplateMetadata, description="Labels and annotations for the nodes."
    )
    spec: NodeClaimTemplateSpec = Field(description="The NodeClaim spec.")

    def to_nodeclaim_spec(self, requests: ResourceList | None = None) -> NodeClaimSpec:
        """A NodeClaim spec from this template (Karpenter's ToNodeClaim), with ``requests``."""
        spec = self.spec
        return NodeClaimSpec(
            taints=list(spec.taints),
            startup_taints=list(spec.startup_taints),
            requirements=[r.model_copy(deep=True) for r in spec.requirements],
            termination_grace_period=spec.termination_grace_period,
            expire_after=spec.expire_after,
            node_class_ref=spec.node_class_ref.model_copy(),
            resources=ResourceRequirements(requests=dict(requests or {})),
        )


class NodePoolSpec(KubeModel):
    """What nodes a NodePool may launch and how they are disrupted."""

    # Karpenter v1.8's rules for static NodePools (spec.replicas), word for word.
    model_config = ConfigDict(
        json_schema_extra=validations(
            Rule(
                "has(self.replicas) == has(oldSelf.replicas)",
                "Cannot transition NodePool between static (replicas set) and dynamic "
                "(replicas unset) provisioning modes",
            ),
            Rule(
                "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || "
                "(size(self.limits) == 1 && 'nodes' in self.limits))",
                "only 'limits.nodes' is supported on static NodePools",
            ),
            Rule(
                "!has(self.replicas) || !has(self.weight)",
                "'weight' is not supported on static NodePools",
            ),
        )
    )

    template: NodeClaimTemplate = Field(description="The template of the NodeClaims launched.")
    disruption: Disruption = Field(
        default_factory=Disruption,
        description="Consolidation and disruption budgets.",
        json_schema_extra={"default": {"consolidateAfter": "0s"}},
    )
    limits: ResourceList = Field(
        default_factory=dict,
        description=(
            "Upper bounds on the resources (cpu, memory, nodes, ...) of all the NodePool's "
            "nodes together; no node is launched that would exceed them."
        ),
    )
    weight: int | None = Field(
        None,
        ge=1,
        le=100,
        description=(
            "The NodePool's priority (1-100); higher weights are tried first. Unset counts as 0."
        ),
        json_schema_extra={"format": "int32"},
    )
    replicas: int | None = Field(
        None,
        ge=0,
        description=(
            "Makes the NodePool static (Karpenter's StaticCapacity feature gate, alpha): "
            "it keeps exactly this many nodes whether or not pods need them. "
            "consolidationPolicy and consolidateAfter are ignored, only limits.nodes is "
            "allowed and weight is not; `kubectl scale nodepool` sets it."
        ),
        json_schema_extra={"format": "int64"},
    )

    @model_validator(mode="after")
    def _static_rules(self) -> NodePoolSpec:
        # The CRD's rules above, for manifests read without an API server (simulate).
        if self.replicas is not None:
            if set(self.limits) - {"nodes"}:
                raise ValueError("only 'limits.nodes' is supported on static NodePools")
            if self.weight is not None:
                raise ValueError("'weight' is not supported on static NodePools")
        return self


class NodePoolStatus(KubeModel):
    """What karpy observed of the NodePool's nodes."""

    resources: ResourceList = Field(
        default_factory=dict, description="The resources of all the NodePool's nodes."
    )
    nodes: int = Field(
        0,
        description="The number of nodes the NodePool owns.",
        json_schema_extra={"format": "int64"},
    )
    node_class_observed_generation: int | None = Field(
        None,
        description="The NodeClass generation last seen when judging NodeRegistrationHealthy.",
        json_schema_extra={"format": "int64"},
    )
    conditions: ConditionList = Field(
        default_factory=list,
        description="Ready, ValidationSucceeded, NodeClassReady and NodeRegistrationHealthy.",
    )


class NodePool(Resource):
    """A pool of nodes: the constraints they are launched with and how they are disrupted."""

    crd = CRDInfo(
        group=GROUP,
        version="v1",
        kind="NodePool",
        plural="nodepools",
        singular="nodepool",
        categories=("karpenter",),
        required=("spec",),
        restricted_labels=(LABEL_NODEPOOL,),
        scale=(".spec.replicas", ".status.nodes"),
        printer_columns=(
            PrinterColumn("NodeClass", ".spec.template.spec.nodeClassRef.name"),
            PrinterColumn("Nodes", ".status.nodes"),
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
            PrinterColumn("Weight", ".spec.weight", "integer", priority=1),
            PrinterColumn("CPU", ".status.resources.cpu", priority=1),
            PrinterColumn("Memory", ".status.resources.memory", priority=1),
        ),
    )

    api_version: Literal["karpenter.sh/v1"] = Field("karpenter.sh/v1", alias="apiVersion")
    kind: Literal["NodePool"] = "NodePool"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodePoolSpec = Field(description="The NodePool's specification.")
    status: NodePoolStatus = Field(default_factory=NodePoolStatus)

    def status_conditions(
        self, *, now: Callable[[], datetime] = utc_now
    ) -> ConditionSet[Condition]:
        """The NodePool's conditions: Ready summarises ValidationSucceeded and NodeClassReady."""
        return ConditionSet.of(
            self.metadata,
            self.status.conditions,
            Condition,
            dependents=(CONDITION_VALIDATION_SUCCEEDED, CONDITION_NODE_CLASS_READY),
            now=now,
        )

    def hash(self) -> str:
        """Karpenter's hash of the template (``karpenter.sh/nodepool-hash``, version v3).

        Byte-identical to Karpenter's ``NodePool.Hash()`` for the same stored NodePool:
        requirements, resources and budgets are left out, taints count as a set (see
        :mod:`karpy.apis.v1.nodepool_hash`). Written with ``NODEPOOL_HASH_VERSION``.
        """
        return nodeclaim_template_hash(self.spec.template)

    def allowed_disruptions(self, now: datetime, num_nodes: int, reason: DisruptionReason) -> int:
        """The fewest disruptions any active budget for ``reason`` allows (or ``UNLIMITED``)."""
        allowed = UNLIMITED
        for budget in self.spec.disruption.budgets:
            if not budget.reasons or reason in budget.reasons:
                allowed = min(allowed, budget.allowed_disruptions(now, num_nodes))
        return allowed
