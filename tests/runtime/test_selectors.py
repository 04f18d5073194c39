"""Label and field selectors answer like the API server."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.runtime.indexes import FieldQuery, LabelQuery

LABELS = {"app": "web", "tier": "front", "env": "prod"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("app", True),
        ("!app", False),
        ("!missing", True),
        ("env in (prod, staging)", True),
        ("env notin (prod)", False),
        ("missing notin (x)", True),
        ("app=web,tier=front,env in (prod)", True),
        ("app=web, tier=back", False),
    ],
)
def test_label_selector_syntax(selector: str, matches: bool) -> None:
    assert LabelQuery.parse(selector).matches(LABELS) is matches


def test_mapping_selector_and_none() -> None:
    assert LabelQuery.parse({"app": "web"}).matches(LABELS)
    assert not LabelQuery.parse({"app": "web", "x": "y"}).matches(LABELS)
    assert LabelQuery.parse(None).matches({})
    assert str(LabelQuery.parse({"b": "2", "a": "1"})) == "a=1,b=2"


def test_malformed_label_selector_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid label selector"):
        LabelQuery.parse("a in (b")


@given(
    st.dictionaries(st.sampled_from("abc"), st.sampled_from("xyz"), max_size=3),
    st.dictionaries(st.sampled_from("abc"), st.sampled_from("xyz"), max_size=3),
)
def test_equality_selectors_match_exactly_their_subset(
    required: dict[str, str], labels: dict[str, str]
) -> None:
    selector = LabelQuery.parse(",".join(f"{k}={v}" for k, v in required.items()))
    assert selector.matches(labels) == all(labels.get(k) == v for k, v in required.items())


def test_field_selector() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
        "ready": True,
    }
    assert FieldQuery.parse("spec.nodeName=n1").matches(pod)
    assert FieldQuery.parse("spec.nodeName!=n2,status.phase==Running").matches(pod)
    assert not FieldQuery.parse("metadata.namespace=other").matches(pod)
    assert FieldQuery.parse("spec.missing=").matches(pod)  # absent reads as ""
    assert FieldQuery.parse("ready=true").matches(pod)
    with pytest.raises(ValueError, match="path=value"):
        FieldQuery.parse("nonsense")
