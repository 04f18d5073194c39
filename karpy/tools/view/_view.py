"""The cluster view: a live cluster or a snapshot, read into the controllers' own model.

:func:`open_view` reads the source through a :class:`ReadOnlyClient` into the runtime's
:class:`~karpy.runtime.Cache` (real informers: for a snapshot they list from the
in-memory :class:`SnapshotClient`, for a live cluster they list and keep watching), builds
the chosen cloud provider for its catalogue, and then wires itself exactly as the
operator does — :func:`karpy.operator.build_deps` and :func:`karpy.operator.wire`
(``read_only``) on a :class:`~karpy.runtime.Manager` that never runs — so the
:class:`~karpy.state.Cluster` model, the scheduling inputs, the real
:class:`~karpy.controllers.provisioning.Provisioner` and
:class:`~karpy.controllers.disruption.DisruptionController` are the operator's own, and
a tool asks the very code the controllers run. Their Events go to a
:class:`CapturingRecorder`; disruption's 15 s validation is replaced by an immediate
yes, the :data:`~karpy.controllers.disruption.ACCEPT` validator (a view does not wait
for the cluster to change, and re-checking unchanged state gives the same answer).
NodeOverlays (with their gate on, or brought by what-if
objects) are judged as the nodeoverlay controller judges them and applied to the
scheduling inputs' catalogue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.metrics import NoOpMeter

from karpy.apis.extension import load_extensions
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy.cloudprovider import CloudProvider, InstanceType, ProviderContext
from karpy.cloudprovider.registry import build_provider, close_provider, installed_providers
from karpy.controllers.disruption import (
    ACCEPT,
    Command,
    Decision,
    DisruptionController,
)
from karpy.controllers.disruption._method import Method
from karpy.controllers.inputs import SchedulingInputs
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodeoverlay import Verdict, judge
from karpy.controllers.nodepool import NodePoolReadiness, NodePoolValidation
from karpy.controllers.provisioning import Provisioner
from karpy.controllers.settings import Settings
from karpy.operator import build_deps, wire
from karpy.runtime import Cache, Clock, KubeClient, Manager, Object, Request, SystemClock, errors
from karpy.runtime.kinds import Kind
from karpy.scheduling import NodeClaimPlan, NodePoolTemplate, Pod, Results
from karpy.state import NODE_POOL, Cluster, OverlayStore
from karpy.state.clusterlimits import serves_cluster_limits
from karpy.state.cost import offering_price
from karpy.state.kinds import NODE_OVERLAY
from karpy.state.statenode import StateNode
from karpy.tools.view._landing import land
from karpy.tools.view._readonly import ReadOnlyClient, Reads
from karpy.tools.view._recorder import CapturingRecorder
from karpy.tools.view._snapshot import Snapshot
from karpy.tools.view._static import SnapshotClient

__all__ = [
    "DEFAULT_PROVIDER",
    "ClusterView",
    "DisruptionPass",
    "LiveCluster",
    "ViewError",
    "guess_provider",
    "open_view",
]

log = logging.getLogger("karpy.tools")

DEFAULT_PROVIDER = "kwok"
"""The provider used when neither the caller nor the NodePools' NodeClasses name one."""


class ViewError(RuntimeError):
    """The view cannot be built (no such provider, the cluster does not answer, ...);
    the message says which and what to do."""


@dataclass(frozen=True, slots=True)
class LiveCluster:
    """A live cluster as a view's source: kubeconfig path (None: ``$KUBECONFIG`` or
    ``~/.kube/config``) and context (None: the current one)."""

    kubeconfig: str | None = None
    context: str | None = None
    timeout: float = 30.0


@dataclass(frozen=True, slots=True)
class DisruptionPass:
    """What one disruption pass would start: the first method, in Karpenter's order,
    that has commands (Emptiness, Drift, multi-node, single-node consolidation)."""

    method: str
    """``Empty``, ``Drifted``, ``Underutilized/multi`` or ``Underutilized/single``."""
    commands: tuple[Command, ...]


