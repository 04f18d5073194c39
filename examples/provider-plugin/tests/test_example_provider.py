"""The example plugin is installed from this directory, karpy discovers it through its
entry point and builds it by name, and it passes karpy's conformance kit."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest
from karpy_example_provider import ExampleCloudProvider

from karpy.cloudprovider import ProviderContext
from karpy.cloudprovider.errors import ProviderLoadError
from karpy.cloudprovider.registry import build_provider, installed_providers
from karpy.cloudprovider.testing import CloudProviderConformance

HERE = Path(__file__).resolve().parent.parent


class TestExampleProviderConformance(CloudProviderConformance):
    timeout = 2.0

    @pytest.fixture
    def provider(self) -> ExampleCloudProvider:
        return ExampleCloudProvider()


def test_the_distribution_is_installed_from_this_directory() -> None:
    dist = distribution("karpy-example-provider")
    assert dist.version == "0.1.0"
    assert [ep.name for ep in dist.entry_points if ep.group == "karpy.cloudproviders"] == [
        "example"
    ]
    import karpy_example_provider

    assert Path(karpy_example_provider.__file__).resolve().is_relative_to(HERE)


def test_karpy_lists_it_beside_kwok_in_a_fresh_interpreter() -> None:
    # a new process sees exactly what `karpy run` would see at start-up
    done = subprocess.run(
        [sys.executable, "-c",
         "import karpy.cloudprovider.registry as r;"
         " print(sorted(r.installed_providers().items()))"],
        capture_output=True, text=True, check=True,
    )
    assert "('example', 'karpy_example_provider:ExampleCloudProvider')" in done.stdout
    assert "'kwok'" in done.stdout
    assert installed_providers()["example"] == "karpy_example_provider:ExampleCloudProvider"


async def test_karpy_builds_it_by_name_with_its_settings() -> None:
    context = ProviderContext(client=None, settings={"zones": "eu-1a, eu-1b, eu-1c"})  # type: ignore[arg-type]
    provider = await build_provider("example", context)
    assert isinstance(provider, ExampleCloudProvider)
    types = await provider.get_instance_types(None)  # type: ignore[arg-type]
    zones = {o.zone for it in types for o in it.offerings}
    assert zones == {"eu-1a", "eu-1b", "eu-1c"}


async def test_a_bad_setting_fails_at_start_up_with_the_plugins_message() -> None:
    context = ProviderContext(client=None, settings={"region": "x"})  # type: ignore[arg-type]
    with pytest.raises(ProviderLoadError, match="unknown example provider settings"):
        await build_provider("example", context)
