"""Loading providers: the ``karpy.cloudproviders`` entry-point group and the helpers the
operator (and tools like ``karpy providers``) use to find, build, open and close a
provider by name, and to list and check a provider's declared settings before
``karpy run`` connects to anything (:func:`provider_settings`,
:func:`check_provider_settings`).

Provider authors need none of this beyond registering their entry point
(docs/providers.md); the factory they register receives a
:class:`~karpy.cloudprovider.ProviderContext`. Loading errors
(:class:`~karpy.cloudprovider.errors.ProviderLoadError`,
:class:`~karpy.cloudprovider.errors.UnknownProviderError`) are in
:mod:`karpy.cloudprovider.errors`.
"""

from karpy.cloudprovider._registry import (
    CLOUD_PROVIDER_ENV,
    ENTRY_POINT_GROUP,
    build_provider,
    close_provider,
    installed_providers,
    load_factory,
    open_provider,
    provider_name,
    register_provider_controllers,
)
from karpy.cloudprovider._settings import (
    ProviderSettingsError,
    check_provider_settings,
    provider_settings,
)

__all__ = [
    "CLOUD_PROVIDER_ENV",
    "ENTRY_POINT_GROUP",
    "ProviderSettingsError",
    "build_provider",
    "check_provider_settings",
    "close_provider",
    "installed_providers",
    "load_factory",
    "open_provider",
    "provider_name",
    "provider_settings",
    "register_provider_controllers",
]
