"""What an API extension (a cloud provider's package) contributes to karpy's API:
its NodeClass kinds, the label domains it reserves and the manifests it can convert.

karpy never imports a provider. A provider announces an ``APIExtension`` object in
the ``karpy.crds`` entry-point group of its distribution::

    [project.entry-points."karpy.crds"]
    aws = "karpy_aws.apis:EXTENSION"

``karpy crds`` then writes the provider's CRD set: its NodeClass CRDs, and Karpenter's
NodePool and NodeClaim CRDs with its reserved label domains added to Karpenter's rules
(only its own: each provider's set is installed alone); ``karpy convert`` uses its
converters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Final

from karpy.apis import labels as _labels
from karpy.apis.autoscaling import CapacityBuffer
from karpy.apis.core import Resource
from karpy.apis.karpydev import ClusterLimit
from karpy.apis.labels import (
    GROUP,
    KUBERNETES_IO_ALLOWED_LABELS,
    LABEL_CAPACITY_TYPE,
    LABEL_NODEPOOL,
    RESTRICTED_LABELS,
    WELL_KNOWN_LABELS,
)
from karpy.apis.v1 import NodeClaim, NodePool
from karpy.apis.v1alpha1 import NodeOverlay

if TYPE_CHECKING:
    from karpy.apis.convert.types import Converter

__all__ = [
    "CORE",
    "ENTRY_POINT_GROUP",
    "APIExtension",
    "ExtensionError",
    "load_extensions",
    "restricted_label_reason",
]

#: The entry-point group providers announce their ``APIExtension`` in.
ENTRY_POINT_GROUP: Final = "karpy.crds"


class ExtensionError(Exception):
    """An entry point of ``karpy.crds`` could not be loaded or is not an APIExtension."""


@dataclass(frozen=True)
class APIExtension:
    """One package's contribution to the API."""

    #: A short name (the entry point's name, e.g. "aws").
    name: str
    #: The kinds it defines (each a ``Resource`` subclass with ``crd`` set).
    resources: Sequence[type[Resource]] = ()
    #: Label domains a NodePool may not use, each with the well-known keys it still may.
    restricted_label_domains: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: Single label keys a NodePool may not use.
    restricted_labels: Sequence[str] = ()
    #: Labels the provider sets on nodes and that pods and NodePools may select on.
    well_known_labels: Sequence[str] = ()
    #: Converters from older API versions of its kinds (used by ``karpy convert``).
    converters: Sequence[Converter] = ()
    #: Sub-domains of a restricted domain that stay usable (restricted domain -> them).
    label_domain_exceptions: Mapping[str, Sequence[str]] = field(default_factory=dict)


#: Karpenter's own kinds and reserved labels.
CORE: Final = APIExtension(
    name="karpenter",
    resources=(NodePool, NodeClaim, NodeOverlay, CapacityBuffer, ClusterLimit),
    # Karpenter's v1 CRD rules, in its order: the kubelet's domains, then its own.
    restricted_label_domains={
        "kubernetes.io": KUBERNETES_IO_ALLOWED_LABELS,
        "k8s.io": (),
        GROUP: (LABEL_CAPACITY_TYPE, LABEL_NODEPOOL),
    },
    restricted_labels=tuple(sorted(RESTRICTED_LABELS)),
    well_known_labels=tuple(sorted(WELL_KNOWN_LABELS)),
    label_domain_exceptions={
        "kubernetes.io": ("node.kubernetes.io", "node-restriction.kubernetes.io"),
        "k8s.io": ("kops.k8s.io",),
    },
)


def load_extensions(*, include_core: bool = True) -> list[APIExtension]:
    """The core extension followed by every installed provider's, sorted by name."""
    found: list[APIExtension] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            value = ep.load()
        except Exception as err:
            raise ExtensionError(
                f"entry point {ep.name!r} ({ep.value}) in group {ENTRY_POINT_GROUP} "
                f"failed to load: {err}"
            ) from err
        if not isinstance(value, APIExtension):
            raise ExtensionError(
                f"entry point {ep.name!r} ({ep.value}) in group {ENTRY_POINT_GROUP} gave "
                f"{type(value).__name__}, not a karpy.apis.extension.APIExtension"
            )
        found.append(value)
    found.sort(key=lambda e: e.name)
    return [CORE, *found] if include_core else found


def restricted_label_reason(key: str, extensions: Sequence[APIExtension]) -> str | None:
    """Why a NodePool may not use label ``key`` given every extension, or None if it may.

    The same judgement as the CRDs' CEL rules, for code that checks labels before they
    reach the API server (e.g. pod requirements the scheduler turns into NodeClaims).
    """
    return _labels.restricted_label_reason(
        key,
        well_known=[
            k
            for ext in extensions
            for k in (
                *ext.well_known_labels,
                *(k for ks in ext.restricted_label_domains.values() for k in ks),
            )
        ],
        restricted_domains=[d for ext in extensions for d in ext.restricted_label_domains],
        restricted=[k for ext in extensions for k in ext.restricted_labels],
        exceptions=[
            e for ext in extensions for es in ext.label_domain_exceptions.values() for e in es
        ],
    )
