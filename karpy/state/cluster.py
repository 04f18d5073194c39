"""The in-memory cluster model: nodes joined to NodeClaims, pods per node, nominations.

:class:`Cluster` is fed by the manager's shared informers (:meth:`Cluster.attach`):
every Node, NodeClaim, Pod, DaemonSet, NodePool, Namespace, PersistentVolumeClaim,
PersistentVolume and StorageClass event updates it in O(1)
(a pod event touches one pod and one node's sums, never a list of pods). Objects are
parsed once, when they arrive, into the plain values the simulator consumes, so a
provisioning round builds its input from ready-made pieces instead of re-reading the
API.

What it answers:

* which machines exist (:class:`~karpy.state.statenode.StateNode`: a Node and/or its
  NodeClaim joined by provider ID), which are in flight, which are going away;
* which pods are bound where, with their requests summed per node;
* which pods are waiting for capacity (provisionable) and which of those are already
  *nominated* to capacity that is coming (:mod:`karpy.state.nominations`);
* the NodePools (parsed), each pool's usage against its limits, the DaemonSets' pods;
* where a pod's persistent volumes let it run (PVCs, PVs and StorageClasses, indexed
  by :mod:`karpy.state.volumes`);
* whether the model can be trusted yet (:attr:`Cluster.synced`).

Event handlers run on the informers' task and never await, so the model needs no
locks: a reader in a reconcile sees a consistent state between two awaits.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from karpy.apis import NodePool
from karpy.apis.labels import LABEL_NODEPOOL
from karpy.apis.model import validation_problems
from karpy.apis.pods import daemonset_reference, is_terminal
from karpy.runtime import (
    Cache,
    Clock,
    FuncHandler,
    Informer,
    Kind,
    Object,
    SystemClock,
    kinds,
)
from karpy.scheduling import ExistingNode, Pod, Requirements, SharedLimit
from karpy.scheduling import resources as res
from karpy.scheduling.daemons import daemon_runs_on
from karpy.scheduling.pod import resize_view
from karpy.scheduling.taints import untolerated
from karpy.state.clusterlimits import CLUSTER_LIMIT, ClusterLimitEntry, ClusterLimits
from karpy.state.daemonsets import daemonset_pod
from karpy.state.devices import (
    DEVICE_CLASS,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    DeviceIndex,
)
from karpy.state.kinds import NODE_CLAIM, NODE_POOL
from karpy.state.nodepool import NodePoolEntry
from karpy.state.nominations import Nomination, Nominations, node_target, nodeclaim_target
from karpy.state.pod_scheduling import PodSchedulingTimes
from karpy.state.pods import is_provisionable, is_reschedulable, pod_key
from karpy.state.statenode import NodePods, StateNode
from karpy.state.volumes import ClaimRef, VolumeError, VolumeIndex, claim_refs
from karpy.state.workloads import WorkloadSelectors

__all__ = ["Cluster", "ReleaseHandler"]

log = logging.getLogger("karpy.state")

ReleaseHandler = Callable[[Sequence[str]], None]
"""Called with the keys of pods whose nominations were released because their target
went away (deleted, marked for deletion): they need capacity again."""

# How many deleted NodeClaim names are remembered (see Cluster.nodeclaim_created).
_DELETED_MEMORY = 4096


def _deleting(obj: Mapping[str, Any]) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def _requests_of(claim: Mapping[str, Any]) -> bool:
    """Whether the NodeClaim says what it asks for (``spec.resources.requests``)."""
    return bool(((claim.get("spec") or {}).get("resources") or {}).get("requests"))


def _daemonset_of(pod: Mapping[str, Any]) -> str:
    """``namespace/name`` of the DaemonSet owning ``pod``, or ""."""
    ref = daemonset_reference(pod)
    if ref is None:
        return ""
    return f"{pod['metadata'].get('namespace') or 'default'}/{ref.get('name')}"


class Cluster:
    """The autoscaler's view of the cluster (see the module docstring).

    Feed it with :meth:`attach` (the manager's cache) or, in tests, by calling the
    ``update_*``/``delete_*`` methods directly with API-shaped dicts.
    """

    def __init__(self, *, clock: Clock | None = None, nomination_ttl: float = 20.0) -> None:
        self.clock: Clock = clock or SystemClock()
        self.nomination_ttl = nomination_ttl
        """Default seconds a nomination holds after its target is initialized."""
        self._nodes: dict[str, StateNode] = {}
        self._node_name_to_id: dict[str, str] = {}
        self._claim_name_to_id: dict[str, str] = {}
        self._unlaunched: dict[str, Object] = {}
        # NodeClaim name -> (the unlaunched object, its StateNode): existing_nodes() is
        # asked every round and would otherwise rebuild hundreds of them each time.
        self._launching: dict[str, tuple[Object, StateNode]] = {}
        self._deleted_claims: OrderedDict[str, None] = OrderedDict()
        self._node_pods: dict[str, NodePods] = {}
        self._bindings: dict[str, tuple[str, str]] = {}
        self._parsed: dict[str, Pod] = {}
        # What in-place resize can change of each parsed pod (scheduling.resize_view):
        # a bound pod whose view changes is parsed and counted again.
        self._resize_views: dict[str, tuple[Any, ...]] = {}
        self._pod_claims: dict[str, tuple[ClaimRef, ...]] = {}
        # Node name -> the volume attachment limits its CSINode publishes per driver
        # (None: published without a limit).
        self._csinodes: dict[str, Mapping[str, int | None]] = {}
        self._with_volumes: dict[tuple[str, bool], tuple[int, Pod]] = {}
        self.volumes = VolumeIndex()
        """PersistentVolumeClaims, PersistentVolumes and StorageClasses, indexed."""
        self.workloads = WorkloadSelectors()
        """Services' and controllers' selectors, for default spread constraints (only
        fed when :meth:`attach` is asked for them)."""
        self.cluster_limits = ClusterLimits()
        """karpy's ClusterLimits (only fed when :meth:`attach` is asked for them)."""
        self.watches_cluster_limits = False
        """Whether :meth:`attach` registered on the ClusterLimit informer."""
        # What each ClusterLimit covers and uses, kept until a NodePool, a pool's usage
        # or the ClusterLimits change (every template of every round asks for it).
        self._pools_version = 0
        self._limit_usage: dict[
            str, tuple[int, ClusterLimitEntry, tuple[list[str], dict[str, int]]]] = {}
        self.devices = DeviceIndex()
        """ResourceClaims, their templates, DeviceClasses and ResourceSlices (only fed
        when :meth:`attach` is asked for dynamic resources)."""
        self._provisionable: dict[str, Object] = {}
        self.pod_scheduling = PodSchedulingTimes()
        """When each pending pod was first seen, decided and found a place (the pod
        latency metrics' starting points)."""
        self._nominations = Nominations()
        self._usage: dict[str, dict[str, int]] = {}
        self._nodepools: dict[str, NodePoolEntry] = {}
        self._daemonsets: dict[str, Pod] = {}
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._release_handlers: list[ReleaseHandler] = []
        self._informers: list[Informer] = []
        self._detach: list[Callable[[], None]] = []

    def __repr__(self) -> str:
        return (
            f"Cluster(nodes={len(self._nodes)}, unlaunched={len(self._unlaunched)}, "
            f"bound_pods={len(self._bindings)}, provisionable={len(self._provisionable)}, "
            f"nominated={len(self._nominations)})"
        )

    # -- wiring --------------------------------------------------------------------------

    def attach(
        self, cache: Cache, *, dynamic_resources: bool = False,
        node_classes: Iterable[Kind] | None = None, cluster_limits: bool = False,
        workloads: bool = False,
    ) -> None:
        """Register on the cache's shared informers of the kinds the model follows;
        with ``dynamic_resources`` (IGNORE_DRA_REQUESTS false) resource.k8s.io's too,
        with ``cluster_limits`` (the API server serves them) karpy's ClusterLimits, with
        ``workloads`` (SCHEDULER_CONFIG sets default constraints) Services,
        ReplicationControllers, ReplicaSets and StatefulSets.

        ``node_classes`` (the cloud provider's supported NodeClasses) restricts the
        NodeClaims the model takes in to those whose ``nodeClassRef`` names one of
        them, as Karpenter's state informer does (``nodeclaimutils.IsManaged``): a
        NodeClaim of another provider's class is never launched here, and counted it
        would hold the model unsynced, so no pod would be provisioned for again.

        Call before the manager runs so that its cache sync also waits for them;
        objects already cached are replayed, so attaching later loses nothing.
        """
        handlers: list[tuple[Any, FuncHandler]] = [
            (kinds.NODE, FuncHandler(self.update_node, lambda _o, n: self.update_node(n),
                                     self.delete_node)),
            (NODE_CLAIM, self._nodeclaim_handler(node_classes)),
            (kinds.POD, FuncHandler(self.update_pod, lambda _o, n: self.update_pod(n),
                                    self.delete_pod)),
            (kinds.DAEMON_SET, FuncHandler(self.update_daemonset,
                                           lambda _o, n: self.update_daemonset(n),
                                           self.delete_daemonset)),
            (NODE_POOL, FuncHandler(self.update_nodepool, lambda _o, n: self.update_nodepool(n),
                                    self.delete_nodepool)),
            (kinds.NAMESPACE, FuncHandler(self.update_namespace,
                                          lambda _o, n: self.update_namespace(n),
                                          self.delete_namespace)),
            (kinds.PERSISTENT_VOLUME_CLAIM, FuncHandler(
                self.volumes.update_claim, lambda _o, n: self.volumes.update_claim(n),
                self.volumes.delete_claim)),
            (kinds.PERSISTENT_VOLUME, FuncHandler(
                self.volumes.update_volume, lambda _o, n: self.volumes.update_volume(n),
                self.volumes.delete_volume)),
            (kinds.CSI_NODE, FuncHandler(self.update_csinode,
                                         lambda _o, n: self.update_csinode(n),
                                         self.delete_csinode)),
            (kinds.STORAGE_CLASS, FuncHandler(
                self.volumes.update_storage_class,
                lambda _o, n: self.volumes.update_storage_class(n),
                self.volumes.delete_storage_class)),
        ]
        if dynamic_resources:
            d = self.devices
            handlers += [
                (RESOURCE_CLAIM, FuncHandler(d.update_claim, lambda _o, n: d.update_claim(n),
                                             d.delete_claim)),
                (RESOURCE_CLAIM_TEMPLATE, FuncHandler(
                    d.update_template, lambda _o, n: d.update_template(n), d.delete_template)),
                (DEVICE_CLASS, FuncHandler(d.update_class, lambda _o, n: d.update_class(n),
                                           d.delete_class)),
                (RESOURCE_SLICE, FuncHandler(d.update_slice, lambda _o, n: d.update_slice(n),
                                             d.delete_slice)),
            ]
        if workloads:
            w = self.workloads
            handlers.append((kinds.SERVICE, FuncHandler(
                w.update_service, lambda _o, n: w.update_service(n), w.delete_service)))
            for kind in (kinds.REPLICATION_CONTROLLER, kinds.REPLICA_SET, kinds.STATEFUL_SET):
                handlers.append((kind, FuncHandler(
                    partial(w.update_owner, kind.kind),
                    lambda _o, n, k=kind.kind: w.update_owner(k, n),  # type: ignore[misc]
                    partial(w.delete_owner, kind.kind))))
        if cluster_limits:
            self.watches_cluster_limits = True
            limits = self.cluster_limits
            handlers.append((CLUSTER_LIMIT, FuncHandler(
                limits.update, lambda _o, n: limits.update(n), limits.delete)))
        for kind, handler in handlers:
            informer = cache.informer(kind)
            registration = informer.add_handler(handler)
            self._informers.append(informer)
            self._detach.append(
                lambda i=informer, r=registration: i.remove_handler(r)  # type: ignore[misc]
            )

    def _nodeclaim_handler(self, node_classes: Iterable[Kind] | None) -> FuncHandler:
        if node_classes is None:
            return FuncHandler(self.update_nodeclaim, lambda _o, n: self.update_nodeclaim(n),
                               self.delete_nodeclaim)
        managed = frozenset((k.group, k.kind) for k in node_classes)

        def ours(claim: Object) -> bool:
            ref = (claim.get("spec") or {}).get("nodeClassRef") or {}
            return (str(ref.get("group", "")), str(ref.get("kind", ""))) in managed

        # A NodeClaim's spec is immutable: it never turns managed or unmanaged.
        def update(claim: Object) -> None:
            if ours(claim):
                self.update_nodeclaim(claim)

        def delete(claim: Object) -> None:
            if ours(claim):
                self.delete_nodeclaim(claim)

        return FuncHandler(update, lambda _o, n: update(n), delete)

    def waiting_on(self) -> list[str]:
        """The NodeClaims that keep the model unsynced (not launched, not being
        deleted), by name."""
        return sorted(n for n, c in self._unlaunched.items() if not _deleting(c))

    def detach(self) -> None:
        """Stop receiving informer events (the model keeps what it has)."""
        for detach in self._detach:
            detach()
        self._detach.clear()
        self._informers.clear()

    def add_release_handler(self, handler: ReleaseHandler) -> None:
        """Call ``handler`` with pod keys whose nominations were released."""
        self._release_handlers.append(handler)

    @property
    def synced_for_provisioning(self) -> bool:
        """True when the informers have listed and every NodeClaim still launching can be
        counted: it asked for resources (as the provisioner's do), so the model holds it
        as in-flight capacity of exactly that size (see :meth:`existing_nodes`), and its
        NodePool has no limits and no ClusterLimit covers it (a launching machine's
        capacity, which limits count, is not known yet: there the round waits for the
        launch, as Karpenter's does).

        Karpenter waits for every NodeClaim to launch before the next round (its model
        knows a machine only by provider ID). At a thousand NodeClaims that wait was
        most of a scale-up: pods whose room kube-scheduler gave to others had to wait for
        a whole round of launches before they were provisioned again.
        """
        if not all(informer.has_synced for informer in self._informers):
            return False
        for claim in self._unlaunched.values():
            if _deleting(claim):
                continue
            if not _requests_of(claim):
                return False
            labels = claim["metadata"].get("labels") or {}
            entry = self._nodepools.get(str(labels.get(LABEL_NODEPOOL) or ""))
            if entry is None or entry.model is None or entry.model.spec.limits:
                return False
            if self.cluster_limits and any(
                limit.selects(entry.raw) for limit in self.cluster_limits.entries()
            ):
                return False  # a ClusterLimit counts the pool's machines like its own limits
        return True

    @property
    def listed(self) -> bool:
        """True once every informer has listed: the model holds every object (NodeClaims
        may still be launching; the model counts them by name all the same)."""
        return all(informer.has_synced for informer in self._informers)

    @property
    def synced(self) -> bool:
        """True when the informers have listed and every NodeClaim that is not being
        deleted has launched.

        An unlaunched NodeClaim's capacity is not known yet, so deciding on new capacity
        before it resolves could buy the same room twice (Karpenter waits the same way).
        """
        if not all(informer.has_synced for informer in self._informers):
            return False
        return all(_deleting(claim) for claim in self._unlaunched.values())

    # -- nodes and NodeClaims ------------------------------------------------------------

    def update_node(self, node: Object) -> None:
        """A Node was added or changed."""
        meta = node["metadata"]
        name = str(meta["name"])
        provider_id = str((node.get("spec") or {}).get("providerID") or "")
        if not provider_id:
            if "karpenter.sh/nodepool" in (meta.get("labels") or {}):
                # A managed node is joined to its NodeClaim by provider ID; wait for it.
                return
            provider_id = name
        known = self._node_name_to_id.get(name)
        if known is not None and known != provider_id:
            self._cleanup_node(name)
        state = self._nodes.get(provider_id)
        if state is None:
            state = self._nodes[provider_id] = StateNode()
        was_deleting = state.marked_for_deletion
        self._change(state, lambda: state.set_node(node))
        state.bound = self._pods_of(name)
        self._node_name_to_id[name] = provider_id
        if state.marked_for_deletion and not was_deleting:
            self._release(self._targets_of(state))

    def delete_node(self, node: Object) -> None:
        """A Node is gone."""
        name = str(node["metadata"]["name"])
        self._cleanup_node(name)
        self._release([node_target(name)])

    def _cleanup_node(self, name: str) -> None:
        provider_id = self._node_name_to_id.pop(name, None)
        if provider_id is None:
            return
        state = self._nodes.get(provider_id)
        if state is None:
            return
        if state.nodeclaim is None:
            self._change(state, lambda: state.set_node(None), remove=True)
            del self._nodes[provider_id]
        else:
            self._change(state, lambda: state.set_node(None))
            state.bound = NodePods()
        pods = self._node_pods.get(name)
        if pods is not None and not pods.pods:
            del self._node_pods[name]

    def update_nodeclaim(self, nodeclaim: Object) -> None:
        """A NodeClaim was added or changed (the provisioner also calls this right
        after creating one, so the model does not wait for the watch)."""
        name = str(nodeclaim["metadata"]["name"])
        provider_id = str((nodeclaim.get("status") or {}).get("providerID") or "")
        known = self._claim_name_to_id.get(name)
        if known is not None and known != provider_id:
            self._cleanup_nodeclaim(name)
        self._claim_name_to_id[name] = provider_id
        if not provider_id:
            self._unlaunched[name] = nodeclaim
            if _deleting(nodeclaim):
                self._release([nodeclaim_target(name)])
            return
        state = self._nodes.get(provider_id)
        if state is None:
            state = self._nodes[provider_id] = StateNode()
        was_deleting = state.marked_for_deletion
        self._change(state, lambda: state.set_nodeclaim(nodeclaim))
        if state.marked_for_deletion and not was_deleting:
            self._release(self._targets_of(state))

    def nodeclaim_created(self, nodeclaim: Object) -> None:
        """Record a NodeClaim the caller has just created, so the next decision counts
        it even if the watch lags; ignored when the watch has already reported it (or
        its deletion), whose version is then at least as new."""
        name = str(nodeclaim["metadata"]["name"])
        if name in self._claim_name_to_id or name in self._deleted_claims:
            return
        self.update_nodeclaim(nodeclaim)

    def delete_nodeclaim(self, nodeclaim: Object) -> None:
        """A NodeClaim is gone."""
        name = str(nodeclaim["metadata"]["name"])
        self._cleanup_nodeclaim(name)
        self._deleted_claims[name] = None
        while len(self._deleted_claims) > _DELETED_MEMORY:
            self._deleted_claims.popitem(last=False)
        self._release([nodeclaim_target(name)])

    def _cleanup_nodeclaim(self, name: str) -> None:
        provider_id = self._claim_name_to_id.pop(name, None)
        self._unlaunched.pop(name, None)
        self._launching.pop(name, None)
        if not provider_id:
            return
        state = self._nodes.get(provider_id)
        if state is None:
            return
        if state.node is None:
            self._change(state, lambda: state.set_nodeclaim(None), remove=True)
            del self._nodes[provider_id]
        else:
            self._change(state, lambda: state.set_nodeclaim(None))

    def _change(self, state: StateNode, apply: Callable[[], None], *, remove: bool = False) -> None:
        """Apply a change to ``state`` keeping the NodePool usage sums and the
        initialized-at time in step."""
        before = state.usage()
        was_initialized = state.initialized
        apply()
        after = None if remove else state.usage()
        if before != after:
            if before is not None:
                self._add_usage(*before, sign=-1)
            if after is not None:
                self._add_usage(*after, sign=1)
        if state.initialized and not was_initialized:
            state.initialized_at = self.clock.monotonic()

    def _add_usage(self, pool: str, usage: Mapping[str, int], *, sign: int) -> None:
        self._pools_version += 1
        total = self._usage.setdefault(pool, {})
        for name, amount in usage.items():
            value = total.get(name, 0) + sign * amount
            if value:
                total[name] = value
            else:
                total.pop(name, None)
        if not total:
            del self._usage[pool]

    def mark_for_deletion(self, *provider_ids: str) -> None:
        """A disruption decision will remove these machines: stop counting on them."""
        for provider_id in provider_ids:
            state = self._nodes.get(provider_id)
            if state is not None and not state.marked:
                was = state.marked_for_deletion

                def mark(s: StateNode = state) -> None:
                    s.marked = True

                self._change(state, mark)
                if not was:
                    self._release(self._targets_of(state))

    def unmark_for_deletion(self, *provider_ids: str) -> None:
        """The disruption did not happen: count on these machines again."""
        for provider_id in provider_ids:
            state = self._nodes.get(provider_id)
            if state is not None and state.marked:

                def unmark(s: StateNode = state) -> None:
                    s.marked = False

                self._change(state, unmark)

    # -- pods ----------------------------------------------------------------------------

    def update_pod(self, pod: Object) -> None:
        """A Pod was added or changed."""
        key = pod_key(pod)
        meta = pod["metadata"]
        uid = str(meta.get("uid") or key)
        if is_provisionable(pod):
            self._provisionable[key] = pod
            # Karpenter's AckPods: the pod has waited on karpy since it was first seen
            if self.pod_scheduling.acked(key) is None:
                self.pod_scheduling.ack(key, self.clock.now())
        else:
            self._provisionable.pop(key, None)
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        bound = self._bindings.get(key)
        if not node_name or is_terminal(pod):
            if bound is not None:
                self._unbind(key)
            return
        view = resize_view(pod)
        resized = self._resize_views.get(uid, view) != view
        if resized:
            # Resized in place: parse it again, to count its new requests on its node.
            self._forget_parsed(uid)
        if bound != (node_name, uid):
            if bound is not None:
                self._unbind(key)
            self._pods_of(node_name).add(
                key, self.scheduling_pod(pod), movable=is_reschedulable(pod),
                daemonset=_daemonset_of(pod),
            )
            self._bindings[key] = (node_name, uid)
            self._nominations.drop(key)
            self._release_overflow(node_name)
        elif resized:
            self._unbind(key)
            self._pods_of(node_name).add(
                key, self.scheduling_pod(pod), movable=is_reschedulable(pod),
                daemonset=_daemonset_of(pod),
            )
            self._bindings[key] = (node_name, uid)
            self._release_overflow(node_name)
        else:
            self._pods_of(node_name).set_movable(key, is_reschedulable(pod))

    def _forget_parsed(self, uid: str) -> None:
        self._parsed.pop(uid, None)
        self._resize_views.pop(uid, None)
        self._with_volumes.pop((uid, False), None)
        self._with_volumes.pop((uid, True), None)

    def delete_pod(self, pod: Object) -> None:
        """A Pod is gone."""
        key = pod_key(pod)
        self._provisionable.pop(key, None)
        self.pod_scheduling.clear(key)
        if key in self._bindings:
            self._unbind(key)
        self._nominations.drop(key)
        uid = str(pod["metadata"].get("uid") or key)
        self._forget_parsed(uid)
        self._pod_claims.pop(uid, None)

    def _unbind(self, key: str) -> None:
        node_name, _ = self._bindings.pop(key)
        pods = self._node_pods.get(node_name)
        if pods is None:
            return
        pods.remove(key)
        if not pods.pods and node_name not in self._node_name_to_id:
            del self._node_pods[node_name]

    def _pods_of(self, node_name: str) -> NodePods:
        pods = self._node_pods.get(node_name)
        if pods is None:
            pods = self._node_pods[node_name] = NodePods()
            provider_id = self._node_name_to_id.get(node_name)
            state = self._nodes.get(provider_id) if provider_id is not None else None
            if state is not None:
                state.bound = pods
        return pods

    def scheduling_pod(self, pod: Object) -> Pod:
        """The simulator's view of ``pod``, parsed once per pod (by uid)."""
        uid = str(pod["metadata"].get("uid") or pod_key(pod))
        parsed = self._parsed.get(uid)
        if parsed is None:
            parsed = self._parsed[uid] = Pod.from_dict(pod, keep_raw=False)
            self._resize_views[uid] = resize_view(pod)
            claims = claim_refs(pod)
            if claims:
                self._pod_claims[uid] = claims
        return parsed

    def with_volume_topology(self, pod: Pod, *, bound: bool = False) -> Pod:
        """``pod`` (from :meth:`scheduling_pod`) restricted to where its persistent
        volumes can be mounted, with the volumes it attaches per CSI driver (for
        attachment limits); ``pod`` itself when it has no claims.

        ``bound`` is for a pod moving off a node that is going away (see
        :meth:`~karpy.state.volumes.VolumeIndex.requirements`). Raises
        :class:`~karpy.state.volumes.VolumeError` when a claim, its volume or its
        StorageClass cannot be resolved: the pod cannot be provisioned for yet.
        """
        uid = pod.uid or pod.key
        claims = self._pod_claims.get(uid)
        if not claims:
            return pod
        version = self.volumes.version
        cached = self._with_volumes.get((uid, bound))
        if cached is not None and cached[0] == version:
            return cached[1]
        alternatives = self.volumes.requirements(
            pod.namespace, pod.name, pod.uid, claims, bound=bound
        )
        attached = self.volumes.drivers(pod.namespace, claims)
        resolved = (
            dataclasses.replace(pod, volume_requirements=alternatives, volumes=attached)
            if alternatives != pod.volume_requirements or attached != dict(pod.volumes)
            else pod
        )
        self._with_volumes[(uid, bound)] = (version, resolved)
        return resolved

    def provisionable_pods(self) -> list[Object]:
        """Pods that need capacity: provisionable and not nominated to coming capacity."""
        return list(self._provisionable_pods())

    def needs_capacity(self) -> bool:
        """Whether any pod needs capacity: :meth:`provisionable_pods` or
        :meth:`reschedulable_pods` would not be empty (answered at the first such pod,
        without building either list)."""
        return (next(self._provisionable_pods(), None) is not None
                or next(self._reschedulable_pods(), None) is not None)

    def _provisionable_pods(self) -> Iterator[Object]:
        now = self.clock.monotonic()
        for key, pod in self._provisionable.items():
            nomination = self._nominations.get(key)
            if nomination is not None:
                if self._holds(nomination, now):
                    continue
                self._nominations.drop(key)
            yield pod

    def pending_pods(
        self,
        *,
        skip: Callable[[Object, Pod], bool] | None = None,
        invalid: Callable[[Pod, VolumeError], None] | None = None,
    ) -> list[Pod]:
        """The pods that need capacity (:meth:`provisionable_pods`) as the simulator
        sees them, each restricted to where its persistent volumes can be mounted.

        ``skip(obj, pod)`` leaves a pod out before its volumes are resolved (the
        provisioner's own reasons: a pod that avoids managed nodes, DRA claims). A pod
        whose claim, volume or StorageClass cannot be resolved cannot be provisioned
        for yet: it is left out and handed to ``invalid`` with the reason.
        """
        out = []
        for obj in self.provisionable_pods():
            pod = self.scheduling_pod(obj)
            if skip is not None and skip(obj, pod):
                continue
            try:
                out.append(self.with_volume_topology(pod))
            except VolumeError as exc:
                if invalid is not None:
                    invalid(pod, exc)
        return out

    def provisionable_count(self) -> int:
        """How many pods are provisionable (nominated or not)."""
        return len(self._provisionable)

    def is_provisionable(self, key: str) -> bool:
        """Whether pod ``namespace/name`` is provisionable and not nominated."""
        if key not in self._provisionable:
            return False
        return not self.is_nominated(key)

    def reschedulable_pods(self) -> list[Pod]:
        """Pods on machines being deleted that will need a new home (and are not
        nominated to one yet)."""
        return list(self._reschedulable_pods())

    def _reschedulable_pods(self) -> Iterator[Pod]:
        now = self.clock.monotonic()
        for state in self._nodes.values():
            if not state.marked_for_deletion or not state.bound.pods:
                continue
            for key in state.bound.movable:
                nomination = self._nominations.get(key)
                if nomination is not None and self._holds(nomination, now):
                    continue
                yield state.bound.pods[key]

    # -- nominations ---------------------------------------------------------------------

    def nominate(self, pods: Iterable[Pod], target: str, *, ttl: float | None = None) -> None:
        """Expect ``pods`` on ``target``: a node name or a NodeClaim name (what the
        simulator calls an existing node, or a NodeClaim just created)."""
        ttl = self.nomination_ttl if ttl is None else ttl
        key = self._target_key(target)
        until = self.clock.monotonic() + ttl
        for pod in pods:
            self._nominations.add(Nomination(pod=pod, target=key, until=until, ttl=ttl))
        provider_id = self._node_name_to_id.get(target) or self._claim_name_to_id.get(target)
        if provider_id:
            self.nominate_node(provider_id, ttl=ttl)

    def _target_key(self, name: str) -> str:
        provider_id = self._node_name_to_id.get(name)
        if provider_id is not None:
            state = self._nodes.get(provider_id)
            if state is not None and state.nodeclaim is not None:
                return nodeclaim_target(state.nodeclaim_name)
            return node_target(name)
        return nodeclaim_target(name)

    def nomination(self, pod_key: str) -> str | None:
        """The NodeClaim or node pod ``namespace/name`` is nominated to, if it holds
        (``nodeclaim/<name>`` or ``node/<name>``)."""
        nomination = self._nominations.get(pod_key)
        if nomination is None:
            return None
        if not self._holds(nomination, self.clock.monotonic()):
            self._nominations.drop(pod_key)
            return None
        return nomination.target

    def is_nominated(self, pod_key: str) -> bool:
        """Whether pod ``namespace/name`` is expected on coming capacity."""
        return self.nomination(pod_key) is not None

    def _holds(self, nomination: Nomination, now: float) -> bool:
        """A nomination holds while its target is on its way (exists, not going away,
        not initialized), and for its TTL after it was made or the target initialized."""
        kind, _, name = nomination.target.partition("/")
        if kind == "nodeclaim":
            provider_id = self._claim_name_to_id.get(name)
            if provider_id is None:
                return False
            if not provider_id:
                claim = self._unlaunched.get(name)
                return claim is not None and not _deleting(claim)
            state = self._nodes.get(provider_id)
        else:
            state = self._nodes.get(self._node_name_to_id.get(name, ""))
        if state is None or state.marked_for_deletion:
            return False
        if not state.initialized:
            return True
        blocking = untolerated(state.undeclared_taints, nomination.pod.tolerations, prefer=False)
        if blocking is not None:
            # The Node came up with taints its NodeClaim did not declare and this pod does
            # not tolerate. Every NodeClaim planned for it would come up the same way, so
            # letting the nomination lapse would launch node after node for a pod that
            # fits none (Karpenter's documented runaway); the pod stays counted here,
            # pending, until the taint goes or the node does.
            return True
        since = state.initialized_at if state.initialized_at is not None else now
        return now < max(nomination.until, since + nomination.ttl)

    def _targets_of(self, state: StateNode) -> list[str]:
        targets = []
        if state.nodeclaim is not None:
            targets.append(nodeclaim_target(state.nodeclaim_name))
        if state.node_name:
            targets.append(node_target(state.node_name))
        return targets

    def _release(self, targets: Iterable[str]) -> None:
        released: list[str] = []
        for target in targets:
            released.extend(n.pod.key for n in self._nominations.drop_target(target))
        self._notify_released(released)

    def _notify_released(self, released: list[str]) -> None:
        if not released:
            return
        for handler in list(self._release_handlers):
            try:
                handler(released)
            except Exception:
                log.exception("nomination release handler failed")

    def _release_overflow(self, node_name: str) -> None:
        """Release the nominations to this node that its bound pods left no room for.

        kube-scheduler does not know karpy's nominations: when a node comes up it binds
        whichever pending pods come first, often pods karpy expected on another machine
        still on its way. The pods nominated here that no longer fit would otherwise be
        held for the nomination TTL and only then provisioned again, one small round at a
        time; released now, the next round finds them room on the capacity that the
        other pods will not use (or buys it), as Karpenter's re-simulation of every
        pending pod would.
        """
        provider_id = self._node_name_to_id.get(node_name)
        state = self._nodes.get(provider_id) if provider_id is not None else None
        if state is None or not state.allocatable:
            return
        nominations = [
            n for target in self._targets_of(state)
            for n in self._nominations.for_target(target)
            if n.pod.key not in self._bindings
        ]
        if not nominations:
            return
        room = state.available()
        if not state.initialized and self._daemonsets:
            for daemon in self._expected_daemons(state):
                room = res.subtract(room, daemon.requests)
        released: list[str] = []
        # Oldest nominations keep their place; the latest made are the first to go.
        for nomination in sorted(nominations, key=lambda n: n.until):
            if res.fits(nomination.pod.requests, room):
                room = res.subtract(room, nomination.pod.requests)
                continue
            self._nominations.drop(nomination.pod.key)
            released.append(nomination.pod.key)
        self._notify_released(released)

    def nominate_node(self, provider_id: str, *, ttl: float | None = None) -> None:
        """Record that pending pods are expected on this machine (disruption leaves
        nominated machines alone)."""
        state = self._nodes.get(provider_id)
        if state is not None:
            ttl = self.nomination_ttl if ttl is None else ttl
            state.nominated_until = max(state.nominated_until, self.clock.monotonic() + ttl)

    def is_node_nominated(self, provider_id: str) -> bool:
        """Whether pending pods were recently expected on this machine: it was nominated
        within the TTL, or pods nominated to it (to its NodeClaim, perhaps before it
        launched) have not bound yet and their nominations hold."""
        state = self._nodes.get(provider_id)
        if state is None:
            return False
        now = self.clock.monotonic()
        if state.nominated_until > now:
            return True
        # The provisioner nominates pods to a NodeClaim it has just created, when there is
        # no machine to flag yet; without this, a node that came up before the pods bound
        # looks empty to disruption (a launch that outran kube-scheduler's bind).
        return any(
            nomination.pod.key not in self._bindings and self._holds(nomination, now)
            for target in self._targets_of(state)
            for nomination in self._nominations.for_target(target)
        )

    # -- DaemonSets, NodePools, Namespaces ----------------------------------------------

    def update_daemonset(self, daemonset: Object) -> None:
        """A DaemonSet was added or changed: keep the pod it would run on a node."""
        meta = daemonset["metadata"]
        self._daemonsets[f"{meta.get('namespace') or 'default'}/{meta['name']}"] = (
            daemonset_pod(daemonset)
        )

    def delete_daemonset(self, daemonset: Object) -> None:
        """A DaemonSet is gone."""
        meta = daemonset["metadata"]
        self._daemonsets.pop(f"{meta.get('namespace') or 'default'}/{meta['name']}", None)

    def daemonset_pods(self) -> list[Pod]:
        """The pod each DaemonSet would run on a new node."""
        return list(self._daemonsets.values())

    def update_nodepool(self, nodepool: Object) -> None:
        """A NodePool was added or changed: parse it once."""
        name = str(nodepool["metadata"]["name"])
        try:
            model: NodePool | None = NodePool.from_dict(nodepool)
            error = None
        except ValidationError as exc:
            # One line naming each field ("spec.template.spec.requirements[0]: values:
            # ..."), not pydantic's multi-line report.
            model, error = None, "; ".join(validation_problems(exc))
            log.error("ignoring invalid nodepool", extra={"NodePool": {"name": name},
                                                          "error": error})
        self._nodepools[name] = NodePoolEntry(raw=nodepool, model=model, error=error)
        self._pools_version += 1

    def delete_nodepool(self, nodepool: Object) -> None:
        """A NodePool is gone."""
        self._nodepools.pop(str(nodepool["metadata"]["name"]), None)
        self._pools_version += 1

    def nodepools(self) -> list[NodePoolEntry]:
        """Every NodePool, heaviest weight first, then by name."""
        return sorted(self._nodepools.values(), key=lambda e: (-e.weight, e.name))

    def nodepool(self, name: str) -> NodePoolEntry | None:
        """The NodePool called ``name``, if known."""
        return self._nodepools.get(name)

    def nodepool_usage(self, name: str) -> Mapping[str, int]:
        """What the pool's machines use against its limits: capacity summed over its
        launched machines not marked for deletion, plus ``nodes``."""
        return MappingProxyType(self._usage.get(name, {}))

    def shared_limits(self, nodepool: str) -> tuple[SharedLimit, ...]:
        """The ClusterLimits that cover the NodePool, each with what every pool it
        covers uses (summed as :meth:`nodepool_usage`); an invalid one covers nothing."""
        if not self.cluster_limits:
            return ()
        entry = self._nodepools.get(nodepool)
        if entry is None:
            return ()
        return tuple(
            SharedLimit(limit.name, limit.limits, self.cluster_limit_usage(limit)[1])
            for limit in self.cluster_limits.entries()
            if limit.error is None and limit.selects(entry.raw)
        )

    def cluster_limit_usage(
        self, limit: ClusterLimitEntry
    ) -> tuple[list[str], dict[str, int]]:
        """(the NodePools the ClusterLimit covers by name, what their machines use);
        computed once per change of the NodePools, their usage or the ClusterLimit (a
        changed ClusterLimit is a new entry). Read-only."""
        cached = self._limit_usage.get(limit.name)
        if cached is not None and cached[0] == self._pools_version and cached[1] is limit:
            return cached[2]
        pools = sorted(name for name, entry in self._nodepools.items()
                       if limit.selects(entry.raw))
        total: dict[str, int] = {}
        for name in pools:
            for resource, amount in self._usage.get(name, {}).items():
                total[resource] = total.get(resource, 0) + amount
        self._limit_usage[limit.name] = (self._pools_version, limit, (pools, total))
        return pools, total

    def update_csinode(self, csinode: Object) -> None:
        """A CSINode was added or changed: the attachment limits its drivers publish
        (``allocatable.count``), as Karpenter's VolumeUsage.AddLimit / AddUnbounded."""
        limits: dict[str, int | None] = {}
        for driver in (csinode.get("spec") or {}).get("drivers") or ():
            name = driver.get("name")
            if not name:
                continue
            count = (driver.get("allocatable") or {}).get("count")
            limits[str(name)] = int(count) if isinstance(count, int) else None
        self._csinodes[str(csinode["metadata"]["name"])] = MappingProxyType(limits)

    def delete_csinode(self, csinode: Object) -> None:
        """A CSINode is gone."""
        self._csinodes.pop(str(csinode["metadata"]["name"]), None)

    def _with_volume_usage(self, state: StateNode, node: ExistingNode) -> ExistingNode:
        """``node`` with its CSINode's limits and the volumes its bound pods attach."""
        limits = self._csinodes.get(node.name)
        attached: dict[str, frozenset[str]] = {}
        if self._pod_claims:
            for pod in state.bound.pods.values():
                claims = self._pod_claims.get(pod.uid or pod.key)
                if claims:
                    for driver, ids in self.volumes.drivers(pod.namespace, claims).items():
                        attached[driver] = attached.get(driver, frozenset()) | ids
        if not limits and not attached:
            return node
        return dataclasses.replace(node, volume_limits=limits or {}, attached=attached)

    def update_namespace(self, namespace: Object) -> None:
        """A Namespace was added or changed (its labels feed namespaceSelectors)."""
        meta = namespace["metadata"]
        self._namespaces[str(meta["name"])] = meta.get("labels") or {}

    def delete_namespace(self, namespace: Object) -> None:
        """A Namespace is gone."""
        self._namespaces.pop(str(namespace["metadata"]["name"]), None)

    def namespaces(self) -> Mapping[str, Mapping[str, str]]:
        """Namespace name to labels."""
        return MappingProxyType(self._namespaces)

    # -- reading machines ----------------------------------------------------------------

    def nodes(self) -> list[StateNode]:
        """Every machine known (launched NodeClaims and Nodes)."""
        return list(self._nodes.values())

    def node(self, provider_id: str) -> StateNode | None:
        """The machine with this provider ID."""
        return self._nodes.get(provider_id)

    def node_by_name(self, name: str) -> StateNode | None:
        """The machine whose Node is called ``name``."""
        provider_id = self._node_name_to_id.get(name)
        return self._nodes.get(provider_id) if provider_id is not None else None

    def node_for_nodeclaim(self, name: str) -> StateNode | None:
        """The machine of NodeClaim ``name`` (None while it has not launched)."""
        provider_id = self._claim_name_to_id.get(name)
        return self._nodes.get(provider_id) if provider_id else None

    def nodeclaim_exists(self, name: str) -> bool:
        """Whether the model knows NodeClaim ``name`` (launched or not)."""
        return name in self._claim_name_to_id

    def unlaunched_nodeclaims(self) -> list[Object]:
        """NodeClaims without a provider ID yet."""
        return list(self._unlaunched.values())

    def pods_on(self, node_name: str) -> list[Pod]:
        """The pods bound to node ``node_name``."""
        pods = self._node_pods.get(node_name)
        return list(pods.pods.values()) if pods is not None else []

    def existing_nodes(self) -> list[ExistingNode]:
        """The simulator's existing and in-flight capacity: every launched machine not
        marked for deletion, with its bound pods, the pods nominated to it and, while
        it is not initialized, the DaemonSet pods that will start on it."""
        now = self.clock.monotonic()
        out = []
        for state in self._nodes.values():
            if state.marked_for_deletion or not state.allocatable:
                continue
            extra: list[Pod] = []
            for target in self._targets_of(state):
                for nomination in self._nominations.for_target(target):
                    if nomination.pod.key in self._bindings:
                        continue
                    if self._holds(nomination, now):
                        extra.append(nomination.pod)
            if not state.initialized and self._daemonsets:
                extra.extend(self._expected_daemons(state))
            existing = state.to_existing_node(tuple(extra))
            if self._csinodes or self._pod_claims:
                existing = self._with_volume_usage(state, existing)
            out.append(existing)
        for name, claim in self._unlaunched.items():
            if _deleting(claim) or not _requests_of(claim):
                continue
            state = self._launching_state(name, claim)
            extra = [n.pod for n in self._nominations.for_target(nodeclaim_target(name))
                     if n.pod.key not in self._bindings]
            if self._daemonsets:
                extra.extend(self._expected_daemons(state))
            out.append(state.to_existing_node(tuple(extra)))
        return out

    def _launching_state(self, name: str, claim: Object) -> StateNode:
        """A NodeClaim not launched yet, as a machine the size of its requests."""
        cached = self._launching.get(name)
        if cached is not None and cached[0] is claim:
            return cached[1]
        state = StateNode()
        state.set_nodeclaim(claim)
        self._launching[name] = (claim, state)
        return state

    def _expected_daemons(self, state: StateNode) -> list[Pod]:
        """DaemonSet pods that will start on a machine that is still coming up."""
        running = set(state.bound.daemonsets.values())
        labels = Requirements.from_labels(state.labels)
        out = []
        for key, daemon in self._daemonsets.items():
            if key in running:
                continue
            if daemon_runs_on(daemon, state.taints, labels):
                out.append(daemon)
        return out
