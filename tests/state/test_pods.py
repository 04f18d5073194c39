"""Which pods the autoscaler provisions for and reschedules: ownership is judged by an
owner reference's apiVersion and kind together, as Karpenter's pod utilities judge it,
so the state model and node termination read a pod alike."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.apis.pods import is_active, is_owned_by_daemonset, is_owned_by_node, is_terminal
from karpy.state.pods import is_provisionable, is_reschedulable
from karpy.state.testing import pod


def owned_by(api_version: str, kind: str, **kw: Any) -> dict[str, Any]:
    obj = pod("p", owner_kind=None, **kw)
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": api_version, "kind": kind, "name": "o", "uid": "o", "controller": True}
    ]
    return obj


def test_a_daemonset_of_another_api_group_is_not_the_daemonset_controllers() -> None:
    """An OpenKruise Advanced DaemonSet (apps.kruise.io) schedules through kube-scheduler:
    its pending pods need capacity like any other (Karpenter's IsOwnedByDaemonSet is
    apps/v1 only)."""
    kruise = owned_by("apps.kruise.io/v1alpha1", "DaemonSet")
    assert not is_owned_by_daemonset(kruise)
    assert is_provisionable(kruise)
    assert not is_provisionable(owned_by("apps/v1", "DaemonSet"))


def test_only_a_core_node_owner_makes_a_mirror_pod() -> None:
    assert is_owned_by_node(owned_by("v1", "Node"))
    assert not is_reschedulable(owned_by("v1", "Node", node_name="n1"))
    custom = owned_by("example.com/v1", "Node", node_name="n1")
    assert not is_owned_by_node(custom)
    assert is_reschedulable(custom)


@pytest.mark.parametrize(("phase", "terminal"),
                         [("Pending", False), ("Running", False), ("Succeeded", True),
                          ("Failed", True)])
def test_terminal_is_a_phase_and_active_excludes_deleting(phase: str, terminal: bool) -> None:
    assert is_terminal(pod("p", phase=phase)) is terminal
    assert is_active(pod("p", phase=phase)) is not terminal
    assert not is_active(pod("p", phase=phase, deleting=True))
