"""The composition root: builds the manager, the provider and every controller from one
:class:`~karpy.options.Options` value, explicitly — no globals, no configuration hidden
in context. ``karpy run`` calls :func:`run_operator`; tests build an :class:`Operator`
directly and run it in-process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from karpy import __version__
from karpy.cloudprovider import CloudProvider, ProviderContext, UnavailableOfferings
from karpy.cloudprovider.registry import (
    build_provider,
    close_provider,
    register_provider_controllers,
)
from karpy.controllers import (
    capacitybuffer,
    disruption,
    nodeclaim,
    nodehealth,
    nodeoverlay,
    nodepool,
    provisioning,
    static,
    termination,
)
from karpy.controllers import metrics as metrics_controllers
from karpy.controllers.deps import Deps
from karpy.controllers.inputs import SchedulingInputs
from karpy.controllers.instrumented_provider import InstrumentedCloudProvider
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.settings import UNIMPLEMENTED_GATES, Settings
from karpy.options import Options
from karpy.runtime import (
    Clock,
    EventRecorder,
    KubeClient,
    LeaderElectionConfig,
    Manager,
    SystemClock,
)
from karpy.state import Cluster, OverlayStore
from karpy.state.clusterlimits import serves_cluster_limits

__all__ = [
    "CONTROLLER_PACKAGES",
    "Controllers",
    "Operator",
    "Options",
    "build_deps",
    "run_operator",
    "warn_unimplemented_gates",
    "wire",
]

log = logging.getLogger("karpy.operator")

CONTROLLER_PACKAGES: tuple[Callable[[Deps], object], ...] = (
    nodeclaim.register,
    termination.register,
    nodepool.register,
    metrics_controllers.register,
    nodehealth.register,
)
"""The ``register`` of every controller package that needs only ``Deps``, in the order
:func:`wire` adds them (after provisioning, disruption and the packages that feed the
provisioner)."""


def build_deps(
    *,
    manager: Manager,
    provider: CloudProvider,
    clock: Clock,
    settings: Settings,
    recorder: EventRecorder | None = None,
    metrics: KarpenterMetrics | None = None,
    overlays: OverlayStore | None = None,
    cluster_limits: bool = False,
) -> Deps:
    """Every shared dependency of the controllers, built around ``manager``: the cluster
    model attached to its cache, the provider wrapped for karpenter_cloudprovider_*
    metrics, the unavailable offerings, the NodeOverlays in force and the scheduling
    inputs they feed. ``recorder`` and ``metrics`` default to the manager's (Events
    under ``karpenter``, metrics on its /metrics); ``overlays`` is the store the provider
    was given (:attr:`ProviderContext.overlays`), else a new one. ``cluster_limits``:
    the API server serves karpy's ClusterLimits
    (:func:`karpy.state.clusterlimits.serves_cluster_limits`), so the model watches
    them."""
    if metrics is None:
        metrics = KarpenterMetrics(manager.meter("karpenter"), manager.metrics.registry)
    if recorder is None:
        recorder = manager.event_recorder("karpenter")
    cluster = Cluster(clock=clock, nomination_ttl=settings.pod_nomination_ttl)
    cluster.attach(manager.cache, dynamic_resources=not settings.ignore_dra_requests,
                   node_classes=provider.supported_node_classes(),
                   cluster_limits=cluster_limits,
                   workloads=bool(settings.scheduler_config))
    cloud_provider = InstrumentedCloudProvider(provider, metrics)
    unavailable = UnavailableOfferings(clock=clock, ttl=settings.insufficient_capacity_ttl)
    overlays = overlays if overlays is not None else OverlayStore()
    return Deps(
        manager=manager,
        client=manager.client,
        cloud_provider=cloud_provider,
        cluster=cluster,
        unavailable_offerings=unavailable,
        recorder=recorder,
        clock=clock,
        settings=settings,
        metrics=metrics,
        overlays=overlays,
        scheduling=SchedulingInputs(
            cluster=cluster, cloud_provider=cloud_provider, unavailable_offerings=unavailable,
            recorder=recorder, clock=clock, settings=settings, metrics=metrics,
            overlays=overlays,
        ),
    )


@dataclass(frozen=True, slots=True)
class Controllers:
    """What :func:`wire` built that callers ask questions of."""

    provisioner: provisioning.Provisioner
    disruption: disruption.DisruptionController


def wire(
    deps: Deps,
    *,
    read_only: bool = False,
    disruption_validator: disruption.Validator | None = None,
) -> Controllers:
    """Build karpy's controllers from ``deps`` onto ``deps.manager``: the one place a
    controller is wired, for the operator and for the tools' read-only view alike.

    Provisioning and disruption come first, together (disruption creates replacements
    through the provisioner; nodeoverlay, static and capacitybuffer feed it). With
    ``read_only`` (:func:`karpy.tools.view.open_view`) only those two are built: a view
    asks them what they would do and never runs the manager, so nothing that acts on
    its own is wanted, nor the informers it would add. ``disruption_validator``
    replaces the disruption controller's validation of its commands (the view's,
    :data:`karpy.controllers.disruption.ACCEPT`, passes them at once)."""
    provisioner = provisioning.register(deps)
    deciding = disruption.register(deps, provisioner, validator=disruption_validator)
    if not read_only:
        nodeoverlay.register(deps, provisioner)
        static.register(deps, provisioner)
        capacitybuffer.register(deps, provisioner)
        for register in CONTROLLER_PACKAGES:
            register(deps)
    return Controllers(provisioner=provisioner, disruption=deciding)


class Operator:
    """karpy, assembled: call :meth:`start` then :meth:`run`, or use :func:`run_operator`.

    Building is split from running so a caller (a test, an embedding program) can reach
    the manager, the provider and the cluster model before the controllers start.
    """

    def __init__(self, options: Options, *, clock: Clock | None = None) -> None:
        self.options = options
        self.clock: Clock = clock or SystemClock()
        self._client: KubeClient | None = None
        self._provider: CloudProvider | None = None
        self._manager: Manager | None = None
        self._deps: Deps | None = None
        self.disruption: disruption.DisruptionController | None = None
        """The disruption controller (after :meth:`start`)."""

    @property
    def manager(self) -> Manager:
        """The runtime manager (after :meth:`start`)."""
        if self._manager is None:
            raise RuntimeError("Operator.start() has not been called")
        return self._manager

    @property
    def provider(self) -> CloudProvider:
        """The cloud provider as its plugin built it (after :meth:`start`), unwrapped
        from the metrics wrapper the controllers see."""
        if self._provider is None:
            raise RuntimeError("Operator.start() has not been called")
        return self._provider

    @property
    def deps(self) -> Deps:
        """What the controllers were built from (after :meth:`start`)."""
        if self._deps is None:
            raise RuntimeError("Operator.start() has not been called")
        return self._deps

    async def start(self) -> None:
        """Connect, load the provider and build every controller (nothing runs yet)."""
        opts = self.options
        qps, burst = opts.kube_client_qps, opts.kube_client_burst
        if opts.kubeconfig is not None:
            client = await KubeClient.from_kubeconfig(
                opts.kubeconfig, timeout=opts.request_timeout, qps=qps, burst=burst
            )
        else:
            client = await KubeClient.from_environment(
                timeout=opts.request_timeout, qps=qps, burst=burst
            )
        self._client = client
        leader = (
            # Renewed from a thread of its own: a busy event loop cannot starve it.
            LeaderElectionConfig(
                name=opts.leader_election_name, namespace=opts.leader_election_namespace,
                renew_in_thread=True,
            )
            if opts.leader_elect
            else None
        )
        manager = Manager(
            client,
            leader_election=leader,
            metrics_bind_address=opts.metrics_bind_address,
            health_probe_bind_address=opts.health_probe_bind_address,
            graceful_shutdown_timeout=opts.graceful_shutdown_timeout,
            clock=self.clock,
        )
        self._manager = manager
        # one store: the provider's create applies the overlays the core plans with
        overlays = OverlayStore()
        provider = await build_provider(
            opts.cloud_provider,
            ProviderContext(
                client=manager.client,
                cluster_name=opts.settings.cluster_name,
                settings=dict(opts.provider_settings),
                feature_gates=opts.settings.feature_gates.as_mapping(),
                overlays=overlays,
            ),
        )
        self._provider = provider
        self._deps = build_deps(
            manager=manager, provider=provider, clock=self.clock, settings=opts.settings,
            overlays=overlays, cluster_limits=await serves_cluster_limits(client),
        )
        self.disruption = wire(self._deps).disruption
        warn_unimplemented_gates(opts.settings)
        # The provider's own controllers (NodeClass status, interruption, ...) go on the
        # same manager, after the core's: they share its cache and leader election.
        register_provider_controllers(provider, manager)
        log.info(
            "karpy operator built",
            extra={"version": __version__, "cloud-provider": provider.name},
        )

    async def run(self, *, handle_signals: bool = False) -> None:
        """Run until stopped (:meth:`stop`, cancellation, or SIGTERM with handle_signals)."""
        try:
            await self.manager.run(handle_signals=handle_signals)
        finally:
            await self.close()

    def stop(self) -> None:
        """Ask the manager to shut down gracefully."""
        if self._manager is not None:
            self._manager.stop()

    async def close(self) -> None:
        """Close the provider and the client. Idempotent."""
        provider, self._provider = self._provider, None
        if provider is not None:
            await close_provider(provider)
        client, self._client = self._client, None
        if client is not None:
            await client.close()


def warn_unimplemented_gates(settings: Settings) -> None:
    """Say once, at start-up, which gates are on that karpy accepts but does not
    implement (:data:`~karpy.controllers.settings.UNIMPLEMENTED_GATES`).

    Karpenter would act on them; karpy starts anyway so a Karpenter values file still
    installs, and a warning per gate tells the operator what will not happen.
    """
    for gate in settings.feature_gates.unimplemented_on():
        log.warning(
            "feature gate is not implemented by karpy and has no effect",
            extra={"feature-gate": gate, "effect": UNIMPLEMENTED_GATES[gate]},
        )


async def run_operator(options: Options) -> None:
    """Build karpy from ``options`` and run it until SIGTERM/SIGINT."""
    operator = Operator(options)
    try:
        await operator.start()
    except BaseException:
        await operator.close()
        raise
    await operator.run(handle_signals=True)
