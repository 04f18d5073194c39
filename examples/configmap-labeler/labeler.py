"""configmap-labeler: a complete controller written against karpy.runtime alone.

Every ConfigMap in the watched namespace gets the label
``configmap-labeler.karpy.dev/keys=<number of data keys>``, kept up to date as the data
changes, and a Normal event "Labeled" the first time. Run it against any cluster::

    python examples/configmap-labeler/labeler.py --namespace default

It reads ConfigMaps from the shared cache, writes with a merge patch, runs 2 workers
behind leader election, and serves /healthz, /readyz and /metrics.
"""

from __future__ import annotations

import argparse
import logging

from karpy.runtime import (
    Client,
    EventRecorder,
    KubeClient,
    LeaderElectionConfig,
    Manager,
    Request,
    Result,
    configure_logging,
    errors,
    kinds,
    run,
)

LABEL = "configmap-labeler.karpy.dev/keys"
log = logging.getLogger("configmap-labeler")


class Labeler:
    """Reconciles one ConfigMap: make its label match its number of data keys."""

    def __init__(self, client: Client, events: EventRecorder) -> None:
        self.client = client
        self.events = events

    async def reconcile(self, request: Request) -> Result:
        try:
            cm = await self.client.get(kinds.CONFIG_MAP, request.name, namespace=request.namespace)
        except errors.NotFound:
            return Result()  # deleted meanwhile: nothing to do
        want = str(len(cm.get("data") or {}) + len(cm.get("binaryData") or {}))
        labels = cm["metadata"].get("labels") or {}
        if labels.get(LABEL) == want:
            return Result()
        await self.client.patch(
            kinds.CONFIG_MAP,
            request.name,
            {"metadata": {"labels": {LABEL: want}}},
            namespace=request.namespace,
        )
        log.info("labeled configmap", extra={"keys": want})
        if LABEL not in labels:
            self.events.normal(cm, "Labeled", f"labeled with {LABEL}={want}")
        return Result()


def build(
    client: Client,
    *,
    namespace: str,
    lease_namespace: str | None = None,
    identity: str | None = None,
    **manager_options: object,
) -> Manager:
    """Wire the manager and the controller (tests call this with their own client)."""
    election = LeaderElectionConfig(
        name="configmap-labeler",
        namespace=lease_namespace or namespace,
        **({"identity": identity} if identity else {}),
    )
    manager = Manager(client, namespace=namespace, leader_election=election, **manager_options)  # type: ignore[arg-type]
    labeler = Labeler(manager.client, manager.event_recorder("configmap-labeler"))
    manager.controller("configmap-labeler").for_(kinds.CONFIG_MAP).complete(labeler, workers=2)
    return manager


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--metrics-bind-address", default=":8080")
    parser.add_argument("--health-probe-bind-address", default=":8081")
    args = parser.parse_args()
    configure_logging("INFO")
    async with await KubeClient.from_kubeconfig(args.kubeconfig) as client:
        manager = build(
            client,
            namespace=args.namespace,
            metrics_bind_address=args.metrics_bind_address,
            health_probe_bind_address=args.health_probe_bind_address,
        )
        await manager.run(handle_signals=True)


if __name__ == "__main__":
    run(main())
