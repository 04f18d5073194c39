"""karpy_azure's public names: what building the provider by hand takes, as karpy_aws's."""

from __future__ import annotations

import karpy_azure


def test_exported_names() -> None:
    assert karpy_azure.__all__ == [
        "AKS_NODE_CLASS",
        "ArmClients",
        "AzureCloudProvider",
        "AzureSettings",
        "AzureSettingsError",
        "NodeClassSource",
        "StaticNodeClasses",
        "make_credential",
        "node_class_hash",
    ]
    for name in karpy_azure.__all__:
        assert getattr(karpy_azure, name) is not None
