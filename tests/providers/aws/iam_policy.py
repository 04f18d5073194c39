"""Karpenter's controller IAM policy, as data: what every AWS request karpy sends in the
tests is checked against (see iam_check.py).

Source: the CloudFormation template of Karpenter's getting-started guide,
  repository aws/karpenter-provider-aws
  path       website/content/en/v1.14/getting-started/getting-started-with-karpenter/
             cloudformation.yaml
  commit     1d927085dd81a9df9301e613f371dac5b4d16bfe (the file last changed in 692ccdd0629e)
the newest v1 version published there. Only the controller's managed policies are written
out below (NodeLifecycle, IAMIntegration, EKSIntegration, Interruption, ZonalShift,
ResourceDiscovery), statement by statement, with the template's own placeholders
(``${ClusterName}``, ``${AWS::Region}``, ...) that :func:`controller_policy` fills in the
way CloudFormation's ``!Sub`` would. The node role's and the interruption queue's ARNs are
those of the template's resources: role ``KarpenterNodeRole-${ClusterName}``, queue
``${ClusterName}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["POLICIES", "SOURCE", "controller_policy"]

SOURCE: Final = (
    "aws/karpenter-provider-aws@1d927085dd81a9df9301e613f371dac5b4d16bfe:"
    "website/content/en/v1.14/getting-started/getting-started-with-karpenter/cloudformation.yaml"
)

_EC2: Final = "arn:${AWS::Partition}:ec2:${AWS::Region}"
_IAM_PROFILES: Final = "arn:${AWS::Partition}:iam::${AWS::AccountId}:instance-profile/*"
_CLUSTER_OWNED: Final = "kubernetes.io/cluster/${ClusterName}"

#: policy name -> its statements, in the template's order
POLICIES: Final[Mapping[str, list[dict[str, Any]]]] = {
    "KarpenterControllerNodeLifecyclePolicy": [
        {
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Resource": [
                f"{_EC2}::image/*",
                f"{_EC2}::snapshot/*",
                f"{_EC2}:*:security-group/*",
                f"{_EC2}:*:subnet/*",
                f"{_EC2}:*:capacity-reservation/*",
                f"{_EC2}:*:placement-group/*",
            ],
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
        },
        {
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Resource": f"{_EC2}:*:launch-template/*",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Condition": {
                "StringEquals": {f"aws:ResourceTag/{_CLUSTER_OWNED}": "owned"},
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Resource": [
                f"{_EC2}:*:fleet/*",
                f"{_EC2}:*:instance/*",
                f"{_EC2}:*:volume/*",
                f"{_EC2}:*:network-interface/*",
                f"{_EC2}:*:launch-template/*",
                f"{_EC2}:*:spot-instances-request/*",
            ],
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Condition": {
                "StringEquals": {
                    f"aws:RequestTag/{_CLUSTER_OWNED}": "owned",
                    "aws:RequestTag/eks:eks-cluster-name": "${ClusterName}",
                },
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Resource": [
                f"{_EC2}:*:fleet/*",
                f"{_EC2}:*:instance/*",
                f"{_EC2}:*:volume/*",
                f"{_EC2}:*:network-interface/*",
                f"{_EC2}:*:launch-template/*",
                f"{_EC2}:*:spot-instances-request/*",
            ],
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": {
                    f"aws:RequestTag/{_CLUSTER_OWNED}": "owned",
                    "aws:RequestTag/eks:eks-cluster-name": "${ClusterName}",
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Resource": f"{_EC2}:*:instance/*",
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": {f"aws:ResourceTag/{_CLUSTER_OWNED}": "owned"},
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": "${ClusterName}"},
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                },
            },
        },
        {
            "Sid": "AllowScopedDeletion",
            "Effect": "Allow",
            "Resource": [f"{_EC2}:*:instance/*", f"{_EC2}:*:launch-template/*"],
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Condition": {
                "StringEquals": {f"aws:ResourceTag/{_CLUSTER_OWNED}": "owned"},
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
            },
        },
    ],
    "KarpenterControllerIAMIntegrationPolicy": [
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Resource": "${KarpenterNodeRole.Arn}",
            "Action": "iam:PassRole",
            "Condition": {
                "StringEquals": {
                    "iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]
                }
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Resource": _IAM_PROFILES,
            "Action": ["iam:CreateInstanceProfile"],
            "Condition": {
                "StringEquals": {
                    f"aws:RequestTag/{_CLUSTER_OWNED}": "owned",
                    "aws:RequestTag/eks:eks-cluster-name": "${ClusterName}",
                    "aws:RequestTag/topology.kubernetes.io/region": "${AWS::Region}",
                },
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Resource": _IAM_PROFILES,
            "Action": ["iam:TagInstanceProfile"],
            "Condition": {
                "StringEquals": {
                    f"aws:ResourceTag/{_CLUSTER_OWNED}": "owned",
                    "aws:ResourceTag/topology.kubernetes.io/region": "${AWS::Region}",
                    f"aws:RequestTag/{_CLUSTER_OWNED}": "owned",
                    "aws:RequestTag/eks:eks-cluster-name": "${ClusterName}",
                    "aws:RequestTag/topology.kubernetes.io/region": "${AWS::Region}",
                },
                "StringLike": {
                    "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                },
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileActions",
            "Effect": "Allow",
            "Resource": _IAM_PROFILES,
            "Action": [
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
            ],
            "Condition": {
                "StringEquals": {
                    f"aws:ResourceTag/{_CLUSTER_OWNED}": "owned",
                    "aws:ResourceTag/topology.kubernetes.io/region": "${AWS::Region}",
                },
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
    ],
    "KarpenterControllerEKSIntegrationPolicy": [
        {
            "Sid": "AllowAPIServerEndpointDiscovery",
            "Effect": "Allow",
            "Resource": (
                "arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}:cluster/${ClusterName}"
            ),
            "Action": "eks:DescribeCluster",
        },
    ],
    "KarpenterControllerInterruptionPolicy": [
        {
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Resource": "${KarpenterInterruptionQueue.Arn}",
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
        },
    ],
    "KarpenterControllerZonalShiftPolicy": [
        {
            "Sid": "AllowZonalShiftStatusReadOnly",
            "Effect": "Allow",
            "Resource": "*",
            "Action": ["arc-zonal-shift:GetManagedResource"],
            "Condition": {
                "StringEquals": {
                    "arc-zonal-shift:ResourceIdentifier": (
                        "arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}"
                        ":cluster/${ClusterName}"
                    )
                }
            },
        },
    ],
    "KarpenterControllerResourceDiscoveryPolicy": [
        {
            "Sid": "AllowRegionalReadActions",
            "Effect": "Allow",
            "Resource": "*",
            "Action": [
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            "Condition": {"StringEquals": {"aws:RequestedRegion": "${AWS::Region}"}},
        },
        {
            "Sid": "AllowSSMReadActions",
            "Effect": "Allow",
            "Resource": "arn:${AWS::Partition}:ssm:${AWS::Region}::parameter/aws/service/*",
            "Action": "ssm:GetParameter",
        },
        {
            "Sid": "AllowPricingReadActions",
            "Effect": "Allow",
            "Resource": "*",
            "Action": "pricing:GetProducts",
        },
        {
            "Sid": "AllowUnscopedInstanceProfileListAction",
            "Effect": "Allow",
            "Resource": "*",
            "Action": "iam:ListInstanceProfiles",
        },
        {
            "Sid": "AllowInstanceProfileReadActions",
            "Effect": "Allow",
            "Resource": _IAM_PROFILES,
            "Action": "iam:GetInstanceProfile",
        },
    ],
}

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9:.]+)\}")


def controller_policy(
    *, cluster: str, region: str, account: str, partition: str = "aws"
) -> list[dict[str, Any]]:
    """Every statement of the controller's policies, placeholders filled in as
    CloudFormation would for a stack with ``ClusterName=cluster``; each statement's
    ``Sid`` is prefixed with its policy's name (``Policy/Sid``) so a denial names both."""
    values = {
        "ClusterName": cluster,
        "AWS::Region": region,
        "AWS::AccountId": account,
        "AWS::Partition": partition,
        "KarpenterNodeRole.Arn": f"arn:{partition}:iam::{account}:role/KarpenterNodeRole-{cluster}",
        "KarpenterInterruptionQueue.Arn": f"arn:{partition}:sqs:{region}:{account}:{cluster}",
    }

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            return _PLACEHOLDER.sub(lambda m: values[m.group(1)], value)
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, dict):
            return {fill(k): fill(v) for k, v in value.items()}
        return value

    out = []
    for policy, statements in POLICIES.items():
        for statement in statements:
            filled = fill(statement)
            filled["Sid"] = f"{policy}/{statement['Sid']}"
            out.append(filled)
    return out
