"""The conformance kit catches providers that break the contract, and runs for a
provider author's project as it is (its own pytest configuration, asyncio strict mode)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

PROVIDERS = '''
import pytest
from karpy.cloudprovider.launch import choose_launch, launched_nodeclaim
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.cloudprovider.testing import CloudProviderConformance
from karpy.apis import NodeClaim


class IgnoresRequirements(FakeCloudProvider):
    """Launches the cheapest type whatever the NodeClaim asks for."""

    async def create(self, nodeclaim):
        stripped = nodeclaim.model_copy(deep=True)
        stripped.spec.requirements = []
        stripped.spec.resources.requests = {}
        choice = choose_launch(stripped, self.instance_types)
        launched = launched_nodeclaim(nodeclaim, choice, provider_id=f"bad://{id(stripped)}")
        self.instances[launched.status.provider_id] = launched
        return launched


class NeverFinishesDeleting(FakeCloudProvider):
    """delete() always says "started" and never reports the instance gone."""

    async def delete(self, nodeclaim):
        return None


class TestGood(CloudProviderConformance):
    timeout = 0.5

    @pytest.fixture
    def provider(self):
        return FakeCloudProvider()


class TestIgnoresRequirements(CloudProviderConformance):
    timeout = 0.5

    @pytest.fixture
    def provider(self):
        return IgnoresRequirements()


class TestNeverFinishesDeleting(CloudProviderConformance):
    timeout = 0.5

    @pytest.fixture
    def provider(self):
        return NeverFinishesDeleting()
'''


def run_kit(tmp_path: Path) -> dict[str, dict[str, str]]:
    """Run the module above in a fresh project; return {class: {test: outcome}}."""
    (tmp_path / "test_providers.py").write_text(textwrap.dedent(PROVIDERS))
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = strict\n")
    report = tmp_path / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"--junitxml={report}", "test_providers.py"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=300,
    )
    outcomes: dict[str, dict[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        cls = case.get("classname", "").rsplit(".", 1)[-1]
        failed = case.find("failure") is not None or case.find("error") is not None
        outcomes.setdefault(cls, {})[case.get("name", "")] = "failed" if failed else "passed"
    return outcomes


@pytest.mark.slow
def test_the_kit_passes_a_good_provider_and_fails_broken_ones(tmp_path: Path) -> None:
    outcomes = run_kit(tmp_path)
    good = outcomes["TestGood"]
    assert len(good) >= 15
    assert set(good.values()) == {"passed"}, good

    ignores = outcomes["TestIgnoresRequirements"]
    for name in (
        "test_create_honours_instance_type_zone_and_capacity_type",
        "test_create_honours_not_in_and_larger_requests",
        "test_create_with_unsatisfiable_requirements_fails_with_a_typed_error",
        "test_launched_labels_satisfy_every_requirement_kind",
    ):
        assert ignores[name] == "failed", name
    assert ignores["test_instance_types_define_every_well_known_label"] == "passed"

    never = outcomes["TestNeverFinishesDeleting"]
    for name in (
        "test_delete_until_not_found_then_the_instance_is_gone",
        "test_delete_of_a_gone_instance_raises_not_found",
    ):
        assert never[name] == "failed", name
    assert never["test_allocatable_is_within_capacity"] == "passed"
