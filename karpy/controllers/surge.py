"""Surge before evict: karpy's own, opt-in way to move a Deployment's pod off a node
without a moment in which the Deployment has no ready replica (beyond Karpenter;
kubernetes-sigs/karpenter#740, #1599, #2985; aws/karpenter-provider-aws#500, #5232).

Karpenter drains a node through the Eviction API only. For the single replica of a
Deployment that means downtime, and a PodDisruptionBudget of ``maxUnavailable: 0``
that protects it blocks voluntary disruption of its node for ever. With this mode on, a
pod that needs it is not evicted: its Deployment is restarted as ``kubectl rollout
restart`` does (a template annotation, ``karpy.dev/restartedAt``), so the Deployment
controller surges a new pod (it cannot land on the draining node: that node carries
``karpenter.sh/disrupted:NoSchedule``), waits until it is Ready, and then deletes the old
one itself. The drain waits for that, as it waits for any pod to leave.

Opt in with the annotation ``karpy.dev/surge-before-evict: "true"`` on a NodePool
(every pod on its nodes) or on a pod (its Deployment's template); ``"false"`` on a pod
opts it out of its NodePool's choice.

A pod *needs* the surge when evicting it would leave its Deployment without an available
replica elsewhere, or when a PodDisruptionBudget refuses its eviction now (asked with a
dry-run eviction). Other pods are evicted as Karpenter evicts them: a rollout restart
replaces every replica, which costs more than an eviction the workload can absorb.
A pod whose owner cannot surge (a bare pod, a StatefulSet, a Deployment that is paused,
uses ``Recreate`` or has ``maxSurge: 0``) is evicted, with a ``SurgeNotPossible`` event
saying why; so is one whose replacement is not Ready within its Deployment's
``progressDeadlineSeconds`` (``SurgeTimedOut``). The NodeClaim's terminationGracePeriod
still bounds the whole drain.

Disruption reads the same rule: a pod that would surge does not block its node's
consolidation, drift or expiry through its PodDisruptionBudget (:func:`surging_pods`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from karpy.apis.conditions import condition_is_true
from karpy.apis.labels import LABEL_NODEPOOL
from karpy.apis.pods import controller_reference, is_terminating
from karpy.runtime import Client, EventRecorder, Object, errors, format_time, kinds, parse_time
from karpy.state.kinds import NODE_POOL

__all__ = [
    "ANNOTATION_RESTARTED_AT",
    "ANNOTATION_SURGE_BEFORE_EVICT",
    "REASON_SURGE_NOT_POSSIBLE",
    "REASON_SURGE_TIMED_OUT",
    "REASON_SURGING",
    "Owners",
    "SurgeBeforeEvict",
    "max_surge",
    "opted_in",
    "surge_blocker",
    "surging_pods",
]

log = logging.getLogger("controller")

#: On a NodePool or a pod: ``"true"`` opts in; ``"false"`` on a pod opts it out.
ANNOTATION_SURGE_BEFORE_EVICT: Final = "karpy.dev/surge-before-evict"
#: Written on the Deployment's pod template: the time karpy restarted it (as
#: ``kubectl.kubernetes.io/restartedAt`` is by ``kubectl rollout restart``).
ANNOTATION_RESTARTED_AT: Final = "karpy.dev/restartedAt"

REASON_SURGING: Final = "SurgingBeforeEviction"
REASON_SURGE_NOT_POSSIBLE: Final = "SurgeNotPossible"
REASON_SURGE_TIMED_OUT: Final = "SurgeTimedOut"

#: The Deployment API's default progressDeadlineSeconds.
_PROGRESS_DEADLINE: Final = 600
_POLL: Final = 1.0


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def opted_in(pod: Mapping[str, Any], nodepool: Mapping[str, Any] | None) -> bool:
    """Whether the pod asked for surge before evict, itself or through its NodePool."""
    own = _annotations(pod).get(ANNOTATION_SURGE_BEFORE_EVICT)
    if own in ("true", "false"):
        return bool(own == "true")
    return _annotations(nodepool).get(ANNOTATION_SURGE_BEFORE_EVICT) == "true"


def max_surge(deployment: Mapping[str, Any]) -> int:
    """The Deployment's maxSurge in pods: an integer, or a percentage of its replicas
    rounded up (as the Deployment controller resolves it); 25 % when unset."""
    spec = deployment.get("spec") or {}
    replicas = spec.get("replicas")
    replicas = 1 if replicas is None else int(replicas)
    value = ((spec.get("strategy") or {}).get("rollingUpdate") or {}).get("maxSurge", "25%")
    if isinstance(value, str) and value.endswith("%"):
        try:
            return math.ceil(float(value[:-1]) * replicas / 100)
        except ValueError:
            return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def surge_blocker(deployment: Mapping[str, Any]) -> str | None:
    """Why the Deployment cannot start a new pod before the old one goes (None if it can)."""
    meta = deployment.get("metadata") or {}
    name = f"Deployment {meta.get('namespace')}/{meta.get('name')}"
    spec = deployment.get("spec") or {}
    if spec.get("paused"):
        return f"{name} is paused"
    if (spec.get("strategy") or {}).get("type") == "Recreate":
        return f"{name} uses the Recreate strategy"
    if max_surge(deployment) < 1:
        return f"{name} has maxSurge 0"
    return None


@dataclass(frozen=True, slots=True)
class Owner:
    """A pod's Deployment and ReplicaSet, or why it has none that can surge."""

    deployment: Object | None
    replicaset_uid: str
    blocker: str | None


