"""karpy: a Kubernetes node autoscaler that speaks Karpenter's v1 API.

The package is three things at once (see docs/design.md): an importable async controller
runtime (:mod:`karpy.runtime`), the autoscaler built on it, and a CloudProvider protocol
that clouds plug into through the ``karpy.cloudproviders`` entry-point group.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("karpy")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
