"""The requirements algebra (karpy.scheduling.requirements).

The property tests compare every operation with its meaning: a requirement is the set
of label values a node may have, and "no label at all" is one more possibility that
only NotIn and DoesNotExist accept.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.scheduling import Requirement, Requirements

# A small universe of label values: strings, and integers for Gt/Lt.
UNIVERSE = ["a", "b", "c", "d", "0", "1", "3", "5", "9", "12", "-2"]
ABSENT = None  # a node without the label


def accepts(requirement: Requirement, value: str | None) -> bool:
    """What a requirement means, straight from the Kubernetes docs."""
    operator = requirement.operator
    if value is ABSENT:
        return operator in ("NotIn", "DoesNotExist")
    return requirement.has(value)


@st.composite
def requirements(draw: st.DrawFn, key: str = "k") -> Requirement:
    operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    if operator in ("Gt", "Lt"):
        return Requirement.new(key, operator, [str(draw(st.integers(-3, 12)))])
    if operator in ("In", "NotIn"):
        values = draw(st.lists(st.sampled_from(UNIVERSE[:8]), min_size=1, max_size=4))
        return Requirement.new(key, operator, values)
    return Requirement.new(key, operator)


@given(requirements(), requirements())
def test_intersection_accepts_exactly_what_both_accept(a: Requirement, b: Requirement) -> None:
    both = a.intersection(b)
    for value in UNIVERSE:
        assert both.has(value) == (a.has(value) and b.has(value)), value


@given(requirements(), requirements())
def test_intersection_is_commutative(a: Requirement, b: Requirement) -> None:
    for value in UNIVERSE:
        assert a.intersection(b).has(value) == b.intersection(a).has(value)


@given(requirements(), requirements(), requirements())
def test_intersection_is_associative(a: Requirement, b: Requirement, c: Requirement) -> None:
    left = a.intersection(b).intersection(c)
    right = a.intersection(b.intersection(c))
    for value in UNIVERSE:
        assert left.has(value) == right.has(value)


@given(requirements(), requirements())
def test_has_intersection_agrees_with_some_common_value(a: Requirement, b: Requirement) -> None:
    if any(a.has(v) and b.has(v) for v in UNIVERSE):
        assert a.has_intersection(b)
    if not a.has_intersection(b):
        assert not any(a.has(v) and b.has(v) for v in UNIVERSE)


@given(requirements())
def test_round_trip_through_node_selector_dicts(a: Requirement) -> None:
    back = Requirements.from_node_selector(a.to_dicts()).get_requirement("k")
    for value in [*UNIVERSE, ABSENT]:
        assert accepts(back, value) == accepts(a, value)


@given(requirements(), requirements())
def test_requirements_intersect_is_per_key_intersection(a: Requirement, b: Requirement) -> None:
    merged = Requirements([a]).intersect(Requirements([b]))
    for value in UNIVERSE:
        assert merged["k"].has(value) == (a.has(value) and b.has(value))


@given(requirements(), requirements())
def test_compatible_means_some_node_satisfies_both(node: Requirement, pod: Requirement) -> None:
    # Both sides define the key: compatible exactly when some value (or the absence
    # of the label, for two negative requirements) satisfies both.
    reason = Requirements([node]).compatible(Requirements([pod]))
    possible = any(node.has(v) and pod.has(v) for v in UNIVERSE) or (
        accepts(node, ABSENT) and accepts(pod, ABSENT)
    )
    if reason is None:
        assert node.has_intersection(pod) or (accepts(node, ABSENT) and accepts(pod, ABSENT))
    else:
        assert not possible
        assert "k" in reason


@pytest.mark.parametrize(
    ("operator", "values", "expected"),
    [
        ("In", ["a", "b"], "k In [a, b]"),
        ("NotIn", ["a"], "k NotIn [a]"),
        ("Exists", [], "k Exists"),
        ("DoesNotExist", [], "k DoesNotExist"),
        ("Gt", ["3"], "k Exists >=4"),
        ("Lt", ["3"], "k Exists <=2"),
    ],
)
def test_operators_normalise_like_karpenter(
    operator: str, values: list[str], expected: str
) -> None:
    assert str(Requirement.new("k", operator, values)) == expected


def test_gt_and_lt_intersect_to_a_range_and_reject_non_integers() -> None:
    window = Requirement.new("k", "Gt", ["2"]).intersection(Requirement.new("k", "Lt", ["6"]))
    assert [v for v in ["1", "3", "5", "6", "x"] if window.has(v)] == ["3", "5"]
    empty = Requirement.new("k", "Gt", ["5"]).intersection(Requirement.new("k", "Lt", ["3"]))
    assert empty.operator == "DoesNotExist"
    dicts = window.to_dicts()
    assert dicts == [
        {"key": "k", "operator": "Gt", "values": ["2"]},
        {"key": "k", "operator": "Lt", "values": ["6"]},
    ]


def test_gt_needs_one_integer() -> None:
    with pytest.raises(ValueError, match="needs exactly one integer"):
        Requirement.new("k", "Gt", ["x"])
    with pytest.raises(ValueError, match="unknown operator"):
        Requirement.new("k", "Near", ["x"])


def test_beta_labels_are_normalised() -> None:
    req = Requirement.new("failure-domain.beta.kubernetes.io/zone", "In", ["z1"])
    assert req.key == "topology.kubernetes.io/zone"
    assert Requirements.from_labels({"beta.kubernetes.io/arch": "arm64"}).labels() == {
        "kubernetes.io/arch": "arm64"
    }


def test_min_values_take_the_larger_and_survive_round_trips() -> None:
    a = Requirement.new("k", "In", ["a", "b", "c"], min_values=2)
    b = Requirement.new("k", "Exists", min_values=3)
    assert a.intersection(b).min_values == 3
    reqs = Requirements.from_node_selector(
        [{"key": "k", "operator": "In", "values": ["a", "b"], "minValues": 2}]
    )
    assert reqs.has_min_values()
    assert reqs.to_node_selector() == [
        {"key": "k", "operator": "In", "values": ["a", "b"], "minValues": 2}
    ]


def test_a_required_label_must_be_defined_unless_allowed_or_negative() -> None:
    nodepool = Requirements.from_labels({"team": "a"})
    wants_gpu = Requirements.from_node_selector([{"key": "gpu", "operator": "In", "values": ["y"]}])
    assert nodepool.compatible(wants_gpu) == "label 'gpu' does not have known values"
    assert nodepool.compatible(wants_gpu, frozenset({"gpu"})) is None
    avoids_gpu = Requirements.from_node_selector([{"key": "gpu", "operator": "DoesNotExist"}])
    assert nodepool.compatible(avoids_gpu) is None


def test_typo_hint_points_at_the_well_known_label() -> None:
    reqs = Requirements.from_node_selector([{"key": "zone", "operator": "In", "values": ["z"]}])
    reason = Requirements().compatible(reqs, frozenset({"topology.kubernetes.io/zone"}))
    assert reason is not None
    assert "typo of 'topology.kubernetes.io/zone'" in reason


def test_incompatible_values_name_both_sides() -> None:
    node = Requirements.from_labels({"topology.kubernetes.io/zone": "z1"})
    pod = Requirements.from_node_selector(
        [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z2", "z3"]}]
    )
    assert node.compatible(pod) == (
        "topology.kubernetes.io/zone In [z2, z3] is not compatible with "
        "topology.kubernetes.io/zone In [z1]"
    )


def test_labels_are_the_single_valued_keys() -> None:
    reqs = Requirements.from_node_selector(
        [
            {"key": "a", "operator": "In", "values": ["x"]},
            {"key": "b", "operator": "In", "values": ["x", "y"]},
            {"key": "c", "operator": "Exists"},
        ]
    )
    assert reqs.labels() == {"a": "x"}
    assert reqs.get("c") is not None and reqs.get("missing") is None
    assert reqs.get_requirement("missing").operator == "Exists"


def test_values_are_immutable_hashable_and_picklable() -> None:
    a = Requirements.from_labels({"a": "1", "b": "2"})
    b = Requirements.from_labels({"b": "2", "a": "1"})
    assert a == b and hash(a) == hash(b)
    assert {a: 1}[b] == 1
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError):
        a["a"].key = "z"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("operator", "value", "inside", "outside"),
    [("Gte", "4", ["4", "16"], ["3", "x"]), ("Lte", "4", ["0", "4"], ["5", "x"])],
)
def test_gte_and_lte_include_their_bound(
    operator: str, value: str, inside: list[str], outside: list[str]
) -> None:
    requirement = Requirement.new("k", operator, [value])
    assert all(requirement.has(v) for v in inside)
    assert not any(requirement.has(v) for v in outside)


def test_bounds_the_crds_refuse_as_gt_or_lt_are_written_as_gte_or_lte() -> None:
    # Gte 0 would be "Gt -1", which the CRDs' rule (a single positive integer) refuses.
    assert Requirement.new("k", "Gte", ["0"]).to_dicts() == [
        {"key": "k", "operator": "Gte", "values": ["0"]}
    ]
    assert Requirement.new("k", "Lte", ["3"]).to_dicts() == [
        {"key": "k", "operator": "Lt", "values": ["4"]}
    ]
