"""The pod a DaemonSet runs on every node it selects, as the simulator sees it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.scheduling import Pod, Toleration

__all__ = ["daemonset_pod"]

# The DaemonSet controller adds these tolerations to every pod it creates
# (k8s.io/kubernetes pkg/controller/daemon/util), so a template does not show them.
_DAEMON_TOLERATIONS = (
    Toleration(key="node.kubernetes.io/not-ready", operator="Exists", effect="NoExecute"),
    Toleration(key="node.kubernetes.io/unreachable", operator="Exists", effect="NoExecute"),
    Toleration(key="node.kubernetes.io/disk-pressure", operator="Exists", effect="NoSchedule"),
    Toleration(key="node.kubernetes.io/memory-pressure", operator="Exists", effect="NoSchedule"),
    Toleration(key="node.kubernetes.io/pid-pressure", operator="Exists", effect="NoSchedule"),
    Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule"),
)


def daemonset_pod(daemonset: Mapping[str, Any]) -> Pod:
    """The DaemonSet's pod template, with the tolerations its controller adds."""
    pod = Pod.from_daemonset_dict(daemonset)
    tolerations = pod.tolerations + tuple(
        t for t in _DAEMON_TOLERATIONS if t not in pod.tolerations
    )
    return Pod(
        name=pod.name, namespace=pod.namespace, labels=pod.labels, requests=pod.requests,
        node_selector=pod.node_selector, required_node_terms=pod.required_node_terms,
        tolerations=tolerations, host_ports=pod.host_ports, is_daemon=True,
    )
