"""Providers are found through the ``karpy.cloudproviders`` entry points: a user choosing
a provider by name gets it built, and every way of getting the name or the plugin wrong
fails at start-up with a message that says what is installed or where the plugin broke."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from typing_extensions import get_protocol_members

import karpy
from karpy.cloudprovider import CloudProvider, ProviderContext
from karpy.cloudprovider.errors import (
    ProviderLoadError,
    ProviderRegistryError,
    UnknownProviderError,
)
from karpy.cloudprovider.registry import (
    CLOUD_PROVIDER_ENV,
    ENTRY_POINT_GROUP,
    build_provider,
    installed_providers,
    load_factory,
    open_provider,
    provider_name,
)

STUB_PROVIDER = '''
class StubProvider:
    closed = False
    def __init__(self, context):
        self.context = context
    @property
    def name(self):
        return "{name}"
    async def create(self, nodeclaim): return nodeclaim
    async def delete(self, nodeclaim): return None
    async def get(self, provider_id): raise LookupError(provider_id)
    async def list(self): return []
    async def get_instance_types(self, nodepool): return []
    async def is_drifted(self, nodeclaim): return None
    def repair_policies(self): return []
    def supported_node_classes(self): return []
    async def aclose(self):
        StubProvider.closed = True

def factory(context):
    return StubProvider(context)

class ClassTarget(StubProvider):
    def __init__(self, context, *, built_by):
        super().__init__(context)
        self.built_by = built_by
    @classmethod
    def from_context(cls, context):
        return cls(context, built_by="from_context")

async def async_factory(context):
    return StubProvider(context)

def not_a_provider(context):
    return object()
'''


def install_plugin(
    root: Path, monkeypatch: pytest.MonkeyPatch, dist: str, entries: dict[str, str], module: str
) -> None:
    """Make a distribution ``dist`` with ``entries`` (name -> target) and a module importable."""
    info = root / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "\n".join(f"{name} = {target}" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}\n")
    (root / f"{dist}_mod.py").write_text(module)
    monkeypatch.syspath_prepend(str(root))


@pytest.fixture
def context() -> ProviderContext:
    # The stub never touches the client; a real provider gets karpy.runtime's Client.
    return ProviderContext(client=None, cluster_name="test", settings={"a": "b"})  # type: ignore[arg-type]


def test_the_core_registers_the_kwok_provider() -> None:
    assert installed_providers()["kwok"].startswith("karpy.cloudprovider.kwok:")


async def test_a_registered_provider_is_built_with_the_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, context: ProviderContext
) -> None:
    install_plugin(
        tmp_path, monkeypatch, "stubprov", {"stub": "stubprov_mod:factory"},
        STUB_PROVIDER.format(name="stub"),
    )
    assert installed_providers()["stub"] == "stubprov_mod:factory"
    provider = await build_provider("stub", context)
    assert isinstance(provider, CloudProvider)
    assert provider.name == "stub"
    assert provider.context is context  # type: ignore[attr-defined]


async def test_a_class_target_is_built_through_its_from_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, context: ProviderContext
) -> None:
    install_plugin(
        tmp_path, monkeypatch, "classprov", {"classy": "classprov_mod:ClassTarget"},
        STUB_PROVIDER.format(name="classy"),
    )
    provider = await build_provider("classy", context)
    assert provider.built_by == "from_context"  # type: ignore[attr-defined]


async def test_an_async_factory_is_awaited_and_open_provider_closes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, context: ProviderContext
) -> None:
    install_plugin(
        tmp_path, monkeypatch, "asyncprov", {"asyncstub": "asyncprov_mod:async_factory"},
        STUB_PROVIDER.format(name="asyncstub"),
    )
    async with open_provider("asyncstub", context) as provider:
        assert provider.name == "asyncstub"
        assert type(provider).closed is False  # type: ignore[attr-defined]
    assert type(provider).closed is True  # type: ignore[attr-defined]


def test_an_unknown_name_lists_the_installed_providers() -> None:
    with pytest.raises(UnknownProviderError) as raised:
        load_factory("no-such-cloud")
    message = str(raised.value)
    assert "'no-such-cloud'" in message
    assert "kwok" in message
    assert "kwok" in raised.value.installed


def test_the_flag_wins_over_the_environment_and_neither_is_an_error() -> None:
    assert provider_name("kwok", {CLOUD_PROVIDER_ENV: "aws"}) == "kwok"
    assert provider_name(None, {CLOUD_PROVIDER_ENV: "aws"}) == "aws"
    with pytest.raises(UnknownProviderError, match=r"no cloud provider was chosen.*kwok"):
        provider_name(None, {})


def test_a_provider_that_fails_to_import_is_reported_with_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = textwrap.dedent(
        """
        def helper():
            raise RuntimeError("the SDK is missing a credential file")
        helper()
        """
    )
    install_plugin(tmp_path, monkeypatch, "brokenprov", {"broken": "brokenprov_mod:f"}, broken)
    with pytest.raises(ProviderLoadError) as raised:
        load_factory("broken")
    message = str(raised.value)
    assert "'broken'" in message
    assert "the SDK is missing a credential file" in message
    # the traceback points at the plugin's own file and function, not at karpy
    assert "brokenprov_mod.py" in message
    assert "in helper" in message
    assert isinstance(raised.value.__cause__, RuntimeError)


async def test_a_factory_that_returns_something_else_names_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, context: ProviderContext
) -> None:
    install_plugin(
        tmp_path, monkeypatch, "badprov", {"bad": "badprov_mod:not_a_provider"},
        STUB_PROVIDER.format(name="bad"),
    )
    with pytest.raises(ProviderLoadError, match="does not implement the CloudProvider protocol"):
        await build_provider("bad", context)


async def test_the_missing_members_named_are_the_protocols_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, context: ProviderContext
) -> None:
    """The member list is the protocol's (one definition): nothing in karpy spells it
    again, and the error names every member an unrelated object lacks."""
    distinctive = {"get_instance_types", "is_drifted", "repair_policies", "supported_node_classes"}
    assert distinctive <= get_protocol_members(CloudProvider)
    spelled = sorted(
        str(path.relative_to(Path(karpy.__file__).parent))
        for path in Path(karpy.__file__).parent.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in distinctive
    )
    assert spelled == []
    install_plugin(
        tmp_path, monkeypatch, "badprov", {"bad": "badprov_mod:not_a_provider"},
        STUB_PROVIDER.format(name="bad"),
    )
    with pytest.raises(ProviderLoadError) as raised:
        await build_provider("bad", context)
    missing = str(raised.value).split("missing: ", 1)[1]
    for member in get_protocol_members(CloudProvider):
        assert member in missing


def test_two_distributions_claiming_one_name_is_an_error_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_plugin(
        tmp_path / "one", monkeypatch, "oneprov", {"twice": "oneprov_mod:factory"},
        STUB_PROVIDER.format(name="twice"),
    )
    install_plugin(
        tmp_path / "two", monkeypatch, "twoprov", {"twice": "twoprov_mod:factory"},
        STUB_PROVIDER.format(name="twice"),
    )
    with pytest.raises(ProviderRegistryError) as raised:
        load_factory("twice")
    assert "oneprov" in str(raised.value)
    assert "twoprov" in str(raised.value)


def test_a_provider_contributes_its_controllers_to_the_manager() -> None:
    from typing import Any

    from karpy.cloudprovider import ContributesControllers
    from karpy.cloudprovider.registry import register_provider_controllers

    class WithControllers:
        def __init__(self) -> None:
            self.got: list[Any] = []

        def register_controllers(self, manager: Any) -> None:
            self.got.append(manager)

    manager: Any = object()
    provider = WithControllers()
    assert isinstance(provider, ContributesControllers)
    assert register_provider_controllers(provider, manager) is True
    assert provider.got == [manager]
    assert register_provider_controllers(object(), manager) is False
