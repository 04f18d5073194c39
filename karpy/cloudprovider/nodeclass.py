"""Which provider a NodePool belongs to, and its ``NodeClassReady`` condition.

:func:`resolve_node_class` matches a NodePool's ``nodeClassRef`` against the NodeClass
kinds a provider serves; :func:`node_class_readiness` turns the NodeClass's own
``Ready`` condition into the NodePool's :data:`NODE_CLASS_READY` condition. The
nodepool controller uses both; a provider only declares its
NodeClass kinds (cluster-scoped :class:`~karpy.runtime.Kind` values).
"""

from karpy.cloudprovider._nodeclass import (
    NODE_CLASS_READY,
    NodeClassReadiness,
    node_class_readiness,
    resolve_node_class,
)

__all__ = [
    "NODE_CLASS_READY",
    "NodeClassReadiness",
    "node_class_readiness",
    "resolve_node_class",
]
