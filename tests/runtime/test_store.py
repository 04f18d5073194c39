"""The indexed store: indexes always agree with the objects stored."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.runtime import freeze
from karpy.runtime.indexes import (
    INDEX_NAMESPACE,
    INDEX_NODE_NAME,
    INDEX_OWNER,
    Store,
    index_by_field,
    index_by_namespace,
    index_by_node_name,
    index_by_owner,
    object_key,
)


def _pod(
    name: str, ns: str = "default", node: str | None = None, owners: tuple[str, ...] = ()
) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owners:
        meta["ownerReferences"] = [{"uid": u, "kind": "ReplicaSet", "name": u} for u in owners]
    return freeze({"metadata": meta, "spec": {"nodeName": node} if node else {}})


def _store() -> Store:
    return Store(
        {
            INDEX_NAMESPACE: index_by_namespace,
            INDEX_NODE_NAME: index_by_node_name,
            INDEX_OWNER: index_by_owner,
        }
    )


def test_keys_and_lookups() -> None:
    store = _store()
    store.put(_pod("a", node="n1", owners=("rs1",)))
    store.put(_pod("b", ns="other", node="n1"))
    assert object_key(_pod("a")) == "default/a"
    assert object_key(freeze({"metadata": {"name": "node-1"}})) == "node-1"
    assert store.get("default/a") is not None and "other/b" in store
    on_n1 = {object_key(p) for p in store.by_index(INDEX_NODE_NAME, "n1")}
    assert on_n1 == {"default/a", "other/b"}
    assert [object_key(p) for p in store.by_index(INDEX_OWNER, "rs1")] == ["default/a"]
    assert store.by_index(INDEX_NAMESPACE, "nowhere") == []
    with pytest.raises(KeyError, match="no index named"):
        store.by_index("nope", "x")


def test_updates_move_objects_between_index_values() -> None:
    store = _store()
    store.put(_pod("a", node="n1"))
    old = store.put(_pod("a", node="n2"))
    assert old is not None and old["spec"]["nodeName"] == "n1"
    assert store.by_index(INDEX_NODE_NAME, "n1") == []
    assert len(store.by_index(INDEX_NODE_NAME, "n2")) == 1
    assert store.remove("default/a") is not None
    assert store.index_values(INDEX_NODE_NAME) == []
    assert store.remove("default/a") is None


def test_an_index_added_later_covers_existing_objects() -> None:
    store = Store()
    store.put(freeze({"metadata": {"name": "n"}, "spec": {"providerID": "kwok://n"}}))
    store.add_indexer("providerID", index_by_field("spec.providerID"))
    assert len(store.by_index("providerID", "kwok://n")) == 1
    with pytest.raises(ValueError, match="exists already"):
        store.add_indexer("providerID", index_by_node_name)


ops = st.lists(
    st.tuples(st.booleans(), st.sampled_from("abcd"), st.sampled_from([None, "n1", "n2"])),
    max_size=60,
)


@given(ops)
def test_indexes_always_match_a_full_scan(sequence: list[tuple[bool, str, str | None]]) -> None:
    store = _store()
    for put, name, node in sequence:
        if put:
            store.put(_pod(name, node=node))
        else:
            store.remove(f"default/{name}")
        for value in ("n1", "n2"):
            indexed = sorted(object_key(p) for p in store.by_index(INDEX_NODE_NAME, value))
            scanned = sorted(
                object_key(p) for p in store.list() if p["spec"].get("nodeName") == value
            )
            assert indexed == scanned
