"""Read-only cached objects: cheap to share, impossible to mutate by accident."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.runtime import freeze, thaw
from karpy.runtime._objects import loads_frozen
from karpy.runtime.objects import FrozenDict, FrozenList

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)

POD = {
    "metadata": {"name": "p", "labels": {"a": "b"}},
    "spec": {"containers": [{"name": "c", "args": ["x", ["nested"]]}]},
}


def _all_containers(value: Any) -> list[Any]:
    out = []
    if isinstance(value, dict):
        out.append(value)
        for v in value.values():
            out += _all_containers(v)
    elif isinstance(value, list):
        out.append(value)
        for v in value:
            out += _all_containers(v)
    return out


def test_loads_frozen_freezes_every_level() -> None:
    obj = loads_frozen(json.dumps(POD).encode())
    assert obj == POD
    for container in _all_containers(obj):
        assert isinstance(container, FrozenDict | FrozenList)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda o: o.__setitem__("x", 1),
        lambda o: o["metadata"].pop("name"),
        lambda o: o["metadata"]["labels"].update(c="d"),
        lambda o: o["metadata"]["labels"].setdefault("c", "d"),
        lambda o: o["metadata"].__delitem__("labels"),
        lambda o: o["spec"]["containers"].append({}),
        lambda o: o["spec"]["containers"][0]["args"].sort(),
        lambda o: o["spec"]["containers"][0]["args"][1].clear(),
        lambda o: o["spec"]["containers"].__setitem__(0, {}),
    ],
)
def test_every_mutation_raises_with_a_hint(mutate: Any) -> None:
    obj = freeze(POD)
    with pytest.raises(TypeError, match="thaw"):
        mutate(obj)
    assert obj == POD


def test_thaw_and_deepcopy_give_independent_mutable_copies() -> None:
    obj = freeze(POD)
    for mutable in (thaw(obj), copy.deepcopy(obj)):
        assert type(mutable) is dict and mutable == POD
        mutable["metadata"]["labels"]["a"] = "changed"
        mutable["spec"]["containers"].append({"name": "d"})
    assert obj == POD


def test_frozen_objects_serialise_and_pickle_like_plain_ones() -> None:
    obj = freeze(POD)
    assert json.loads(json.dumps(obj)) == POD
    restored = pickle.loads(pickle.dumps(obj))
    assert restored == POD and isinstance(restored, FrozenDict)
    assert isinstance(obj, dict) and isinstance(obj["spec"]["containers"], list)


@given(json_values)
def test_freeze_thaw_round_trip(value: Any) -> None:
    frozen = freeze(value)
    assert frozen == value
    assert thaw(frozen) == value
    assert loads_frozen(json.dumps(value)) == value
    assert freeze(frozen) is frozen or not isinstance(frozen, dict | list)


def test_cached_objects_share_their_keys_and_short_values() -> None:
    # Thousands of cached pods are documents of one shape: their keys and short values
    # (names, labels, owner uids) are interned once, not held once per object.
    one = loads_frozen('{"metadata": {"labels": {"app": "inflate"}}, "spec": {"x": ["zone-a"]}}')
    two = loads_frozen('{"metadata": {"labels": {"app": "inflate"}}, "spec": {"x": ["zone-a"]}}')
    key_one = next(iter(one["metadata"]["labels"]))
    key_two = next(iter(two["metadata"]["labels"]))
    assert key_one is key_two
    assert one["metadata"]["labels"]["app"] is two["metadata"]["labels"]["app"]
    assert one["spec"]["x"][0] is two["spec"]["x"][0]
    assert one == two and isinstance(one["spec"]["x"], FrozenList)
