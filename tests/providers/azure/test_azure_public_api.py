"""karpy_azure's public names: what building the provider by hand takes, as karpy_aws's."""

from __future__ import annotations

import ast
from pathlib import Path

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


def test_only_the_package_and_its_factory_import_the_provider_module() -> None:
    """The provider's controllers and the offline provider take the parts they use
    (small protocols), so nothing imports the provider class back: no import circle."""
    package = Path(karpy_azure.__file__).parent
    importers = sorted(
        path.name
        for path in package.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == "karpy_azure._provider"
    )
    assert importers == ["__init__.py", "_factory.py"]
