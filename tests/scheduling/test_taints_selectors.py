"""Taint/toleration matching and label selectors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.scheduling import LabelMatcher, NodeTaint, Toleration
from karpy.scheduling.taints import untolerated

GPU = NodeTaint("gpu", "NoSchedule", "true")


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        (Toleration(key="gpu", operator="Equal", value="true", effect="NoSchedule"), True),
        (Toleration(key="gpu", operator="Equal", value="false", effect="NoSchedule"), False),
        (Toleration(key="gpu", operator="Exists"), True),
        (Toleration(key="gpu", operator="Exists", effect="NoExecute"), False),
        (Toleration(operator="Exists"), True),  # empty key + Exists tolerates everything
        (Toleration(key="other", operator="Exists"), False),
    ],
)
def test_toleration_matching(toleration: Toleration, tolerated: bool) -> None:
    assert toleration.tolerates(GPU) is tolerated


def test_numeric_toleration_operators() -> None:
    taint = NodeTaint("budget", "NoSchedule", "5")
    assert Toleration(key="budget", operator="Gt", value="3").tolerates(taint)
    assert not Toleration(key="budget", operator="Lt", value="3").tolerates(taint)


def test_prefer_no_schedule_counts_only_until_relaxed() -> None:
    soft = NodeTaint("spot", "PreferNoSchedule")
    assert untolerated([soft], ()) == soft
    assert untolerated([soft], (), prefer=False) is None


def test_taint_round_trip_and_text() -> None:
    assert NodeTaint.from_dict(GPU.to_dict()) == GPU
    assert str(GPU) == "gpu=true:NoSchedule"
    assert str(NodeTaint("x", "NoExecute")) == "x:NoExecute"


@given(st.dictionaries(st.sampled_from("abc"), st.sampled_from("xyz"), max_size=3))
def test_match_labels_selects_supersets(labels: dict[str, str]) -> None:
    selector = LabelMatcher.from_dict({"matchLabels": {"a": "x"}})
    assert selector.matches(labels) == (labels.get("a") == "x")


def test_expressions_and_null_versus_empty_selectors() -> None:
    selector = LabelMatcher.from_dict(
        {
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["web", "api"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "team", "operator": "Exists"},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
            ]
        }
    )
    assert selector.matches({"tier": "web", "team": "a"})
    assert not selector.matches({"tier": "web", "team": "a", "canary": "1"})
    assert not selector.matches({"tier": "web", "team": "a", "env": "dev"})
    assert not selector.matches({"tier": "db", "team": "a"})
    assert LabelMatcher.from_dict({}).matches({"anything": "goes"})
    assert not LabelMatcher.from_dict(None).matches({})
    with pytest.raises(ValueError, match="unknown operator"):
        LabelMatcher.from_dict({"matchExpressions": [{"key": "a", "operator": "Gt"}]})