class Owners:
    """Resolves pods to their Deployments with live reads, each ReplicaSet once."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._seen: dict[tuple[str, str], Owner] = {}

    async def of(self, pod: Mapping[str, Any]) -> Owner:
        """The pod's Deployment (through its ReplicaSet) and whether it can surge."""
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        ref = controller_reference(pod)
        if ref is None:
            return Owner(None, "", "the pod has no controller")
        if ref.get("kind") != "ReplicaSet":
            return Owner(None, "", f"the pod's controller is a {ref.get('kind')}, "
                                   "which cannot run a second copy of it first")
        key = (namespace, str(ref.get("name")))
        if key not in self._seen:
            self._seen[key] = await self._resolve(namespace, str(ref.get("name")))
        return self._seen[key]

    async def _resolve(self, namespace: str, replicaset: str) -> Owner:
        try:
            rs = await self._client.get(kinds.REPLICA_SET, replicaset, namespace=namespace)
        except errors.NotFound:
            return Owner(None, "", f"ReplicaSet {namespace}/{replicaset} is gone")
        uid = str(rs["metadata"].get("uid") or "")
        ref = controller_reference(rs)
        if ref is None or ref.get("kind") != "Deployment":
            return Owner(None, uid, f"ReplicaSet {namespace}/{replicaset} has no Deployment")
        try:
            deployment = await self._client.get(
                kinds.DEPLOYMENT, str(ref.get("name")), namespace=namespace)
        except errors.NotFound:
            return Owner(None, uid, f"Deployment {namespace}/{ref.get('name')} is gone")
        return Owner(deployment, uid, surge_blocker(deployment))


def restarted_at(deployment: Mapping[str, Any]) -> datetime | None:
    """When karpy last restarted the Deployment (None if never, or unreadable)."""
    template = (deployment.get("spec") or {}).get("template") or {}
    try:
        return parse_time(_annotations(template).get(ANNOTATION_RESTARTED_AT))
    except ValueError:
        return None


def _progress_deadline(deployment: Mapping[str, Any]) -> float:
    value = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
    return float(_PROGRESS_DEADLINE if value is None else value)


