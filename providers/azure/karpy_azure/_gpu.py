"""GPU driver installation on AKS nodes: which NVIDIA driver a VM size gets from AKS's
node scripts, and whether it gets one at all — as Karpenter's Azure provider decides it
(its ``pkg/utils/gpu.go``, kept in line with AgentBaker's GPU images).

AKS's provisioning scripts install the driver when ``GPU_NODE`` and
``CONFIG_GPU_DRIVER_IF_NEEDED`` are true, from the image
``mcr.microsoft.com/aks/aks-gpu-<GPU_DRIVER_TYPE>:<GPU_DRIVER_VERSION>-<GPU_IMAGE_SHA>``,
and make ``nvidia-container-runtime`` containerd's default runtime. Without the driver
``nvidia.com/gpu`` never appears on the Node (unless a GPU operator installs it), so a
NodeClaim for GPU pods never initializes.

- NVIDIA sizes get a driver unless the AKSNodeClass says ``gpu.mode: None``
  ("bring your own": the node runs ``runc``, as on a CPU node).
- AMD sizes get none: AKS's scripts install no AMD driver (Karpenter-Azure's
  ``IsDriverInstallSupported`` is NVIDIA only); the AMD GPU operator does.
- Which driver: GRID v20 for the RTX PRO 6000 Blackwell sizes, GRID ("converged") for
  the A10 sizes, the R470 CUDA driver for the K80 NC v1 sizes, the R580 LTS CUDA driver
  for every other NVIDIA size.
- MIG is never configured (Karpenter-Azure leaves ``MIG_NODE`` false; the AKSNodeClass
  has no GPU instance profile).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from karpy_azure.apis import AKSNodeClass

__all__ = ["GpuDriver", "gpu_driver", "gpu_driver_for"]

# driver versions and AKS GPU image tags (AgentBaker's GPUContainerImages)
_CUDA_470: Final = ("470.82.01", "cuda")
_CUDA_LTS: Final = ("580.159.04", "cuda-lts")
_GRID: Final = ("570.211.01", "grid")
_GRID_V20: Final = ("595.58.03", "grid-v20")
_IMAGE_SHA: Final = {
    "cuda": "20260629214430",  # the CUDA images share the LTS image's tag
    "cuda-lts": "20260629214430",
    "grid": "20260522192315",
    "grid-v20": "20260609172331",
}

# sizes whose "converged" driver serves CUDA and GRID; a plain CUDA driver fails to
# install on them
_GRID_SIZES: Final = frozenset({
    "standard_nv6ads_a10_v5", "standard_nv12ads_a10_v5", "standard_nv18ads_a10_v5",
    "standard_nv36ads_a10_v5", "standard_nv72ads_a10_v5", "standard_nv36adms_a10_v5",
    "standard_nc8ads_a10_v4", "standard_nc16ads_a10_v4", "standard_nc32ads_a10_v4",
})  # fmt: skip
# RTX PRO 6000 Blackwell Server Edition sizes: GRID v20 (595.x)
_GRID_V20_SIZES: Final = frozenset(
    f"standard_nc{n}_xl_rtxpro6000bse_v6"
    for n in ("24lds", "36ds", "36lds", "72ds", "72lds", "144ds", "144lds", "288ds",
              "288lds")
)


@dataclass(frozen=True, slots=True)
class GpuDriver:
    """The NVIDIA driver AKS's scripts install: ``GPU_DRIVER_VERSION``,
    ``GPU_DRIVER_TYPE`` and ``GPU_IMAGE_SHA``."""

    version: str
    type: str
    image_sha: str


def _normalize(size: str) -> str:
    return size.lower().removesuffix("_promo")


def gpu_driver(size: str) -> GpuDriver:
    """The NVIDIA driver for VM size ``size`` (``Standard_NC6s_v3``)."""
    name = _normalize(size)
    if name in _GRID_V20_SIZES:
        version, kind = _GRID_V20
    elif name in _GRID_SIZES:
        version, kind = _GRID
    elif name.startswith("standard_nc") and "_v" not in name:
        version, kind = _CUDA_470  # NC v1 (K80)
    else:
        version, kind = _CUDA_LTS
    return GpuDriver(version, kind, _IMAGE_SHA[kind])


def gpu_driver_for(size: str, manufacturer: str, node_class: AKSNodeClass) -> GpuDriver | None:
    """The driver a node of ``size`` gets: one for an NVIDIA size unless the class's
    ``gpu.mode`` is ``None``; None for AMD sizes and CPU sizes."""
    if manufacturer != "nvidia":
        return None
    gpu = node_class.spec.gpu
    if gpu is not None and gpu.mode == "None":
        return None
    return gpu_driver(size)
