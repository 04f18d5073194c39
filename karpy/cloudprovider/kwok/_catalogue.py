"""The kwok provider's instance-type catalogue: generated, or read from a JSON file.

The generated catalogue follows Karpenter's kwok tool (kwok/tools/gen_instance_types.go):
for every size of 1 to 256 vCPU, three families by vCPU:memory ratio (``c`` 1:2,
``m`` 1:4, ``r`` 1:8), two architectures and two operating systems, offered spot and
on-demand in four zones. Prices come from the resources (0.025 $/vCPU/h plus
0.001 $/GB/h), spot at 70% of on-demand. Names read ``c-4x-amd64-linux``.

The JSON file format is Karpenter kwok's ``instance_types.json`` (a list of
``{name, architecture, operatingSystems, resources, offerings: [{Price, Available,
Requirements}]}``), so its catalogues load unchanged. Unlike Karpenter, ``Available``
is honoured, which lets a catalogue mark offerings unavailable.

Reserved capacity: an offering with ``karpenter.sh/capacity-type In [reserved]`` names
its reservation with ``karpenter.kwok.sh/reservation-id In [<id>]`` and says how many
instances the reservation holds in ``ReservationCapacity`` (Karpenter kwok's field).
The provider counts its running instances in each reservation against that number.

Devices (Dynamic Resource Allocation): an entry may carry ``resourceSlices``, a list of
ResourceSlice ``spec``s (``driver``, optional ``pool.name`` -- default the type's
name --, ``devices``, ``sharedCounters``) that a node of the type publishes, as
Karpenter's dra-kwok-driver DRAConfig pools declare per node selector. They become the
type's :attr:`~karpy.scheduling.InstanceType.resource_slice_templates`, and the local
cluster's test driver publishes them for kwok nodes of that type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from karpy.apis import labels as wk
from karpy.apis.model import validation_problems
from karpy.cloudprovider.errors import CloudProviderError
from karpy.cloudprovider.kwok._wellknown import (
    LABEL_INSTANCE_CPU,
    LABEL_INSTANCE_FAMILY,
    LABEL_INSTANCE_MEMORY,
    LABEL_INSTANCE_SIZE,
    LABEL_RESERVATION_ID,
)
from karpy.scheduling import InstanceType, Offering, Overhead, Requirement, Requirements
from karpy.scheduling import resources as res
from karpy.scheduling.devices import DeviceError, ResourceSliceTemplate, slice_from_dict

ZONES = ("test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d")
CAPACITY_TYPES = (wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)
SIZES = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256)
FAMILIES = {"c": 2, "m": 4, "r": 8}  # family -> GiB of memory per vCPU
ARCHITECTURES = ("amd64", "arm64")
OPERATING_SYSTEMS = ("linux", "windows")
SPOT_DISCOUNT = 0.7
EPHEMERAL_STORAGE = "20Gi"


class CatalogueError(CloudProviderError):
    """The catalogue file cannot be read or does not describe valid instance types."""


class RequirementSpec(BaseModel):
    """One node-selector requirement, as in a Kubernetes manifest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    operator: str
    values: tuple[str, ...] = ()


class OfferingSpec(BaseModel):
    """One offering: where (zone, capacity type) and at what price per hour."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    price: float = Field(alias="Price", ge=0)
    available: bool = Field(default=True, alias="Available")
    requirements: tuple[RequirementSpec, ...] = Field(alias="Requirements")
    reservation_capacity: int = Field(default=0, alias="ReservationCapacity", ge=0)

    def _single(self, key: str) -> str:
        for req in self.requirements:
            if req.key == key:
                if req.operator != "In" or len(req.values) != 1:
                    raise ValueError(f"offering requirement {key} must be In with one value")
                return req.values[0]
        raise ValueError(f"offering has no {key} requirement")

    @property
    def zone(self) -> str:
        """The offering's zone (``topology.kubernetes.io/zone``)."""
        return self._single(wk.LABEL_ZONE)

    @property
    def capacity_type(self) -> str:
        """The offering's capacity type (``karpenter.sh/capacity-type``)."""
        return self._single(wk.LABEL_CAPACITY_TYPE)

    @property
    def reservation_id(self) -> str:
        """The reservation of a ``reserved`` offering; empty for the others."""
        if self.capacity_type != wk.CAPACITY_TYPE_RESERVED:
            return ""
        return self._single(LABEL_RESERVATION_ID)

    @field_validator("requirements")
    @classmethod
    def _zone_and_capacity_type(
        cls, reqs: tuple[RequirementSpec, ...]
    ) -> tuple[RequirementSpec, ...]:
        for key in (wk.LABEL_ZONE, wk.LABEL_CAPACITY_TYPE):
            found = [r for r in reqs if r.key == key]
            if len(found) != 1 or found[0].operator != "In" or len(found[0].values) != 1:
                raise ValueError(f"needs exactly one requirement {key} In [one value]")
        reserved = any(
            r.key == wk.LABEL_CAPACITY_TYPE and r.values == (wk.CAPACITY_TYPE_RESERVED,)
            for r in reqs
        )
        ids = [r for r in reqs if r.key == LABEL_RESERVATION_ID]
        if reserved and (len(ids) != 1 or ids[0].operator != "In" or len(ids[0].values) != 1):
            raise ValueError(
                f"a reserved offering needs exactly one requirement {LABEL_RESERVATION_ID} "
                "In [its reservation ID]"
            )
        if ids and not reserved:
            raise ValueError(
                f"{LABEL_RESERVATION_ID} is only for offerings with "
                f"{wk.LABEL_CAPACITY_TYPE} In [{wk.CAPACITY_TYPE_RESERVED}]"
            )
        return reqs


