"""The IAM evaluator the moto harness enforces Karpenter's policy with (iam_eval.py):
each operator the policy uses, and the policy itself on the requests that matter."""

from __future__ import annotations

from typing import Any

import pytest
from iam_eval import Request, evaluate
from iam_policy import controller_policy

CLUSTER = "karpy-test"
REGION = "us-east-1"
LT = "arn:aws:ec2:us-east-1:123456789012:launch-template/lt-0123"


def allow(condition: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    statement: dict[str, Any] = {
        "Sid": "S",
        "Effect": "Allow",
        "Action": "ec2:CreateTags",
        "Resource": "arn:aws:ec2:*:*:instance/*",
        **extra,
    }
    if condition is not None:
        statement["Condition"] = condition
    return statement


def allowed(statement: dict[str, Any], **context: Any) -> bool:
    request = Request("ec2:CreateTags", "arn:aws:ec2:us-east-1:1:instance/i-1", context)
    return evaluate([statement], request).allowed


def test_actions_match_case_insensitively_with_wildcards() -> None:
    resource = "arn:aws:ec2:us-east-1:1:instance/i-1"
    assert evaluate([allow(Action="EC2:create*")], Request("ec2:CreateTags", resource)).allowed
    assert not evaluate([allow()], Request("ec2:DeleteTags", resource)).allowed


def test_resources_match_arn_wildcards_and_star_only_matches_star() -> None:
    assert not evaluate([allow()], Request("ec2:CreateTags", LT)).allowed
    assert not evaluate([allow()], Request("ec2:CreateTags", "*")).allowed
    assert evaluate([allow(Resource="*")], Request("ec2:CreateTags", "*")).allowed


def test_string_equals_and_like_need_the_key() -> None:
    equals = allow({"StringEquals": {"aws:RequestTag/team": ["a", "b"]}})
    assert allowed(equals, **{"aws:RequestTag/team": "b"})
    assert not allowed(equals, **{"aws:RequestTag/team": "c"})
    assert not allowed(equals)
    like = allow({"StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}})
    assert allowed(like, **{"aws:RequestTag/karpenter.sh/nodepool": ""})
    assert not allowed(like)


def test_condition_keys_are_case_insensitive_values_are_not() -> None:
    equals = allow({"StringEquals": {"aws:RequestTag/Team": "a"}})
    assert allowed(equals, **{"AWS:requesttag/team": "a"})
    assert not allowed(equals, **{"aws:RequestTag/Team": "A"})


def test_if_exists_holds_without_the_key() -> None:
    statement = allow({"StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": CLUSTER}})
    assert allowed(statement)
    assert not allowed(statement, **{"aws:RequestTag/eks:eks-cluster-name": "other"})


def test_for_all_values_allows_only_listed_keys() -> None:
    statement = allow(
        {"ForAllValues:StringEquals": {"aws:TagKeys": ["Name", "karpenter.sh/nodeclaim"]}}
    )
    assert allowed(statement, **{"aws:TagKeys": ["Name"]})
    assert allowed(statement)  # no tags at all: vacuously true, as IAM does
    assert not allowed(statement, **{"aws:TagKeys": ["Name", "owner"]})


def test_for_any_value_needs_one_listed_key() -> None:
    statement = allow({"ForAnyValue:StringLike": {"aws:TagKeys": ["karpenter.*"]}})
    assert allowed(statement, **{"aws:TagKeys": ["Name", "karpenter.sh/nodeclaim"]})
    assert not allowed(statement, **{"aws:TagKeys": ["Name"]})
    assert not allowed(statement)


def test_null_and_negated_operators() -> None:
    absent = allow({"Null": {"aws:RequestTag/owner": "true"}})
    assert allowed(absent)
    assert not allowed(absent, **{"aws:RequestTag/owner": "x"})
    not_equals = allow({"StringNotEquals": {"aws:RequestTag/owner": ["x", "y"]}})
    assert allowed(not_equals, **{"aws:RequestTag/owner": "z"})
    assert not allowed(not_equals, **{"aws:RequestTag/owner": "y"})
    assert allowed(not_equals)


def test_a_single_valued_operator_does_not_match_a_multivalued_key() -> None:
    assert not allowed(allow({"StringLike": {"aws:TagKeys": "*"}}), **{"aws:TagKeys": ["a"]})


def test_an_applicable_deny_wins() -> None:
    deny = allow(Effect="Deny", Sid="D")
    decision = evaluate([allow(), deny], Request("ec2:CreateTags", "arn:aws:ec2:r:1:instance/i"))
    assert not decision.allowed
    assert [r.sid for r in decision.considered if r.applies] == ["S", "D"]


def test_unsupported_policy_elements_and_operators_raise() -> None:
    request = Request("ec2:CreateTags", "arn:aws:ec2:r:1:instance/i")
    with pytest.raises(ValueError, match="NotResource"):
        evaluate([allow(NotResource="*")], request)
    with pytest.raises(ValueError, match="NumericLessThan"):
        evaluate([allow({"NumericLessThan": {"a": "1"}})], request)


# -- Karpenter's policy -----------------------------------------------------------------

POLICY = controller_policy(cluster=CLUSTER, region=REGION, account="123456789012")
LT_TAGS = {
    f"kubernetes.io/cluster/{CLUSTER}": "owned",
    "eks:eks-cluster-name": CLUSTER,
    "karpenter.sh/nodepool": "default",
    "karpenter.k8s.aws/ec2nodeclass": "default",
}


def request_tags(tags: dict[str, str]) -> dict[str, Any]:
    return {**{f"aws:RequestTag/{k}": v for k, v in tags.items()}, "aws:TagKeys": sorted(tags)}


def test_the_policy_lets_a_fully_tagged_launch_template_be_created() -> None:
    new = "arn:aws:ec2:us-east-1:123456789012:launch-template/*"
    assert evaluate(POLICY, Request("ec2:CreateLaunchTemplate", new, request_tags(LT_TAGS))).allowed


@pytest.mark.parametrize("dropped", sorted(set(LT_TAGS) - {"karpenter.k8s.aws/ec2nodeclass"}))
def test_the_policy_refuses_a_launch_template_missing_a_tag_and_names_the_statement(
    dropped: str,
) -> None:
    new = "arn:aws:ec2:us-east-1:123456789012:launch-template/*"
    tags = {k: v for k, v in LT_TAGS.items() if k != dropped}
    decision = evaluate(POLICY, Request("ec2:CreateLaunchTemplate", new, request_tags(tags)))
    assert not decision.allowed
    text = decision.explain()
    assert "AllowScopedEC2InstanceActionsWithTags" in text and dropped in text


def test_the_policy_launches_from_and_deletes_only_owned_nodepool_templates() -> None:
    owned = {f"aws:ResourceTag/{k}": v for k, v in LT_TAGS.items()}
    for action in ("ec2:CreateFleet", "ec2:DeleteLaunchTemplate"):
        assert evaluate(POLICY, Request(action, LT, owned)).allowed
        unpooled = {k: v for k, v in owned.items() if "nodepool" not in k}
        assert not evaluate(POLICY, Request(action, LT, unpooled)).allowed


def test_the_policy_passes_the_node_role_to_ec2_only() -> None:
    role = f"arn:aws:iam::123456789012:role/KarpenterNodeRole-{CLUSTER}"
    ec2 = {"iam:PassedToService": "ec2.amazonaws.com"}
    assert evaluate(POLICY, Request("iam:PassRole", role, ec2)).allowed
    assert not evaluate(
        POLICY, Request("iam:PassRole", role, {"iam:PassedToService": "lambda.amazonaws.com"})
    ).allowed
    assert not evaluate(POLICY, Request("iam:PassRole", role + "-other", ec2)).allowed


def test_the_policy_reads_only_in_its_region() -> None:
    ok = Request("ec2:DescribeSubnets", "*", {"aws:RequestedRegion": REGION})
    assert evaluate(POLICY, ok).allowed
    other = Request("ec2:DescribeSubnets", "*", {"aws:RequestedRegion": "eu-west-1"})
    assert not evaluate(POLICY, other).allowed
    zones = Request("ec2:DescribeAvailabilityZones", "*", {"aws:RequestedRegion": REGION})
    decision = evaluate(POLICY, zones)
    assert not decision.allowed and "no statement" in decision.explain()
