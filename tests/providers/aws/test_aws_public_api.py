"""karpy_aws's public names, and that the provider meets the protocol's optional
abilities it claims (controllers, aclose)."""

from __future__ import annotations

import ast
from pathlib import Path

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


def _provider_importers(*, typing_too: bool) -> list[str]:
    """The modules of karpy_aws importing ``karpy_aws._provider`` (under TYPE_CHECKING
    too, when ``typing_too``)."""
    package = Path(karpy_aws.__file__).parent
    importers: list[str] = []
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text())
        typing_only = set() if typing_too else {
            id(node)
            for block in tree.body
            if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
            for node in ast.walk(block)
        }
        importers += [
            path.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and node.module == "karpy_aws._provider"
            and id(node) not in typing_only
        ]
    return importers


def test_only_the_package_and_its_factory_import_the_provider_module_at_run_time() -> None:
    """The factory has its own module and the offline provider takes the parts it uses,
    so no module imports the provider back while loading (no import circle)."""
    importers = _provider_importers(typing_too=False)
    assert importers == ["__init__.py", "_factory.py"]


def test_no_controller_module_imports_the_provider_module_even_for_typing() -> None:
    """The controllers take the parts of the provider they use (``AWSAccess``,
    ``InterruptionParts``, ``NodeClassParts``, ``ControllerParts``, or the part objects
    themselves), as karpy_azure's do: only the package and its factory name the provider
    class, not even under TYPE_CHECKING."""
    importers = _provider_importers(typing_too=True)
    assert importers == ["__init__.py", "_factory.py"]
