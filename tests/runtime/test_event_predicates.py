"""Predicates filter informer events before they reach a controller."""

from __future__ import annotations

from karpy.runtime import (
    ANNOTATIONS_CHANGED,
    GENERATION_CHANGED,
    LABELS_CHANGED,
    RESOURCE_VERSION_CHANGED,
    Predicate,
    freeze,
    predicate_from,
)


def _obj(
    gen: int = 1,
    labels: dict[str, str] | None = None,
    rv: str = "1",
    annotations: dict[str, str] | None = None,
) -> dict[str, object]:
    return freeze(
        {
            "metadata": {
                "name": "x",
                "generation": gen,
                "labels": labels or {},
                "resourceVersion": rv,
                "annotations": annotations or {},
            }
        }
    )


def test_change_predicates_look_only_at_their_field() -> None:
    old = _obj()
    assert GENERATION_CHANGED.update(old, _obj(gen=2))
    assert not GENERATION_CHANGED.update(old, _obj(rv="2"))  # a status write
    assert LABELS_CHANGED.update(old, _obj(labels={"a": "b"}))
    assert not LABELS_CHANGED.update(old, _obj(gen=5))
    assert ANNOTATIONS_CHANGED.update(old, _obj(annotations={"a": "b"}))
    assert RESOURCE_VERSION_CHANGED.update(old, _obj(rv="2"))
    assert not RESOURCE_VERSION_CHANGED.update(old, _obj())
    # They let creations and deletions through.
    assert GENERATION_CHANGED.create(old) and GENERATION_CHANGED.delete(old)


def test_combinators() -> None:
    old = _obj()
    either = GENERATION_CHANGED | LABELS_CHANGED
    both = GENERATION_CHANGED & LABELS_CHANGED
    assert either.update(old, _obj(labels={"a": "b"}))
    assert not both.update(old, _obj(labels={"a": "b"}))
    assert both.update(old, _obj(gen=2, labels={"a": "b"}))
    assert not (~Predicate()).create(old)


def test_predicate_from_applies_to_the_new_object() -> None:
    named_x = predicate_from(lambda o: o["metadata"]["name"] == "x")
    other = freeze({"metadata": {"name": "y"}})
    assert named_x.create(_obj()) and not named_x.create(other)
    assert named_x.update(other, _obj()) and not named_x.update(_obj(), other)
