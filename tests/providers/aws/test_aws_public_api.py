"""karpy_aws's public names, and that the provider meets the protocol's optional
abilities it claims (controllers, aclose)."""

from __future__ import annotations

import karpy_aws
from karpy_aws import AWSCloudProvider

from karpy.cloudprovider import CloudProvider, ContributesControllers


def test_exported_names() -> None:
    assert set(karpy_aws.__all__) == {
        "EC2_NODE_CLASS",
        "EC2_NODE_CLASS_KIND",
        "SETTINGS",
        "AWSCloudProvider",
        "AWSSettings",
        "AWSSettingsError",
        "NodeClassGetter",
        "node_class_hash",
    }
    for name in karpy_aws.__all__:
        assert getattr(karpy_aws, name) is not None


def test_the_provider_contributes_controllers(aws_provider: AWSCloudProvider) -> None:
    assert isinstance(aws_provider, CloudProvider)
    assert isinstance(aws_provider, ContributesControllers)
    assert callable(aws_provider.aclose)
    assert [str(k) for k in aws_provider.supported_node_classes()] == [
        "EC2NodeClass.karpenter.k8s.aws"
    ]
