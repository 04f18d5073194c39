"""The instance-type types of karpy.cloudprovider are the simulator's own (re-exported,
not redefined), and its submodules and protocol are documented. (The exact surface is
pinned to docs/providers.md by tests/test_public_surface.py.)"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import karpy.cloudprovider as cp
import karpy.scheduling as scheduling

DOCS = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


def test_instance_types_are_the_simulators_types() -> None:
    assert cp.InstanceType is scheduling.InstanceType
    assert cp.Offering is scheduling.Offering
    assert cp.Overhead is scheduling.Overhead


@pytest.mark.parametrize(
    "module",
    ["karpy.cloudprovider.kwok", "karpy.cloudprovider.fake", "karpy.cloudprovider.testing",
     "karpy.cloudprovider.errors", "karpy.cloudprovider.launch", "karpy.cloudprovider.registry",
     "karpy.cloudprovider.nodeclass"],
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


def test_the_docs_protocol_block_is_the_protocol() -> None:
    text = DOCS.read_text()
    block = text.split("class CloudProvider(Protocol):", 1)[1].split("```", 1)[0]
    documented = set(re.findall(r"def (\w+)\(", block))
    members = {name for name in vars(cp.CloudProvider) if not name.startswith("_")}
    assert documented == members
    count = {8: "eight", 9: "nine", 10: "ten"}[len(members)]
    assert f"{count} members" in text
