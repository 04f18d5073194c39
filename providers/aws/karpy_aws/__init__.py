"""The AWS cloud provider for karpy: EC2 through aioboto3, the ``karpenter.k8s.aws/v1``
EC2NodeClass, and the controllers the provider contributes (EC2NodeClass status,
interruption queue, launch-template garbage collection).

The ``aws`` entry point of ``karpy.cloudproviders`` names :class:`AWSCloudProvider`;
its settings are in :mod:`karpy_aws._settings` (and docs/providers/aws.md).
"""

from karpy_aws._hash import node_class_hash
from karpy_aws._kinds import EC2_NODE_CLASS, EC2_NODE_CLASS_KIND
from karpy_aws._nodeclasses import NodeClassGetter
from karpy_aws._provider import AWSCloudProvider
from karpy_aws._settings import SETTINGS, AWSSettings, AWSSettingsError

__all__ = [
    "EC2_NODE_CLASS",
    "EC2_NODE_CLASS_KIND",
    "SETTINGS",
    "AWSCloudProvider",
    "AWSSettings",
    "AWSSettingsError",
    "NodeClassGetter",
    "node_class_hash",
]
