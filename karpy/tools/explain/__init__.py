"""``karpy explain``: why a pod is pending, why a node is or is not disrupted.

:func:`explain_pod` and :func:`explain_node` are pure: they read the controllers' own
cluster model and run the provisioner's simulator and disruption's candidate checks,
budgets and what-if consolidation on it, without executing anything.
:func:`explain_pod_in` and :func:`explain_node_in` do the same on a
:class:`~karpy.tools.view.ClusterView` (a live cluster or a snapshot). Every answer has a
``to_dict()`` with the stable ``-o json`` schema of docs/tools.md, and
:func:`render_pod` / :func:`render_node` print it for people.
"""

from karpy.tools.explain._node import MethodVerdict, NodeExplanation, explain_node
from karpy.tools.explain._pod import PodExplanation, PoolInput, PoolVerdict, explain_pod
from karpy.tools.explain._reason import Reason
from karpy.tools.explain._render import render_node, render_pod
from karpy.tools.explain._run import explain_node_in, explain_pod_in

__all__ = [
    "MethodVerdict",
    "NodeExplanation",
    "PodExplanation",
    "PoolInput",
    "PoolVerdict",
    "Reason",
    "explain_node",
    "explain_node_in",
    "explain_pod",
    "explain_pod_in",
    "render_node",
    "render_pod",
]