def _method_name(method: Method) -> str:
    if method.reason == "Underutilized":
        return f"{method.reason}/{method.consolidation_type}"
    return str(method.reason)


@dataclass(eq=False)
class ClusterView:
    """A read-only view of a cluster (see the module docstring); build it with
    :func:`open_view`. For a live cluster the model keeps following the watches while
    the view is open."""

    source: Snapshot | LiveCluster
    client: ReadOnlyClient
    """Reads (from the cache for the kinds it holds); every write raises."""
    cache: Cache
    cluster: Cluster
    """The controllers' cluster model."""
    provider: CloudProvider
    provider_name: str
    scheduling: SchedulingInputs
    """The scheduling inputs the provisioner and disruption share (instance types,
    NodePool templates, pending pods, options)."""
    provisioner: Provisioner
    """The real provisioner (call :meth:`schedule`, never ``provision``)."""
    disruption: DisruptionController
    """The real disruption controller, validating at once (use :meth:`disruption_pass`)."""
    recorder: CapturingRecorder
    """The Events the controllers recorded while the view was asked things."""
    settings: Settings
    clock: Clock
    overlays: Verdict | None = None
    """The NodeOverlays judged and applied to the catalogue (None: overlays are off)."""

    @property
    def live(self) -> bool:
        """True for a live cluster, False for a snapshot."""
        return isinstance(self.source, LiveCluster)

    @property
    def synced(self) -> bool:
        """The model can be trusted for provisioning: every launching NodeClaim says
        what it asked for (until then the provisioner waits rather than buy capacity
        twice; see ``Cluster.synced_for_provisioning``)."""
        return self.cluster.synced_for_provisioning

    def objects(self, kind: Kind) -> list[Object]:
        """Every cached object of ``kind`` (one of :func:`view_kinds`'s core kinds)."""
        return self.cache.list(kind)

    async def instance_types(self, nodepool: str) -> Sequence[InstanceType]:
        """The instance types ``nodepool`` may launch, as the provisioner sees them
        (unavailable offerings masked); empty for an unknown or invalid NodePool. Raises
        what the provider raises (a NodeClass that is missing or not ready, ...)."""
        entry = self.cluster.nodepool(nodepool)
        if entry is None:
            return ()
        return await self.scheduling.instance_types.get(entry)

    async def node_price(self, state: StateNode) -> float | None:
        """What a managed machine costs per hour: the price of its offering (its
        NodePool's instance type in its zone and capacity type, available or not); None
        for an unmanaged node, or one whose type the provider cannot price."""
        labels = state.labels
        name = labels.get(LABEL_INSTANCE_TYPE)
        if not state.nodepool or not name:
            return None
        try:
            types = {it.name: it for it in await self.instance_types(state.nodepool)}
        except Exception:  # the provider cannot list them (another provider's pool, ...)
            return None
        instance_type = types.get(name)
        if instance_type is None:
            return None
        return offering_price(instance_type, labels.get(LABEL_ZONE),
                              labels.get(LABEL_CAPACITY_TYPE))

    def pending_pods(self) -> list[Pod]:
        """The pods the provisioner would provision for (provisionable, not nominated,
        volume topology applied), as the simulator sees them."""
        return self.scheduling.pending_pods()

    async def templates(self) -> list[NodePoolTemplate]:
        """The usable NodePools (ready, valid, with instance types), heaviest first."""
        return await self.scheduling.templates()

    async def schedule(self) -> Results | None:
        """One provisioning round's decision (None when no pod needs capacity or no
        NodePool is usable). Like the provisioner, it nominates pods that fit existing
        capacity in the model, so a second call answers for what is left."""
        return await self.provisioner.schedule()

    def land(self, results: Results) -> Mapping[str, NodeClaimPlan]:
        """Assume ``results`` has landed: its NodeClaims launched and initialized, its
        pods running where it put them, landed at the view's clock's now (in the model
        only; see ``_landing``). Returns
        the simulated machines' names and their plans. Call before
        :meth:`disruption_pass` to ask what disruption would do next."""
        return land(self.cluster, self.cache, results, self.clock.now())

    async def disruption_pass(self) -> DisruptionPass | None:
        """What the next disruption pass would start (None: nothing to disrupt). Never
        executes anything; call after :meth:`schedule` to see what disruption sees after
        a provisioning round."""
        for method in self.disruption.methods:
            context = await self.disruption.context(method)
            if not context.candidates:
                continue
            commands = [c for c in await method.compute(context)
                        if c.decision is not Decision.NOOP]
            if commands:
                return DisruptionPass(method=_method_name(method), commands=tuple(commands))
        return None


