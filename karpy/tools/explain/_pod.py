"""``karpy explain pod``: where a pod is, or why no NodePool can host it.

The answer comes from the code the provisioner runs, not from a second opinion:

* the pod's state (bound, nominated, provisionable) and its volume topology come from
  the controllers' :class:`~karpy.state.Cluster` model, and a pod whose volumes cannot
  be resolved gets the provisioner's own "failed to validate pod, ..." reason;
* what karpy would do now is one :class:`~karpy.scheduling.Simulator` solve of this pod
  against the existing and in-flight capacity and every usable NodePool -- the
  provisioner's solve for a batch of one -- and its error is the FailedScheduling event
  text karpy records;
* each NodePool is then solved alone (existing nodes kept for topology counts but
  closed to the pod), which yields the simulator's reason for that pool, and cheap
  structural checks name the precise cause: the taint not tolerated, the requirement
  key and values that conflict, the volume's zone, the limit reached (used/limit), the
  largest compatible instance type and what it lacks.

Everything here is pure: the caller passes the model, the NodePools' instance types
(or why they could not be listed) and the scheduler options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.apis.labels import LABEL_HOSTNAME, LABEL_NODEPOOL
from karpy.apis.pods import is_owned_by_daemonset, is_terminal, is_terminating
from karpy.runtime import Object
from karpy.scheduling import (
    InstanceType,
    NodePoolTemplate,
    Pod,
    Requirement,
    Requirements,
    ReservedOfferingError,
    Results,
    SchedulerOptions,
    Simulator,
    held_in_flight,
    reservation_label_keys,
)
from karpy.scheduling import resources as res
from karpy.scheduling.daemons import daemon_runs_on
from karpy.scheduling.nodepool import NODES
from karpy.scheduling.taints import untolerated
from karpy.state import Cluster, NodePoolEntry, VolumeError
from karpy.state.pods import failed_to_schedule, is_preempting
from karpy.tools.explain._reason import Reason

__all__ = ["PodExplanation", "PoolInput", "PoolVerdict", "explain_pod"]

# The codes of a NodePool's reasons, in the order they are checked.
NODEPOOL_INVALID = "nodepool-invalid"
NODEPOOL_DELETING = "nodepool-deleting"
NODEPOOL_NOT_READY = "nodepool-not-ready"
NODECLASS_NOT_READY = "nodeclass-not-ready"
INSTANCE_TYPES = "instance-types"
TAINT = "taint"
REQUIREMENT = "requirement"
VOLUME_ZONE = "volume-zone"
LIMIT = "limit"
RESOURCES = "resources"
TOPOLOGY = "topology"
VOLUME_LIMIT = "volume-limit"
HOST_PORT = "host-port"
SCHEDULER = "scheduler"

_NEGATIVE = ("NotIn", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class PoolInput:
    """A NodePool as the explainer gets it: the model's entry, and its instance types
    or why the provider could not list them."""

    entry: NodePoolEntry
    instance_types: Sequence[InstanceType] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PoolVerdict:
    """Whether one NodePool could host the pod, and if not every reason found."""

    nodepool: str
    fits: bool
    reasons: tuple[Reason, ...] = ()
    scheduler: str = ""
    """The simulator's own reason for this NodePool (what karpy's event says of it)."""
    instance_types: tuple[str, ...] = ()
    """When it fits: the instance types a NodeClaim would allow, cheapest first."""
    price: float | None = None
    priced_by: str = ""
    """The NodeOverlay that set ``price`` (empty: the provider's price)."""

    def to_dict(self) -> dict[str, Any]:
        """The ``-o json`` form."""
        out = {
            "nodepool": self.nodepool,
            "fits": self.fits,
            "reasons": [r.to_dict() for r in self.reasons],
            "scheduler": self.scheduler,
            "instanceTypes": list(self.instance_types),
            "price": self.price,
        }
        if self.priced_by:
            out["pricedBy"] = self.priced_by
        return out


@dataclass(frozen=True, slots=True)
class PodExplanation:
    """The answer for one pod (see the module docstring).

    ``status`` is ``not-found``, ``bound``, ``nominated``, ``pending`` (karpy
    provisions for it) or ``waiting`` (pending, but not for karpy yet: kube-scheduler
    has not marked it Unschedulable, it is preempting, or it is a DaemonSet pod).
    """

    pod: str
    status: str
    summary: str
    node: str = ""
    nodeclaim: str = ""
    nodepool: str = ""
    reasons: tuple[Reason, ...] = ()
    """Reasons about the pod itself, before any NodePool is considered."""
    decision: Mapping[str, Any] = field(default_factory=dict)
    """What one provisioning round would do with the pod now."""
    event: str = ""
    """The FailedScheduling message karpy records for it ("" if none)."""
    nodepools: tuple[PoolVerdict, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The ``-o json`` form (docs/tools.md)."""
        return {
            "kind": "PodExplanation",
            "pod": self.pod,
            "status": self.status,
            "summary": self.summary,
            "node": self.node,
            "nodeclaim": self.nodeclaim,
            "nodepool": self.nodepool,
            "reasons": [r.to_dict() for r in self.reasons],
            "decision": dict(self.decision),
            "event": self.event,
            "nodepools": [v.to_dict() for v in self.nodepools],
        }


def explain_pod(
    key: str,
    raw: Object | None,
    *,
    cluster: Cluster,
    pools: Sequence[PoolInput],
    options: SchedulerOptions | None = None,
) -> PodExplanation:
    """Explain pod ``key`` (``namespace/name``; ``raw`` is the API object, None when it
    does not exist) against ``cluster`` and ``pools`` (see the module docstring)."""
    options = options or SchedulerOptions()
    if raw is None:
        return PodExplanation(key, "not-found", f"pod {key} not found",
                              reasons=(Reason("not-found", f"pod {key} not found"),))
    node_name = str((raw.get("spec") or {}).get("nodeName") or "")
    if node_name:
        return _bound(key, node_name, cluster)
    nominated = cluster.nomination(key)
    if nominated is not None:
        return _nominated(key, nominated, cluster)
    reasons: list[Reason] = []
    waiting = _waiting(raw)
    if waiting is not None:
        reasons.append(waiting)
    pod = cluster.scheduling_pod(raw)
    avoid = pod.strict_requirements.get(LABEL_NODEPOOL)
    if avoid is not None and avoid.operator == "DoesNotExist":
        reasons.append(Reason(
            "avoids-managed-nodes",
            f"the pod requires {LABEL_NODEPOOL} DoesNotExist: it asks not to run on nodes "
            "karpy manages, so karpy does not provision for it",
        ))
        return _unplaced(key, "waiting", reasons)
    try:
        pod = cluster.with_volume_topology(pod)
    except VolumeError as exc:
        reasons.append(_volume_reason(str(exc)))
        return _unplaced(key, "waiting" if waiting else "pending", reasons,
                         event=f"Failed to schedule pod, failed to validate pod, {exc}")
    if not pools:
        reasons.append(Reason("no-nodepool", "no nodepools found: create a NodePool that "
                                             "can host the pod"))
        return _unplaced(key, "waiting" if waiting else "pending", reasons)
    return _solve(key, pod, waiting is not None, reasons, cluster, pools, options)


# -- states that need no simulation ------------------------------------------------------


def _bound(key: str, node_name: str, cluster: Cluster) -> PodExplanation:
    state = cluster.node_by_name(node_name)
    claim = state.nodeclaim_name if state is not None and state.nodeclaim is not None else ""
    pool = state.nodepool if state is not None else ""
    where = f"node {node_name}"
    if claim:
        where += f" (nodeclaim {claim}, nodepool {pool})"
    return PodExplanation(key, "bound", f"pod {key} is bound to {where}",
                          node=node_name, nodeclaim=claim, nodepool=pool)


def _nominated(key: str, target: str, cluster: Cluster) -> PodExplanation:
    kind, _, name = target.partition("/")
    claim = name if kind == "nodeclaim" else ""
    state = (cluster.node_for_nodeclaim(name) if claim else cluster.node_by_name(name))
    pool = state.nodepool if state is not None else _unlaunched_pool(cluster, claim)
    node = state.node_name if state is not None else ""
    return PodExplanation(
        key, "nominated", f"pod {key} is nominated to {target}: karpy expects it there once "
        "the capacity is ready", node=node, nodeclaim=claim, nodepool=pool,
        decision={"action": "nominated", "target": target},
    )


def _unlaunched_pool(cluster: Cluster, claim: str) -> str:
    for obj in cluster.unlaunched_nodeclaims():
        if obj["metadata"]["name"] == claim:
            return str((obj["metadata"].get("labels") or {}).get(LABEL_NODEPOOL, ""))
    return ""


def _waiting(raw: Mapping[str, Any]) -> Reason | None:
    """Why karpy does not (yet) provision for a pending pod, or None when it does."""
    if is_terminal(raw) or is_terminating(raw):
        return Reason("not-provisionable", "the pod is terminating or has finished")
    if is_owned_by_daemonset(raw):
        return Reason("not-provisionable", "DaemonSet pods are placed by the DaemonSet "
                                           "controller; karpy counts them as node overhead")
    if is_preempting(raw):
        return Reason("not-provisionable", "kube-scheduler is preempting pods to make room "
                                           "for it (status.nominatedNodeName is set)")
    if not failed_to_schedule(raw):
        return Reason("not-provisionable", "kube-scheduler has not marked the pod "
                                           "Unschedulable yet; karpy provisions only for pods "
                                           "it could not place")
    return None


def _volume_reason(error: str) -> Reason:
    """The provisioner's "failed to validate pod" reason, with a code naming the part."""
    if "storageclass" in error and "not found" in error:
        code = "missing-storageclass"
    elif error.startswith("persistentvolumeclaim") and "not found" in error:
        code = "missing-pvc"
    else:
        code = "volume"
    return Reason(code, f"failed to validate pod, {error}", {"error": error})


def _unplaced(
    key: str, status: str, reasons: Sequence[Reason], *, event: str = ""
) -> PodExplanation:
    summary = f"pod {key} cannot be provisioned for: {reasons[-1].message}"
    return PodExplanation(key, status, summary, reasons=tuple(reasons),
                          decision={"action": "none"}, event=event)


# -- simulation ----------------------------------------------------------------------


def _solve(
    key: str,
    pod: Pod,
    waiting: bool,
    reasons: list[Reason],
    cluster: Cluster,
    pools: Sequence[PoolInput],
    options: SchedulerOptions,
) -> PodExplanation:
    daemons = cluster.daemonset_pods()
    namespaces = cluster.namespaces()
    nodes = cluster.existing_nodes()
    closed = [dataclasses.replace(n, schedulable=False) for n in nodes]
    templates: list[NodePoolTemplate] = []
    verdicts: list[PoolVerdict] = []
    for pool in pools:
        unusable = _unusable(pool)
        if unusable is not None:
            verdicts.append(PoolVerdict(pool.entry.name, False, (unusable,),
                                        scheduler=unusable.message))
            continue
        template = NodePoolTemplate.from_nodepool_dict(
            pool.entry.raw, pool.instance_types, usage=cluster.nodepool_usage(pool.entry.name),
            shared_limits=cluster.shared_limits(pool.entry.name),
        )
        templates.append(template)
        alone = Simulator([template], daemonsets=daemons, options=options).solve(
            [pod], nodes=closed, namespaces=namespaces
        )
        verdicts.append(_verdict(template, pod, alone, daemons, options))
    status = "waiting" if waiting else "pending"
    if not templates:
        reasons.append(Reason("no-usable-nodepool", "no NodePool is usable (see each "
                                                    "NodePool's reason)"))
        return PodExplanation(key, status, f"pod {key}: no NodePool is usable",
                              reasons=tuple(reasons), decision={"action": "none"},
                              nodepools=tuple(verdicts))
    keys = reservation_label_keys(it for t in templates for it in t.instance_types)
    results = Simulator(templates, daemonsets=daemons, options=options).solve(
        [pod], nodes=nodes, namespaces=namespaces,
        reservations_in_flight=held_in_flight(cluster.unlaunched_nodeclaims(), keys)
        if keys else None,
    )
    decision, summary, event = _decision(key, results, cluster)
    return PodExplanation(key, status, summary, reasons=tuple(reasons), decision=decision,
                          event=event, nodepools=tuple(verdicts))


def _unusable(pool: PoolInput) -> Reason | None:
    """The provisioner's reasons for skipping a NodePool, NodeClass readiness named."""
    entry = pool.entry
    if entry.model is None:
        return Reason(NODEPOOL_INVALID, f"ignoring nodepool, invalid: {entry.error}")
    if entry.deleting:
        return Reason(NODEPOOL_DELETING, "ignoring nodepool, being deleted")
    if not entry.ready:
        conditions = {c.get("type"): c for c in
                      (entry.raw.get("status") or {}).get("conditions") or ()}
        node_class = conditions.get("NodeClassReady")
        if node_class is not None and node_class.get("status") != "True":
            why = node_class.get("message") or node_class.get("reason") or "not ready"
            return Reason(NODECLASS_NOT_READY,
                          f"ignoring nodepool, not ready: its NodeClass is not ready ({why})",
                          {"reason": node_class.get("reason", ""), "message": why})
        ready = conditions.get("Ready") or {}
        why = ready.get("message") or ready.get("reason") or "no Ready condition yet"
        return Reason(NODEPOOL_NOT_READY, f"ignoring nodepool, not ready ({why})",
                      {"message": why})
    if pool.error is not None:
        return Reason(INSTANCE_TYPES,
                      f"skipping, unable to resolve instance types: {pool.error}")
    if not pool.instance_types:
        return Reason(INSTANCE_TYPES, "skipping, no resolved instance types found")
    return None


def _decision(
    key: str, results: Results, cluster: Cluster
) -> tuple[dict[str, Any], str, str]:
    for placement in results.existing_nodes:
        state = cluster.node_by_name(placement.node)
        if state is None or state.initialized:
            return ({"action": "existing-node", "node": placement.node},
                    f"pod {key} fits on existing node {placement.node}: kube-scheduler "
                    "should bind it (karpy launches nothing for it)", "")
        claim = state.nodeclaim_name
        return ({"action": "in-flight", "node": placement.node, "nodeclaim": claim},
                f"pod {key} fits on nodeclaim {claim}, which is still starting: karpy "
                "nominates it there", "")
    for plan in results.new_nodeclaims:
        types = plan.instance_type_names
        shown = ", ".join(types[:5]) + (f" and {len(types) - 5} other(s)" if len(types) > 5
                                        else "")
        decision: dict[str, Any] = {"action": "new-nodeclaim", "nodepool": plan.nodepool,
                                    "instanceTypes": types, "price": plan.price,
                                    "reservations": list(plan.reservation_ids)}
        where = ""
        if plan.reservation_ids:
            where = f" on reserved capacity (reservation {', '.join(plan.reservation_ids)})"
        priced = ""
        if plan.priced_by:
            decision["pricedBy"] = plan.priced_by
            priced = f", priced by NodeOverlay {plan.priced_by}"
        return (decision,
                f"pod {key} needs a new node: karpy would create a nodeclaim in nodepool "
                f"{plan.nodepool}{where} ({shown}; ${plan.price:.4f}/h{priced})", "")
    reason = results.error_for(key) or "no NodePool can host it"
    if isinstance(reason, ReservedOfferingError):
        return ({"action": "deferred", "reason": str(reason)},
                f"pod {key} waits for reserved capacity: {reason}; karpy provisions it "
                "next round, on the reservation if a slot frees up, else on-demand or spot",
                "")
    return ({"action": "none"}, f"pod {key} cannot be scheduled by any NodePool",
            f"Failed to schedule pod, {reason}")


# -- one NodePool --------------------------------------------------------------------


def _verdict(
    template: NodePoolTemplate,
    pod: Pod,
    results: Results,
    daemons: Sequence[Pod],
    options: SchedulerOptions,
) -> PoolVerdict:
    name = template.name
    if results.new_nodeclaims:
        plan = results.new_nodeclaims[0]
        return PoolVerdict(name, True, instance_types=tuple(plan.instance_type_names),
                           price=plan.price, priced_by=plan.priced_by)
    text = results.error_for(pod.key) or ""
    prefix = f'nodepool "{name}": '
    if text.startswith(prefix):
        text = text[len(prefix):]
    found = _checks(template, pod, daemons, options, text)
    if not found:
        found = [_classify(text)]
    return PoolVerdict(name, False, tuple(found), scheduler=text)


def _checks(
    template: NodePoolTemplate,
    pod: Pod,
    daemons: Sequence[Pod],
    options: SchedulerOptions,
    text: str,
) -> list[Reason]:
    """Every structural reason the NodePool cannot host the pod, each naming its facts."""
    out: list[Reason] = []
    taint = untolerated(template.taints, pod.tolerations, prefer=False)
    if taint is not None:
        out.append(Reason(TAINT, f"did not tolerate taint {taint}",
                          {"taint": str(taint), "key": taint.key, "effect": taint.effect}))
    requirement = _requirement_reason(template, pod, options)
    if requirement is not None:
        out.append(requirement)
    elif pod.volume_requirements:
        volume = _volume_zone_reason(template, pod, options)
        if volume is not None:
            out.append(volume)
    out.extend(_limit_reasons(template, pod, options, text))
    if not out:
        resources = _resources_reason(template, pod, daemons, options)
        if resources is not None:
            out.append(resources)
    if not out and ("unsatisfiable" in text or "keeps this pod out" in text):
        out.append(_classify(text))
    return out


def _alternatives(pod: Pod) -> list[Requirements]:
    if not pod.required_node_terms:
        return [pod.node_selector]
    return [pod.node_selector.intersect(term) for term in pod.required_node_terms]


def _offered(template: NodePoolTemplate, key: str) -> list[str]:
    """The values of ``key`` the NodePool's instance types can have, within its own
    requirements."""
    values: set[str] = set()
    own = template.requirements.get(key)
    for it in template.instance_types:
        theirs = it.requirements.get(key)
        if theirs is None or theirs.complement:
            continue
        values.update(v for v in theirs.values if own is None or own.has(v))
    return sorted(values)


def _requirement_reason(
    template: NodePoolTemplate, pod: Pod, options: SchedulerOptions
) -> Reason | None:
    """The first requirement of the pod (in its first satisfiable-looking term) that the
    NodePool, or every one of its instance types, cannot meet."""
    first: Reason | None = None
    for reqs in _alternatives(pod):
        found = _conflict(template, reqs, options)
        if found is None:
            return None
        first = first or found
    return first


def _conflict(
    template: NodePoolTemplate, reqs: Requirements, options: SchedulerOptions
) -> Reason | None:
    pool = template.requirements
    for key in sorted(reqs):
        if key == LABEL_HOSTNAME:
            continue
        wanted: Requirement = reqs[key]
        negative = wanted.operator in _NEGATIVE
        offered = pool.get(key)
        details: dict[str, Any] = {"key": key, "pod": str(wanted)}
        if offered is None:
            if negative:
                continue
            if key not in options.well_known_labels:
                details["nodepool"] = None
                return Reason(REQUIREMENT,
                              f"the pod requires {wanted}, but nodepool {template.name} does "
                              f"not set label {key!r} (its nodes would not have it)", details)
        elif not wanted.has_intersection(offered) and not (
            negative and offered.operator in _NEGATIVE
        ):
            details["nodepool"] = str(offered)
            return Reason(REQUIREMENT,
                          f"the pod requires {wanted}, but nodepool {template.name} "
                          f"requires {offered}", details)
        if key in options.well_known_labels and not negative:
            values = _offered(template, key)
            if values and not any(wanted.has(v) for v in values):
                details["offered"] = values
                return Reason(REQUIREMENT,
                              f"the pod requires {wanted}, but nodepool {template.name}'s "
                              f"instance types only offer {key} in [{', '.join(values)}]",
                              details)
    return None


def _volume_zone_reason(
    template: NodePoolTemplate, pod: Pod, options: SchedulerOptions
) -> Reason | None:
    """The pod's volumes can only be mounted where the NodePool cannot launch."""
    described = []
    for volume in pod.volume_requirements:
        if LABEL_HOSTNAME in volume:
            described.append(str(volume))
            continue
        if _conflict(template, volume, options) is None:
            return None
        described.append(str(volume))
    zones = _offered(template, "topology.kubernetes.io/zone")
    return Reason(
        VOLUME_ZONE,
        f"the pod's persistent volume can only be mounted where {' or '.join(described)}, "
        f"which nodepool {template.name} cannot offer (its zones: [{', '.join(zones)}])",
        {"volume": described, "offered": zones},
    )


def _limit_reasons(
    template: NodePoolTemplate, pod: Pod, options: SchedulerOptions, text: str
) -> list[Reason]:
    """Limits the NodePool or a ClusterLimit covering it has reached, or that leave no
    compatible instance type."""
    if not template.limits and not template.shared_limits:
        return []
    smallest = _compatible(template, pod, options)
    out = _reached(f"nodepool {template.name}", "", template.limits or {}, template.usage,
                   smallest)
    for shared in template.shared_limits:
        out += _reached(f"clusterlimit {shared.name} (covering nodepool {template.name})",
                        shared.name, shared.limits, shared.usage, smallest)
    if not out and ("exceed the NodePool's limits" in text or "node limit reached" in text
                    or "exceed the limits of ClusterLimit" in text):
        out.append(Reason(LIMIT, text))
    return out


def _reached(
    who: str, clusterlimit: str, limits: Mapping[str, int], usage: Mapping[str, int],
    smallest: list[InstanceType],
) -> list[Reason]:
    """The limits of ``who`` that are used up or leave no compatible instance type."""
    out = []
    extra = {"clusterlimit": clusterlimit} if clusterlimit else {}
    for name, limit in sorted(limits.items()):
        used = usage.get(name, 0)
        if name == NODES:
            if used >= limit:
                out.append(Reason(LIMIT, f"{who} reached its limit of {limit} nodes "
                                         f"(limits.nodes)",
                                  {"resource": name, "used": str(used), "limit": str(limit),
                                   **extra}))
            continue
        needed = min((it.capacity.get(name, 0) for it in smallest), default=0)
        if used >= limit or (smallest and used + needed > limit):
            shown_used = res.format_quantity(name, used)
            shown_limit = res.format_quantity(name, limit)
            out.append(Reason(
                LIMIT,
                f"{who} limits {name} to {shown_limit} and uses "
                f"{shown_used}: no compatible instance type fits in what is left",
                {"resource": name, "used": shown_used, "limit": shown_limit, **extra},
            ))
    return out


def _compatible(
    template: NodePoolTemplate, pod: Pod, options: SchedulerOptions
) -> list[InstanceType]:
    """The NodePool's instance types the pod's requirements allow, with an available
    offering compatible with both."""
    out = []
    for reqs in _alternatives(pod):
        merged = template.requirements.intersect(reqs.without(LABEL_HOSTNAME))
        for it in template.instance_types:
            if it in out:
                continue
            if it.requirements.intersects(merged) is not None:
                continue
            if it.cheapest_price(merged) is None:
                continue
            out.append(it)
    return out


def _resources_reason(
    template: NodePoolTemplate,
    pod: Pod,
    daemons: Sequence[Pod],
    options: SchedulerOptions,
) -> Reason | None:
    """No compatible instance type has room for the pod plus the DaemonSets that would
    run beside it: name the largest and what it lacks."""
    compatible = _compatible(template, pod, options)
    if not compatible:
        return None
    overhead: dict[str, int] = {}
    for daemon in daemons:
        if daemon_runs_on(daemon, template.taints, template.requirements):
            overhead = res.add(overhead, daemon.requests)
    need = res.add(pod.requests, overhead)

    def fits(it: InstanceType) -> bool:
        return all(it.allocatable.get(n, 0) >= amount for n, amount in need.items() if amount)

    if any(fits(it) for it in compatible):
        return None
    largest = max(compatible, key=lambda it: (it.allocatable.get(res.CPU, 0),
                                              it.allocatable.get(res.MEMORY, 0), it.name))
    lacking = {n: {"requested": res.format_quantity(n, a),
                   "allocatable": res.format_quantity(n, largest.allocatable.get(n, 0))}
               for n, a in sorted(need.items()) if a > largest.allocatable.get(n, 0)}
    short = ", ".join(f"{n} {v['requested']} requested vs {v['allocatable']} allocatable"
                      for n, v in lacking.items())
    daemon_text = (f" (including daemonset overhead {res.describe(overhead)})"
                   if overhead else "")
    return Reason(
        RESOURCES,
        f"no instance type has enough resources: the largest compatible one, "
        f"{largest.name}, lacks {short}{daemon_text}",
        {"instanceType": largest.name, "lacking": lacking,
         "requested": res.format_resource_list(need),
         "allocatable": res.format_resource_list(dict(largest.allocatable)),
         "daemonsetOverhead": res.format_resource_list(overhead)},
    )


def _classify(text: str) -> Reason:
    """A code for the simulator's reason when no structural check named one."""
    if text.startswith("did not tolerate taint"):
        code = TAINT
    elif "host port" in text:
        code = HOST_PORT
    elif "would exceed volume limit" in text:
        code = VOLUME_LIMIT
    elif "volume" in text:
        code = VOLUME_ZONE
    elif "incompatible requirements" in text:
        code = REQUIREMENT
    elif "limit" in text:
        code = LIMIT
    elif "unsatisfiable" in text or "keeps this pod out" in text:
        code = TOPOLOGY
    elif "no instance type" in text:
        code = RESOURCES
    else:
        code = SCHEDULER
    return Reason(code, text)
