"""Looking objects up in the cache: index functions and parsed selector queries.

An informer keeps a :class:`Store` of its kind's objects; ``indexers={name: IndexFunc}``
(``Cache.informer(kind, indexers=...)``) adds secondary indexes that
``cache.by_index(kind, name, value)`` answers without a scan. The built-in ones cover
namespace, controlling owner and a pod's node (:data:`INDEX_NODE_NAME`);
:func:`index_by_field` builds one for any dotted field path.

:class:`LabelQuery` and :class:`FieldQuery` are the ``label_selector=`` /
``field_selector=`` strings of ``Client.list`` parsed once (``a=b,c in (x,y),!d``), so
the cache answers a list the way the API server would. (They are query strings, not
``metav1.LabelSelector`` objects; for those see ``karpy.scheduling.LabelMatcher``.)
"""

from ._selectors import FieldQuery, LabelQuery
from ._store import (
    INDEX_NAMESPACE,
    INDEX_NODE_NAME,
    INDEX_OWNER,
    IndexFunc,
    Store,
    index_by_field,
    index_by_namespace,
    index_by_node_name,
    index_by_owner,
    object_key,
)

__all__ = [
    "INDEX_NAMESPACE",
    "INDEX_NODE_NAME",
    "INDEX_OWNER",
    "FieldQuery",
    "IndexFunc",
    "LabelQuery",
    "Store",
    "index_by_field",
    "index_by_namespace",
    "index_by_node_name",
    "index_by_owner",
    "object_key",
]
