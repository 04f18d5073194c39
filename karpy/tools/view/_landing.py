"""Assume a provisioning decision has landed: what the cluster model looks like once
the planned NodeClaims have launched and initialized and the pods run where the plan
put them — in memory only, so a disruption pass can be asked about the cluster karpy
is heading for rather than about the moment before it acts.

Each planned NodeClaim is built as the provisioner would create it
(:func:`~karpy.controllers.provisioning.nodeclaims.nodeclaim_manifest`), launched as a
provider would launch it (the cheapest fitting offering, :func:`choose_launch`,
:func:`launched_nodeclaim`), given a Node, and fed to the model with its pods bound.
The machines are named ``<nodepool>-simulated-<n>`` with provider IDs
``simulated://<name>``. They land *now*: their conditions and their last pod event carry
the time given, so a NodePool's consolidateAfter keeps consolidation's pods off them, as
Karpenter's ``IsUnderConsolidateAfter`` does for a node that has just initialized.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from karpy.apis import NodeClaim
from karpy.apis.labels import LABEL_HOSTNAME, LABEL_INITIALIZED, LABEL_REGISTERED
from karpy.cloudprovider.launch import choose_launch, launched_nodeclaim
from karpy.controllers.provisioning.nodeclaims import nodeclaim_manifest
from karpy.runtime import Cache, errors, format_time, freeze, kinds, thaw
from karpy.scheduling import NodeClaimPlan, Results
from karpy.state import Cluster

__all__ = ["PROVIDER_ID_PREFIX", "land"]

PROVIDER_ID_PREFIX = "simulated://"

def _conditions(when: str, *types: str) -> list[dict[str, str]]:
    return [{"type": t, "status": "True", "reason": t, "message": "",
             "lastTransitionTime": when} for t in types]


def _launched(plan: NodeClaimPlan, cluster: Cluster, name: str,
              when: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    entry = cluster.nodepool(plan.nodepool)
    if entry is None or entry.model is None:
        return None
    manifest = nodeclaim_manifest(plan, entry.model, uid=entry.uid)
    manifest["metadata"].pop("generateName", None)
    manifest["metadata"]["name"] = name
    nodeclaim = NodeClaim.from_dict(manifest)
    choice = choose_launch(nodeclaim, plan.instance_types)
    launched = launched_nodeclaim(nodeclaim, choice, provider_id=PROVIDER_ID_PREFIX + name)
    claim: dict[str, Any] = launched.to_dict()
    labels = {**claim["metadata"].get("labels", {}), LABEL_HOSTNAME: name,
              LABEL_REGISTERED: "true", LABEL_INITIALIZED: "true"}
    claim["metadata"]["labels"] = labels
    claim["status"]["nodeName"] = name
    claim["status"]["conditions"] = _conditions(
        when, "Launched", "Registered", "Initialized", "Ready")
    claim["status"]["lastPodEventTime"] = when  # its pods were just bound
    node = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": PROVIDER_ID_PREFIX + name},
        "status": {"capacity": claim["status"]["capacity"],
                   "allocatable": claim["status"]["allocatable"],
                   "conditions": _conditions(when, "Ready")},
    }
    return claim, node


def _bind(cache: Cache, cluster: Cluster, keys: list[str], node: str, when: str) -> None:
    for key in keys:
        namespace, _, name = key.partition("/")
        try:
            pod: dict[str, Any] = thaw(cache.get(kinds.POD, name, namespace=namespace))
        except errors.NotFound:
            continue
        pod.setdefault("spec", {})["nodeName"] = node
        pod["status"] = {"phase": "Running",
                         "conditions": _conditions(when, "PodScheduled", "Ready")}
        cluster.update_pod(freeze(pod))


def land(cluster: Cluster, cache: Cache, results: Results,
         now: datetime) -> Mapping[str, NodeClaimPlan]:
    """Feed ``results`` to ``cluster`` as landed at ``now`` (see the module docstring);
    returns the simulated machines' names and the plans they came from."""
    when = format_time(now)
    landed: dict[str, NodeClaimPlan] = {}
    for placement in results.existing_nodes:
        _bind(cache, cluster, [p.key for p in placement.pods], placement.node, when)
    counters: dict[str, int] = {}
    for plan in results.new_nodeclaims:
        counters[plan.nodepool] = counters.get(plan.nodepool, 0) + 1
        name = f"{plan.nodepool}-simulated-{counters[plan.nodepool]}"
        built = _launched(plan, cluster, name, when)
        if built is None:
            continue
        claim, node = built
        cluster.update_nodeclaim(freeze(claim))
        cluster.update_node(freeze(node))
        _bind(cache, cluster, [p.key for p in plan.pods], name, when)
        landed[name] = plan
    return landed
