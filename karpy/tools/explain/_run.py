"""The explainers on a :class:`~karpy.tools.view.ClusterView`: gather what the pure
functions need from the view's model, scheduling inputs and disruption controller (the
very objects the operator builds), then explain."""

from __future__ import annotations

from karpy.runtime import errors, kinds
from karpy.tools.explain._node import NodeExplanation, explain_node
from karpy.tools.explain._pod import PodExplanation, PoolInput, explain_pod
from karpy.tools.view import ClusterView

__all__ = ["explain_node_in", "explain_pod_in"]


async def explain_pod_in(view: ClusterView, key: str) -> PodExplanation:
    """Explain pod ``namespace/name`` in ``view``."""
    namespace, _, name = key.rpartition("/")
    namespace = namespace or "default"
    key = f"{namespace}/{name}"
    try:
        raw = view.cache.get(kinds.POD, name, namespace=namespace)
    except errors.NotFound:
        raw = None
    pools: list[PoolInput] = []
    for entry in view.cluster.nodepools():
        if entry.model is None:
            pools.append(PoolInput(entry))
            continue
        try:
            types = await view.scheduling.instance_types.get(entry)
        except Exception as exc:  # the provider's reason is the answer (NodeClass, ...)
            pools.append(PoolInput(entry, error=str(exc) or type(exc).__name__))
            continue
        pools.append(PoolInput(entry, tuple(types)))
    return explain_pod(key, raw, cluster=view.cluster, pools=pools,
                       options=view.scheduling.options)


async def explain_node_in(view: ClusterView, name: str) -> NodeExplanation:
    """Explain node ``name`` (a Node's name, or a NodeClaim's that has no Node yet)."""
    cluster = view.cluster
    state = cluster.node_by_name(name) or cluster.node_for_nodeclaim(name)
    disruption = view.disruption
    snapshot = await disruption.snapshot()
    methods = [m for m in disruption.methods if m.consolidation_type != "multi"]
    budgets = {str(m.reason): disruption.budgets(m.reason, record=False) for m in methods}
    whatif = await disruption.whatif() if state is not None else None
    gates = view.settings.feature_gates
    return explain_node(
        name, state, snapshot=snapshot, methods=methods, budgets=budgets, whatif=whatif,
        spot_to_spot=gates.spot_to_spot_consolidation, split=view.settings.split_consolidation,
    )
