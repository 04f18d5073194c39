"""What a provider declares about its own settings, so ``karpy run`` can list them in
``--help`` and reject a bad one at start-up, before it connects to anything.

Both are optional attributes of the object a ``karpy.cloudproviders`` entry point names
(usually the provider class)::

    class MyCloudProvider:
        SETTINGS = (ProviderSetting("region", "MY_REGION", "", "the region", required=True),)

        @classmethod
        def check_settings(cls, settings, *, cluster_name, environ) -> None:
            ...  # raise ValueError naming the setting, its environment variable and the fix

``check_settings`` gets the same ``--provider-setting`` values and environment the
factory will see; it must not do I/O (no cloud calls), only parse. A provider without
it is checked when its factory runs, after karpy has connected to the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from karpy.cloudprovider._protocol import ChecksSettings, DeclaresSettings
from karpy.cloudprovider._registry import ENTRY_POINT_GROUP, installed_providers
from karpy.cloudprovider.errors import CloudProviderError, UnknownProviderError

__all__ = ["ProviderSetting", "ProviderSettingsError", "check_provider_settings",
           "provider_settings"]  # fmt: skip


@dataclass(frozen=True)
class ProviderSetting:
    """One setting of a provider: its ``--provider-setting`` key, the environment
    variable it falls back to (Karpenter's name; "" when there is none), its default as
    text and a one-line description."""

    key: str
    env: str
    default: str
    help: str
    required: bool = False


class ProviderSettingsError(ValueError):
    """A provider's ``check_settings`` refused its settings; the message says which
    setting (key and environment variable) and how to fix it."""


def _target(name: str) -> Any:
    """The object the provider's entry point names (its class, usually)."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep.load()
    raise UnknownProviderError(name, list(installed_providers()))


def provider_settings(name: str) -> Sequence[ProviderSetting]:
    """The settings provider ``name`` declares (empty when it declares none)."""
    target = _target(name)
    declared = target.SETTINGS if isinstance(target, DeclaresSettings) else ()
    return tuple(s for s in declared if isinstance(s, ProviderSetting))


def check_provider_settings(
    name: str,
    *,
    settings: Mapping[str, str],
    cluster_name: str,
    environ: Mapping[str, str],
) -> None:
    """Run provider ``name``'s ``check_settings``, if it has one.

    Raises UnknownProviderError for a provider that is not installed and
    ProviderSettingsError (one line: the provider and its own message) for settings it
    refuses.
    """
    target = _target(name)
    if not isinstance(target, ChecksSettings):
        return
    try:
        target.check_settings(settings, cluster_name=cluster_name, environ=environ)
    except (ValueError, LookupError, TypeError, CloudProviderError) as exc:
        text = " ".join(str(exc).split())
        raise ProviderSettingsError(f"{name} provider: {text}") from exc