def _deadline_exceeded(deployment: Mapping[str, Any]) -> bool:
    for cond in (deployment.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Progressing":
            return bool(cond.get("reason") == "ProgressDeadlineExceeded")
    return False


def _pod_ref(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


@dataclass(slots=True)
class _Surge:
    started: datetime | None = None
    evict: bool = False
    deadline: float = _PROGRESS_DEADLINE
    deployment: str = ""


class SurgeBeforeEvict:
    """The eviction queue's step before it evicts a pod (see the module docs)."""

    def __init__(
        self, *, client: Client, recorder: EventRecorder,
        nodepools: Callable[[str], Mapping[str, Any] | None] | None = None,
    ) -> None:
        """``nodepools`` looks a NodePool up by name (the cluster model's copy); without
        it each pod's NodePool is read from the API server."""
        self._client = client
        self._recorder = recorder
        self._nodepools = nodepools
        self._surges: dict[str, _Surge] = {}

    async def _nodepool(self, node: Mapping[str, Any]) -> Mapping[str, Any] | None:
        name = ((node.get("metadata") or {}).get("labels") or {}).get(LABEL_NODEPOOL)
        if not name:
            return None
        if self._nodepools is not None:
            return self._nodepools(name)
        try:
            return await self._client.get(NODE_POOL, name)
        except errors.NotFound:
            return None

    def forget(self, uid: str) -> None:
        """Drop what was kept about the pod of this UID (it left the eviction queue)."""
        self._surges.pop(uid, None)

    async def before_evict(
        self, pod: Object, node: Mapping[str, Any], pods_on_node: Iterable[Mapping[str, Any]],
        now: datetime,
    ) -> float | None:
        """Seconds to wait for the pod's surge before looking again, or None to evict it
        now (it did not opt in, does not need a surge, cannot surge, or the surge timed
        out). ``node`` is the node being drained, ``pods_on_node`` the pods bound to it."""
        uid = str(pod["metadata"].get("uid") or "")
        surge = self._surges.get(uid)
        if surge is None:
            if not opted_in(pod, await self._nodepool(node)):
                return None
            surge = self._surges[uid] = _Surge()
        if surge.evict:
            return None
        if surge.started is not None:
            return await self._waiting(pod, surge, now)
        owner = await Owners(self._client).of(pod)
        if owner.deployment is None or owner.blocker is not None:
            surge.evict = True
            why = owner.blocker or "the pod has no Deployment"
            self._recorder.normal(
                pod, REASON_SURGE_NOT_POSSIBLE,
                f"Evicting the pod without surging first: {why}",
                dedupe_values=(_pod_ref(pod),))
            return None
        deployment = owner.deployment
        if not await self._needs_surge(pod, owner, pods_on_node):
            surge.evict = True
            return None
        meta = deployment["metadata"]
        surge.deployment = f"{meta.get('namespace')}/{meta.get('name')}"
        surge.deadline = _progress_deadline(deployment)
        created = parse_time(pod["metadata"].get("creationTimestamp"))
        before = restarted_at(deployment)
        if before is not None and created is not None and before >= created:
            surge.started = before  # restarted for this pod already (karpy restarted)
        else:
            await self._client.patch(kinds.DEPLOYMENT, meta["name"], {"spec": {"template": {
                "metadata": {"annotations": {ANNOTATION_RESTARTED_AT: format_time(now)}}}}},
                namespace=meta.get("namespace"))
            surge.started = now
            self._recorder.normal(
                pod, REASON_SURGING,
                f"Restarted Deployment {surge.deployment} so that a replacement is Ready "
                "before this pod leaves the node",
                dedupe_values=(_pod_ref(pod),))
            log.info("surging before eviction", extra={
                "Pod": {"name": pod["metadata"]["name"], "namespace": meta.get("namespace")},
                "Deployment": {"name": meta["name"], "namespace": meta.get("namespace")},
                "Node": {"name": (node.get("metadata") or {}).get("name")},
            })
        return _POLL

    async def _needs_surge(
        self, pod: Object, owner: Owner, pods_on_node: Iterable[Mapping[str, Any]]
    ) -> bool:
        """Evicting would leave the Deployment no available replica elsewhere, or a
        PodDisruptionBudget refuses the eviction now."""
        assert owner.deployment is not None
        available = int((owner.deployment.get("status") or {}).get("availableReplicas") or 0)
        here = sum(1 for p in pods_on_node
                   if (controller_reference(p) or {}).get("uid") == owner.replicaset_uid
                   and condition_is_true(p, "Ready") and not is_terminating(p))  # fmt: skip
        if available - here <= 0:
            return True
        return await _eviction_refused(self._client, pod)

    async def _waiting(self, pod: Object, surge: _Surge, now: datetime) -> float | None:
        assert surge.started is not None
        namespace, _, name = surge.deployment.partition("/")
        try:
            deployment = await self._client.get(kinds.DEPLOYMENT, name, namespace=namespace)
        except errors.NotFound:
            deployment = None
        waited = (now - surge.started).total_seconds()
        if deployment is not None and not _deadline_exceeded(deployment) \
                and waited < surge.deadline:
            return _POLL
        surge.evict = True
        self._recorder.warning(
            pod, REASON_SURGE_TIMED_OUT,
            f"Deployment {surge.deployment} did not replace the pod within "
            f"{surge.deadline:g}s; evicting it",
            dedupe_values=(_pod_ref(pod),))
        return None


async def _eviction_refused(client: Client, pod: Object) -> bool:
    """Whether an eviction of the pod would be refused now (a dry-run eviction)."""
    meta = pod["metadata"]
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "deleteOptions": {"dryRun": ["All"]},
    }
    if meta.get("uid"):
        body["deleteOptions"]["preconditions"] = {"uid": meta["uid"]}
    try:
        await client.create(kinds.POD, body, namespace=meta["namespace"], subresource="eviction")
    except errors.TooManyRequests:
        return True
    except errors.ApiError as exc:
        # More than one PDB: the eviction API refuses the pod outright (a 500).
        return exc.status == 500
    return False


async def surging_pods(
    client: Client,
    pods: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
    *,
    blocked: Callable[[Mapping[str, Any]], bool],
) -> frozenset[str]:
    """Keys (``namespace/name``) of the pods, each given with its NodePool, that opted
    in, are held by a PodDisruptionBudget (``blocked(pod)`` is true) and can surge:
    disruption does not count their PDB against their node."""
    owners = Owners(client)
    keys: set[str] = set()
    for pod, nodepool in pods:
        if not opted_in(pod, nodepool) or not blocked(pod):
            continue
        try:
            owner = await owners.of(pod)
        except errors.ApiError as exc:
            log.error("failed resolving a pod's deployment",
                      extra={"Pod": _pod_ref(pod), "error": str(exc)})
            continue
        if owner.deployment is not None and owner.blocker is None:
            keys.add(_pod_ref(pod))
    return frozenset(keys)