def guess_provider(nodepools: Sequence[Mapping[str, Any]]) -> str:
    """The provider whose NodeClass the NodePools reference (the first one that an
    installed provider serves), else :data:`DEFAULT_PROVIDER`."""
    installed = installed_providers()
    owners: dict[tuple[str, str], str] = {}
    for extension in load_extensions(include_core=False):
        for resource in extension.resources:
            owners[(resource.crd.group, resource.crd.kind)] = extension.name
    for pool in nodepools:
        ref = (((pool.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
            "nodeClassRef") or {}
        owner = owners.get((str(ref.get("group", "")), str(ref.get("kind", ""))))
        if owner is not None and owner in installed:
            return owner
    return DEFAULT_PROVIDER


async def _refresh_nodepool_status(
    client: SnapshotClient, provider: CloudProvider, names: Sequence[str], clock: Clock
) -> None:
    """Run the NodePool controllers' validation and readiness on what-if NodePools, in
    the snapshot's memory: their Ready condition is then what it would be on a cluster
    (a pool whose NodeClass is missing or not ready, or that is invalid, is not used)."""
    validation = NodePoolValidation(client=client, cloud_provider=provider, clock=clock)
    readiness = NodePoolReadiness(client=client, cloud_provider=provider, clock=clock)
    for name in names:
        await validation.reconcile(Request("", name))
        await readiness.reconcile(Request("", name))


async def _connect(source: LiveCluster) -> KubeClient:
    try:
        return await KubeClient.from_kubeconfig(
            source.kubeconfig, context=source.context, timeout=source.timeout
        )
    except Exception as exc:
        raise ViewError(f"cannot connect to the cluster: {exc}") from exc


@contextlib.asynccontextmanager
async def open_view(
    source: Snapshot | LiveCluster,
    *,
    provider: str | None = None,
    provider_settings: Mapping[str, str] | None = None,
    what_if: Snapshot | None = None,
    settings: Settings | None = None,
    clock: Clock | None = None,
    sync_timeout: float = 120.0,
) -> AsyncIterator[ClusterView]:
    """Open a :class:`ClusterView` of ``source``; closed (watches stopped, provider and
    connection closed) on exit.

    ``provider`` is the cloud provider's entry-point name (default: the one serving the
    NodePools' NodeClasses, else kwok); ``provider_settings`` its settings, as ``karpy
    run --provider-setting`` takes them. ``what_if`` (snapshots only) replaces or adds
    objects — typically NodePools — whose status the NodePool controllers then derive
    in memory. Raises :class:`ViewError` when the view cannot be built.
    """
    settings = settings or Settings()
    clock = clock or SystemClock()
    inner: Reads
    static: SnapshotClient | None = None
    if isinstance(source, Snapshot):
        static = SnapshotClient(source.with_objects(what_if) if what_if else source, clock=clock)
        inner = static
        pools: Sequence[Mapping[str, Any]] = static.objects(NODE_POOL)
    else:
        if what_if is not None:
            raise ViewError("what-if objects need a snapshot source (take one first)")
        inner = await _connect(source)
        pools = []
    base = ReadOnlyClient(inner, owns=not isinstance(source, Snapshot), tool="karpy view")
    # The operator's own wiring on a manager that never runs (no servers, no leader
    # election): only its cache is run, by _running.
    manager = Manager(base, metrics_bind_address="0", health_probe_bind_address="0",
                      clock=clock)
    try:
        cache = manager.cache
        client = base.with_reader(cache)
        if provider is None and not pools and not isinstance(source, Snapshot):
            try:
                pools = await base.list(NODE_POOL)
            except Exception as exc:
                raise ViewError(f"cannot list NodePools: {exc}") from exc
        name = provider or guess_provider(pools)
        store = OverlayStore()
        try:
            cloud = await build_provider(name, ProviderContext(
                client=client, cluster_name=settings.cluster_name,
                settings=dict(provider_settings or {}),
                feature_gates=settings.feature_gates.as_mapping(),
                overlays=store,
            ))
        except Exception as exc:
            # The registry's message ends with the provider's traceback: keep the first line.
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise ViewError(f"cannot build cloud provider {name!r}: {first}") from exc
        try:
            if static is not None and what_if is not None:
                await _refresh_nodepool_status(
                    static, cloud, [str(p["metadata"]["name"]) for p in what_if.of(NODE_POOL)],
                    clock,
                )
            recorder = CapturingRecorder(clock=clock)
            deps = build_deps(
                manager=manager, provider=cloud, clock=clock, settings=settings,
                recorder=recorder, metrics=KarpenterMetrics(NoOpMeter("karpy.tools")),
                overlays=store, cluster_limits=await serves_cluster_limits(base),
            )
            controllers = wire(deps, read_only=True, disruption_validator=ACCEPT)
            overlays = await _overlays(base, static, what_if, settings)
            async with _running(cache, sync_timeout):
                view = ClusterView(
                    source=source, client=client, cache=cache, cluster=deps.cluster,
                    provider=cloud, provider_name=name, scheduling=deps.scheduling,
                    provisioner=controllers.provisioner, disruption=controllers.disruption,
                    recorder=recorder, settings=settings, clock=clock,
                )
                if overlays is not None:
                    view.overlays = await judge(overlays, deps.cluster,
                                                deps.scheduling.instance_types)
                    deps.overlays.update(view.overlays.applied, view.overlays.evaluated)
                yield view
        finally:
            await close_provider(cloud)
    finally:
        manager.metrics.shutdown()  # its meter provider, which nothing reads
        await base.close()


async def _overlays(
    base: ReadOnlyClient, static: SnapshotClient | None, what_if: Snapshot | None,
    settings: Settings,
) -> list[Object] | None:
    """The NodeOverlays the view applies: the source's when the NodeOverlay gate is on,
    and always when the what-if objects bring some (``karpy simulate -f overlay.yaml``
    asks what they would change). None: overlays are off."""
    if not settings.feature_gates.node_overlay and (
        what_if is None or not what_if.of(NODE_OVERLAY)
    ):
        return None
    if static is not None:
        return list(static.objects(NODE_OVERLAY))
    try:
        return list(await base.list(NODE_OVERLAY))
    except (errors.NotFound, errors.Forbidden):  # no CRD, or not ours to read
        return []


@contextlib.asynccontextmanager
async def _running(cache: Cache, sync_timeout: float) -> AsyncIterator[None]:
    """Run the cache's informers while the block runs; wait for their first lists."""
    task = asyncio.create_task(cache.run(), name="karpy.tools.view:cache")
    try:
        sync = asyncio.create_task(cache.wait_for_sync(), name="karpy.tools.view:sync")
        done, _ = await asyncio.wait({task, sync}, timeout=sync_timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if sync not in done:
            sync.cancel()
            if task in done:
                task.result()  # the cache failed: raise its error
            waiting = [str(i.kind) for i in cache.informers() if not i.has_synced]
            raise ViewError(
                f"the cluster did not answer within {sync_timeout:g}s (still listing: "
                f"{', '.join(waiting)}); check the kubeconfig and that it may get, list "
                "and watch them"
            )
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
