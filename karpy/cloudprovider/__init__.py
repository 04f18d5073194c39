"""What a cloud provider author needs: the :class:`CloudProvider` protocol, the values it
speaks (:class:`InstanceType`, :class:`Offering`, :class:`OfferingKey`,
:class:`DriftReason`, :class:`RepairPolicy`; NodeClass kinds are
:class:`karpy.runtime.Kind`), Karpenter's own kinds (``NODE_POOL``, ``NODE_CLAIM``,
``NODE_OVERLAY``), the
:class:`ProviderContext` its factory receives (with the NodeOverlays in force,
:class:`LaunchOverlays`), the :class:`UnavailableOfferings` cache
of offerings the cloud just refused, the optional abilities (:class:`ContributesControllers`,
:class:`ClosesOnShutdown`, :class:`BuildsFromContext`, :class:`DeclaresSettings`,
:class:`ChecksSettings`) and :class:`ProviderSetting` declarations, and the
errors ``create``/``get``/``delete`` raise.

A cloud plugs into karpy by implementing :class:`CloudProvider` and registering a
factory under the ``karpy.cloudproviders`` entry-point group (see docs/providers.md).
The rest sits in named submodules: :mod:`karpy.cloudprovider.launch` (choosing and
describing a launch in ``create``), :mod:`karpy.cloudprovider.errors` (the whole error
tree, loading errors included), :mod:`karpy.cloudprovider.registry` (entry-point
loading, used by the operator), :mod:`karpy.cloudprovider.nodeclass` (NodeClass
resolution and readiness, used by the nodepool controller),
:mod:`karpy.cloudprovider.kwok` (the provider for kwok-run fake nodes),
:mod:`karpy.cloudprovider.fake` (an in-memory provider for unit tests) and
:mod:`karpy.cloudprovider.testing` (the conformance kit).
"""

from karpy.cloudprovider._overlays import LaunchOverlays, NoOverlays
from karpy.cloudprovider._protocol import (
    BuildsFromContext,
    ChecksSettings,
    ClosesOnShutdown,
    CloudProvider,
    ContributesControllers,
    DeclaresSettings,
)
from karpy.cloudprovider._registry import ProviderContext, ProviderFactory
from karpy.cloudprovider._settings import ProviderSetting
from karpy.cloudprovider._types import (
    NODE_CLAIM,
    NODE_OVERLAY,
    NODE_POOL,
    DriftReason,
    NodeClassKind,
    OfferingKey,
    RepairPolicy,
)
from karpy.cloudprovider._unavailable import UnavailableOfferings
from karpy.cloudprovider.errors import (
    CloudProviderError,
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpy.scheduling import InstanceType, Offering, Overhead

__all__ = [
    "NODE_CLAIM",
    "NODE_OVERLAY",
    "NODE_POOL",
    "BuildsFromContext",
    "ChecksSettings",
    "ClosesOnShutdown",
    "CloudProvider",
    "CloudProviderError",
    "ContributesControllers",
    "CreateError",
    "DeclaresSettings",
    "DriftReason",
    "InstanceType",
    "InsufficientCapacityError",
    "LaunchOverlays",
    "NoOverlays",
    "NodeClaimNotFoundError",
    "NodeClassKind",
    "NodeClassNotReadyError",
    "Offering",
    "OfferingKey",
    "Overhead",
    "ProviderContext",
    "ProviderFactory",
    "ProviderSetting",
    "RepairPolicy",
    "UnavailableOfferings",
]
