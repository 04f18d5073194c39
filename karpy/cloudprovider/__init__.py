"""The CloudProvider protocol, its errors, the plugin registry (entry-point group
``karpy.cloudproviders``), the kwok provider and a conformance kit for provider authors.

A cloud plugs into karpy by implementing :class:`CloudProvider` and registering a
factory under the ``karpy.cloudproviders`` entry-point group (see docs/providers.md).
Submodules: :mod:`karpy.cloudprovider.errors` (the error tree),
:mod:`karpy.cloudprovider.kwok` (the provider for kwok-run fake nodes),
:mod:`karpy.cloudprovider.fake` (an in-memory provider for unit tests) and
:mod:`karpy.cloudprovider.testing` (the conformance kit).
"""

from karpy.cloudprovider._launch import (
    LaunchChoice,
    choose_launch,
    launched_labels,
    launched_nodeclaim,
    nodeclaim_requests,
    nodeclaim_requirements,
    offering_key,
)
from karpy.cloudprovider._nodeclass import (
    NODE_CLASS_READY,
    NodeClassReadiness,
    node_class_readiness,
    resolve_node_class,
)
from karpy.cloudprovider._protocol import CloudProvider, ContributesControllers
from karpy.cloudprovider._registry import (
    CLOUD_PROVIDER_ENV,
    ENTRY_POINT_GROUP,
    ProviderContext,
    ProviderFactory,
    build_provider,
    close_provider,
    installed_providers,
    load_factory,
    open_provider,
    provider_name,
    register_provider_controllers,
)
from karpy.cloudprovider._settings import (
    ProviderSetting,
    ProviderSettingsError,
    check_provider_settings,
    provider_settings,
)
from karpy.cloudprovider._types import DriftReason, NodeClassKind, OfferingKey, RepairPolicy
from karpy.cloudprovider.errors import (
    CloudProviderError,
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
    ProviderLoadError,
    ProviderRegistryError,
    UnknownProviderError,
)
from karpy.scheduling import InstanceType, Offering, Overhead

__all__ = [
    "CLOUD_PROVIDER_ENV",
    "ENTRY_POINT_GROUP",
    "NODE_CLASS_READY",
    "CloudProvider",
    "CloudProviderError",
    "ContributesControllers",
    "CreateError",
    "DriftReason",
    "InstanceType",
    "InsufficientCapacityError",
    "LaunchChoice",
    "NodeClaimNotFoundError",
    "NodeClassKind",
    "NodeClassNotReadyError",
    "NodeClassReadiness",
    "Offering",
    "OfferingKey",
    "Overhead",
    "ProviderContext",
    "ProviderFactory",
    "ProviderLoadError",
    "ProviderRegistryError",
    "ProviderSetting",
    "ProviderSettingsError",
    "RepairPolicy",
    "UnknownProviderError",
    "build_provider",
    "check_provider_settings",
    "choose_launch",
    "close_provider",
    "installed_providers",
    "launched_labels",
    "launched_nodeclaim",
    "load_factory",
    "node_class_readiness",
    "nodeclaim_requests",
    "nodeclaim_requirements",
    "offering_key",
    "open_provider",
    "provider_name",
    "provider_settings",
    "register_provider_controllers",
    "resolve_node_class",
]
