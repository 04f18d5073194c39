"""karpy.cloudprovider's public surface is exactly what docs/providers.md documents, and
the instance-type types are the simulator's own (re-exported, not redefined)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import karpy.cloudprovider as cp
import karpy.scheduling as scheduling

DOCS = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


def test_the_exported_names_are_the_contract() -> None:
    assert set(cp.__all__) == {
        "CLOUD_PROVIDER_ENV", "ENTRY_POINT_GROUP", "NODE_CLASS_READY",
        "CloudProvider", "CloudProviderError", "ContributesControllers", "CreateError",
        "DriftReason", "InstanceType",
        "InsufficientCapacityError", "LaunchChoice", "NodeClaimNotFoundError",
        "NodeClassKind", "NodeClassNotReadyError", "NodeClassReadiness", "Offering",
        "OfferingKey", "Overhead", "ProviderContext", "ProviderFactory", "ProviderLoadError",
        "ProviderRegistryError", "RepairPolicy", "UnknownProviderError", "build_provider",
        "choose_launch", "close_provider", "installed_providers", "launched_labels",
        "launched_nodeclaim", "load_factory", "node_class_readiness", "nodeclaim_requests",
        "nodeclaim_requirements", "offering_key", "open_provider", "provider_name",
        "register_provider_controllers", "resolve_node_class",
        # a provider's settings, for karpy run --help and start-up checks
        "ProviderSetting", "ProviderSettingsError", "check_provider_settings",
        "provider_settings",
    }
    for name in cp.__all__:
        assert getattr(cp, name) is not None, name


def test_instance_types_are_the_simulators_types() -> None:
    assert cp.InstanceType is scheduling.InstanceType
    assert cp.Offering is scheduling.Offering
    assert cp.Overhead is scheduling.Overhead


@pytest.mark.parametrize(
    "module",
    ["karpy.cloudprovider.kwok", "karpy.cloudprovider.fake", "karpy.cloudprovider.testing",
     "karpy.cloudprovider.errors"],
)
def test_every_submodule_export_resolves(module: str) -> None:
    mod = importlib.import_module(module)
    assert mod.__doc__
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.{name}"


def test_the_docs_name_every_protocol_member_and_error() -> None:
    text = DOCS.read_text()
    for name in ("create", "delete", "get", "list", "get_instance_types", "is_drifted",
                 "repair_policies", "supported_node_classes", "InsufficientCapacityError",
                 "NodeClaimNotFoundError", "NodeClassNotReadyError", "CreateError",
                 "karpy.cloudproviders", "CloudProviderConformance", "from_context",
                 "register_controllers"):
        assert name in text, name