class InstanceTypeSpec(BaseModel):
    """One catalogue entry, in Karpenter kwok's JSON shape."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(min_length=1)
    architecture: str
    operating_systems: tuple[str, ...] = Field(alias="operatingSystems", min_length=1)
    resources: dict[str, str]
    offerings: tuple[OfferingSpec, ...] = Field(min_length=1)
    resource_slices: tuple[dict[str, Any], ...] = Field(default=(), alias="resourceSlices")

    @field_validator("resources", mode="before")
    @classmethod
    def _quantities_as_strings(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: str(v) for k, v in value.items()}
        return value

    @field_validator("resources")
    @classmethod
    def _cpu_and_memory(cls, value: dict[str, str]) -> dict[str, str]:
        for key in ("cpu", "memory"):
            if key not in value:
                raise ValueError(f"resources needs {key}")
        return value


def price_from_resources(cpu: int, memory_gib: int) -> float:
    """The on-demand $/h of a generated type: 0.025 per vCPU plus 0.001 per GB."""
    return 0.025 * cpu + 0.001 * memory_gib * 2**30 / 1e9


def instance_type_name(family: str, cpu: int, arch: str, os: str) -> str:
    """``c-4x-amd64-linux``: family, vCPU count, architecture, OS."""
    return f"{family}-{cpu}x-{arch}-{os}"


def generate_catalogue(
    *,
    zones: Sequence[str] = ZONES,
    sizes: Sequence[int] = SIZES,
    architectures: Sequence[str] = ARCHITECTURES,
    operating_systems: Sequence[str] = OPERATING_SYSTEMS,
) -> list[InstanceTypeSpec]:
    """Generate the synthetic catalogue (144 types x 8 offerings by default)."""
    specs: list[InstanceTypeSpec] = []
    for cpu in sizes:
        for family, gib_per_cpu in FAMILIES.items():
            for os in operating_systems:
                for arch in architectures:
                    memory = cpu * gib_per_cpu
                    on_demand = price_from_resources(cpu, memory)
                    offerings = [
                        OfferingSpec(
                            price=on_demand * SPOT_DISCOUNT if ct == "spot" else on_demand,
                            available=True,
                            requirements=(
                                RequirementSpec(
                                    key=wk.LABEL_CAPACITY_TYPE, operator="In", values=(ct,)
                                ),
                                RequirementSpec(
                                    key=wk.LABEL_ZONE, operator="In", values=(zone,)
                                ),
                            ),
                        )
                        for zone in zones
                        for ct in CAPACITY_TYPES
                    ]
                    specs.append(
                        InstanceTypeSpec(
                            name=instance_type_name(family, cpu, arch, os),
                            architecture=arch,
                            operating_systems=(os,),
                            resources={
                                "cpu": str(cpu),
                                "memory": f"{memory}Gi",
                                "pods": str(min(cpu * 16, 1024)),
                                "ephemeral-storage": EPHEMERAL_STORAGE,
                            },
                            offerings=tuple(offerings),
                        )
                    )
    return specs


def load_catalogue(path: str | Path) -> list[InstanceTypeSpec]:
    """Read a catalogue in Karpenter kwok's JSON format; raise CatalogueError naming the
    file and the bad entry if it is unreadable or invalid."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CatalogueError(f"cannot read instance-type catalogue {path}: {exc}") from exc
    if not isinstance(raw, list):
        raise CatalogueError(f"instance-type catalogue {path} must be a JSON list")
    specs: list[InstanceTypeSpec] = []
    for i, entry in enumerate(raw):
        try:
            specs.append(InstanceTypeSpec.model_validate(entry))
        except ValidationError as exc:
            label = entry.get("name", f"#{i}") if isinstance(entry, dict) else f"#{i}"
            problems = "; ".join(validation_problems(exc))
            raise CatalogueError(
                f"instance-type catalogue {path}: entry {label}: {problems}"
            ) from exc
    names = [s.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise CatalogueError(
            f"instance-type catalogue {path}: duplicate names {', '.join(duplicates)}"
        )
    return specs


def dump_catalogue(specs: Sequence[InstanceTypeSpec]) -> str:
    """Write ``specs`` as JSON in the format :func:`load_catalogue` reads."""
    entries = [s.model_dump(by_alias=True, mode="json") for s in specs]
    for entry in entries:
        if not entry.get("resourceSlices"):
            entry.pop("resourceSlices", None)  # a karpy field: absent unless used
        for offering in entry["offerings"]:
            # only reserved offerings carry it, as in Karpenter kwok's files
            if not offering.get("ReservationCapacity"):
                offering.pop("ReservationCapacity", None)
    return json.dumps(
        entries, indent=2
    )


KUBE_RESERVED = {"cpu": "100m", "memory": "10Mi"}
"""The overhead of every kwok instance type (Karpenter kwok's kube-reserved)."""
DEFAULT_PODS = "110"


def _family(name: str) -> str:
    head = re.split(r"[.-]", name, maxsplit=1)
    return head[0] if len(head) == 2 else name[:1]


def to_instance_type(spec: InstanceTypeSpec) -> InstanceType:
    """The InstanceType a catalogue entry describes, with Karpenter kwok's labels
    (``karpenter.kwok.sh/instance-{family,size,cpu,memory}``) and overhead."""
    capacity = res.parse_resource_list({"pods": DEFAULT_PODS, **spec.resources})
    cpu = spec.resources["cpu"]
    offerings = [
        Offering(
            zone=o.zone,
            capacity_type=o.capacity_type,
            price=o.price,
            available=o.available,
            reservation_id=o.reservation_id,
            reservation_capacity=o.reservation_capacity,
            requirements=Requirements(
                Requirement.new(r.key, r.operator, r.values)
                for r in o.requirements
                if r.key not in (wk.LABEL_ZONE, wk.LABEL_CAPACITY_TYPE)
            ),
        )
        for o in spec.offerings
    ]
    return replace(InstanceType.build(
        spec.name,
        capacity=capacity,
        offerings=offerings,
        overhead=Overhead(kube_reserved=res.parse_resource_list(KUBE_RESERVED)),
        architecture=spec.architecture,
        operating_systems=spec.operating_systems,
        requirements=[
            Requirement.new(LABEL_INSTANCE_FAMILY, "In", (_family(spec.name),)),
            Requirement.new(LABEL_INSTANCE_SIZE, "In", (cpu,)),
            Requirement.new(LABEL_INSTANCE_CPU, "In", (cpu,)),
            Requirement.new(
                LABEL_INSTANCE_MEMORY,
                "In",
                (res.format_quantity(res.MEMORY, capacity[res.MEMORY]),),
            ),
            # A type sold in no reservation defines the well-known reservation label as
            # absent, so a NodeClaim pinned to a reservation never matches it; a type
            # with reserved offerings leaves it to those offerings' requirements.
            *(
                ()
                if any(o.reservation_id for o in offerings)
                else (Requirement.new(LABEL_RESERVATION_ID, "DoesNotExist", ()),)
            ),
        ],
    ), resource_slice_templates=slice_templates(spec))


def slice_templates(spec: InstanceTypeSpec) -> tuple[ResourceSliceTemplate, ...]:
    """The entry's ``resourceSlices`` as slice templates (see the module docstring)."""
    out = []
    for i, slice_spec in enumerate(spec.resource_slices):
        pool = (slice_spec.get("pool") or {}).get("name") or spec.name
        try:
            out.append(slice_from_dict({
                "metadata": {"name": f"{spec.name} resourceSlices[{i}]"},
                "spec": {**slice_spec, "pool": {"name": pool}},
            }))
        except DeviceError as exc:
            raise CatalogueError(f"instance type {spec.name}: {exc}") from exc
    return tuple(out)


def to_instance_types(specs: Sequence[InstanceTypeSpec]) -> list[InstanceType]:
    """:func:`to_instance_type` of every entry."""
    return [to_instance_type(spec) for spec in specs]
