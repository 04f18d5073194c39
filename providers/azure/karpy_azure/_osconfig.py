"""The AKSNodeClass's ``linuxOSConfig`` as AKS's node scripts take it: sysctls appended
to the ones AKS sets (``SYSCTL_CONTENT``; the class's value wins for a key both set),
transparent huge pages (``SHOULD_CONFIG_TRANSPARENT_HUGE_PAGE``, ``THP_ENABLED``,
``THP_DEFRAG``) and a swap file (``SHOULD_CONFIG_SWAP_FILE``, ``SWAP_FILE_SIZE_MB``).

Karpenter's Azure provider sends these through the AKS node bootstrapping API and the
AKS machine API, whose scripts set the same variables; its scriptless template leaves
them off. karpy, whose bootstrap is scriptless only, sets them itself.

A swap file and the kubelet's default ``failSwapOn: true`` cannot go together (the
kubelet refuses to start on a node with swap): with a swap file the kubelet gets
``--fail-swap-on=false`` unless the class asks for true, which the status controller
reports instead (:func:`swap_conflict`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from karpy.scheduling import resources as res
from karpy_azure.apis import AKSNodeClass
from karpy_azure.apis.aksnodeclass import SYSCTL_KEYS, LinuxOSConfiguration

__all__ = ["OSConfig", "os_config", "swap_conflict"]


@dataclass(frozen=True, slots=True)
class OSConfig:
    """What of ``linuxOSConfig`` the bootstrap carries."""

    sysctls: Mapping[str, str] = field(default_factory=dict)
    transparent_huge_page_enabled: str = ""
    transparent_huge_page_defrag: str = ""
    swap_file_size_mb: int = 0


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def os_config(config: LinuxOSConfiguration | None) -> OSConfig:
    """The bootstrap's view of ``config`` (empty when None)."""
    if config is None:
        return OSConfig()
    sysctls: dict[str, str] = {}
    if config.sysctls is not None:
        for attr, key in SYSCTL_KEYS.items():
            value = getattr(config.sysctls, attr)
            if value is not None:
                sysctls[key] = _value(value)
    swap_mb = 0
    if config.swap_file_size:
        # whole MiB, rounded as AKS rounds it
        swap_mb = round(res.parse_quantity(config.swap_file_size) / 2**20)
    return OSConfig(
        sysctls=sysctls,
        transparent_huge_page_enabled=config.transparent_huge_page_enabled or "",
        transparent_huge_page_defrag=config.transparent_huge_page_defrag or "",
        swap_file_size_mb=swap_mb,
    )


def swap_conflict(node_class: AKSNodeClass) -> str:
    """Why the class's swap file and kubelet cannot go together ("" when they can)."""
    config = node_class.spec.linux_os_config
    kubelet = node_class.spec.kubelet
    if config is None or not config.swap_file_size or kubelet is None:
        return ""
    if kubelet.fail_swap_on:
        return (
            "spec.linuxOSConfig.swapFileSize makes a swap file, on which a kubelet with "
            "spec.kubelet.failSwapOn true does not start: set failSwapOn to false or remove "
            "swapFileSize"
        )
    return ""
