"""The instance shapes shipped for offline mode (data/instance_types.json): moto's copy of
EC2's DescribeInstanceTypes, cut to what :func:`~karpy_aws._instancetypes.
build_instance_type` reads and stored as one row per type, :data:`COLUMNS` wide.

Rows rather than JSON objects make the file a fifth of the size (about 170 KiB for
~1,400 types); :func:`from_row` turns a row back into DescribeInstanceTypes' shape, so
the builder reads offline data exactly as it reads EC2's answer. The file is written by
providers/aws/scripts/generate_offline_instance_types.py with :func:`to_row`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from importlib.resources import files
from types import MappingProxyType
from typing import Any, Final

__all__ = [
    "COLUMNS",
    "from_row",
    "offline_instance_types",
    "offline_zone_offerings",
    "to_row",
]

Path = tuple[str, ...]

COLUMNS: Final[tuple[tuple[Path, tuple[Path, ...] | None], ...]] = (
    (("VCpuInfo", "DefaultVCpus"), None),
    (("MemoryInfo", "SizeInMiB"), None),
    (("ProcessorInfo", "SupportedArchitectures"), None),
    (("ProcessorInfo", "Manufacturer"), None),
    (("ProcessorInfo", "SustainedClockSpeedInGhz"), None),
    (("Hypervisor",), None),
    (("SupportedUsageClasses",), None),
    (("NetworkInfo", "DefaultNetworkCardIndex"), None),
    (("NetworkInfo", "MaximumNetworkInterfaces"), None),
    (("NetworkInfo", "Ipv4AddressesPerInterface"), None),
    (("NetworkInfo", "EncryptionInTransitSupported"), None),
    (("NetworkInfo", "NetworkCards"),
     (("NetworkCardIndex",), ("MaximumNetworkInterfaces",))),
    (("EbsInfo", "EbsOptimizedSupport"), None),
    (("EbsInfo", "EbsOptimizedInfo", "MaximumBandwidthInMbps"), None),
    (("EbsInfo", "MaximumEbsAttachments"), None),
    (("EbsInfo", "AttachmentLimitType"), None),
    # the columns most types lack come last, so a row's trailing nulls can be cut
    (("InstanceStorageInfo", "TotalSizeInGB"), None),
    (("InstanceStorageInfo", "NvmeSupport"), None),
    (("InstanceStorageInfo", "Disks"), (("Count",),)),
    (("NetworkInfo", "EfaInfo", "MaximumEfaInterfaces"), None),
    (("GpuInfo", "Gpus"),
     (("Name",), ("Manufacturer",), ("Count",), ("MemoryInfo", "SizeInMiB"))),
    (("NeuronInfo", "NeuronDevices"), (("Name",), ("Count",), ("CoreInfo", "Count"))),
)  # fmt: skip
"""A row's columns: a path into DescribeInstanceTypes' answer, and for a list, the
paths into each of its items (an item is then a list of those values)."""


def _get(data: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(data, Mapping) or key not in data:
            return None
        data = data[key]
    return data


def _put(data: dict[str, Any], path: Path, value: Any) -> None:
    for key in path[:-1]:
        data = data.setdefault(key, {})
    data[path[-1]] = value


def to_row(info: Mapping[str, Any]) -> list[Any]:
    """One instance type's description as a row of :data:`COLUMNS` (trailing nulls cut)."""
    row: list[Any] = []
    for path, item_paths in COLUMNS:
        value = _get(info, path)
        if item_paths is not None and value is not None:
            value = [[_get(item, p) for p in item_paths] for item in value]
        row.append(value)
    while row and row[-1] is None:
        row.pop()
    return row


def from_row(name: str, row: Sequence[Any]) -> dict[str, Any]:
    """The description a row stands for, in DescribeInstanceTypes' shape (null columns
    left out, as EC2 leaves out what a type lacks)."""
    info: dict[str, Any] = {"InstanceType": name}
    for (path, item_paths), value in zip(COLUMNS, row, strict=False):
        if value is None:
            continue
        if item_paths is not None:
            items = []
            for values in value:
                item: dict[str, Any] = {}
                for p, v in zip(item_paths, values, strict=True):
                    if v is not None:
                        _put(item, p, v)
                items.append(item)
            value = items
        _put(info, path, value)
    return info


@cache
def offline_instance_types() -> Mapping[str, Mapping[str, Any]]:
    """The shipped instance-type table, by name (read once)."""
    raw = json.loads(
        files("karpy_aws").joinpath("data/instance_types.json").read_text(encoding="utf-8")
    )
    return MappingProxyType(
        {name: from_row(name, row) for name, row in raw["instance_types"].items()}
    )


@cache
def offline_zone_offerings(region: str) -> Mapping[str, frozenset[str]] | None:
    """The zones EC2 offers each type in, for ``region`` (data/zone_offerings.json:
    moto's recorded DescribeInstanceTypeOfferings), or None when the table lacks the
    region. A type the table does not list is offered nowhere, as EC2 would answer."""
    raw = json.loads(
        files("karpy_aws").joinpath("data/zone_offerings.json").read_text(encoding="utf-8")
    )
    types = raw["regions"].get(region)
    if types is None:
        return None
    return MappingProxyType(
        {name: frozenset(region + letter for letter in letters) for name, letters in types.items()}
    )
