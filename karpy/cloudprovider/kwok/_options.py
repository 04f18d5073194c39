"""Options of the kwok provider, including the faults tests inject.

From the operator they arrive as string settings (``ProviderContext.settings``):

====================== ================================================================
``instanceTypesFile``  a catalogue in Karpenter kwok's JSON format (default: generated)
``launchDelay``        how long ``create`` takes, like a cloud API call ("2s")
``registrationDelay``  how long after ``create`` the Node appears ("30s")
``insufficientCapacity`` offerings that fail with insufficient capacity, comma-separated
                       ``type/zone/capacity-type`` patterns where ``*`` matches anything
                       (``*/test-zone-a/spot``)
``unregisteredLaunches`` how many of the next launches never get a Node, so their
                       NodeClaims never register
``registrationTaints`` taints the "kubelet" adds to every Node at registration that the
                       NodeClaim does not declare, comma-separated ``key=value:Effect``
                       or ``key:Effect`` (a kubelet's ``--register-with-taints``)
``repairToleration``   how long a node may be Ready=False/Unknown before node repair
                       replaces it (default 10m, Karpenter kwok's; tests shorten it)
``createErrorRate``    the share (0-1) of ``create`` calls that fail before launching:
                       half as a 5xx-like CreateError, half as a dropped connection
``createSlowRate``     the share of ``create`` calls that launch, then take
                       ``createSlowDuration`` (default 30s) to answer
``deleteErrorRate``    the share of ``delete`` calls that fail transiently
``getNotFoundRate``    the share of ``get`` calls that answer a stale "not found" for an
                       instance that exists
``faultSeed``          seed of the random draws above (default: unseeded)
``volumeAttachmentLimits`` how many volumes of a CSI driver every instance type attaches,
                       comma-separated ``driver=count`` (``ebs.csi.aws.com=16``), as a
                       cloud provider's ``InstanceType.volume_attachment_limits``
                       (default: none, unbounded)
====================== ================================================================

The rates are the cloud's behaviour, not state: a restarted karpy reads them again from
its settings. Every injected fault is logged ("kwok: injected fault", field ``fault``) so
a test can count them across processes.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from karpy.apis.duration import parse_duration
from karpy.cloudprovider._types import OfferingKey
from karpy.scheduling.taints import NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, NodeTaint

SETTINGS = (
    "instanceTypesFile",
    "launchDelay",
    "registrationDelay",
    "insufficientCapacity",
    "unregisteredLaunches",
    "registrationTaints",
    "repairToleration",
    "createErrorRate",
    "createSlowRate",
    "createSlowDuration",
    "deleteErrorRate",
    "getNotFoundRate",
    "faultSeed",
    "volumeAttachmentLimits",
)

#: The rate-driven faults by name, as logged in the ``fault`` field.
FAULT_CREATE_ERROR = "create-error"
FAULT_CREATE_SLOW = "create-slow"
FAULT_DELETE_ERROR = "delete-error"
FAULT_GET_NOT_FOUND = "get-not-found"


class KwokSettingsError(ValueError):
    """A kwok provider setting is unknown or malformed; the message names it."""


@dataclass(frozen=True, slots=True)
class OfferingPattern:
    """Matches offerings by instance type, zone and capacity type; ``*`` matches any."""

    instance_type: str = "*"
    zone: str = "*"
    capacity_type: str = "*"

    @classmethod
    def parse(cls, text: str) -> OfferingPattern:
        """Parse ``type/zone/capacity-type`` (``*`` allowed in each part)."""
        parts = text.strip().split("/")
        if len(parts) != 3 or not all(parts):
            raise KwokSettingsError(
                f"insufficientCapacity: {text!r} is not type/zone/capacity-type "
                "(use * for any, e.g. */test-zone-a/spot)"
            )
        return cls(*parts)

    def matches(self, key: OfferingKey) -> bool:
        """True if ``key`` is one of the offerings this pattern names."""
        return all(
            want in ("*", got)
            for want, got in (
                (self.instance_type, key.instance_type),
                (self.zone, key.zone),
                (self.capacity_type, key.capacity_type),
            )
        )

    def __str__(self) -> str:
        return f"{self.instance_type}/{self.zone}/{self.capacity_type}"


@dataclass
class KwokFaults:
    """Faults the provider injects; tests change them while the provider runs.

    ``insufficient_capacity``: launches on a matching offering fail as a real cloud's
    would; the provider raises InsufficientCapacityError naming the offerings, when no
    other compatible offering is left. ``unregistered_launches``: the next N launches
    succeed but no Node ever appears (the instance is listed, so garbage collection and
    the registration timeout are what remove it). ``rates``: the share of calls each
    rate-driven fault (``FAULT_*``) hits, drawn from ``rng``.
    """

    insufficient_capacity: set[OfferingPattern] = field(default_factory=set)
    unregistered_launches: int = 0
    rates: dict[str, float] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.Random)

    def roll(self, fault: str) -> bool:
        """Draw whether this call gets ``fault`` (one of the ``FAULT_*`` names)."""
        rate = self.rates.get(fault, 0.0)
        return rate > 0 and self.rng.random() < rate

    def refuses(self, key: OfferingKey) -> bool:
        """True if a launch on ``key`` is to fail with insufficient capacity."""
        return any(p.matches(key) for p in self.insufficient_capacity)

    def take_unregistered(self) -> bool:
        """Consume one unregistered launch, if any are left."""
        if self.unregistered_launches > 0:
            self.unregistered_launches -= 1
            return True
        return False


@dataclass(frozen=True, kw_only=True)
class KwokOptions:
    """How the kwok provider behaves. All defaults give a fast, fault-free provider."""

    instance_types_file: Path | None = None
    launch_delay: timedelta = timedelta(0)
    registration_delay: timedelta = timedelta(0)
    insufficient_capacity: frozenset[OfferingPattern] = frozenset()
    unregistered_launches: int = 0
    registration_taints: tuple[NodeTaint, ...] = ()
    """Added to every Node beyond what its NodeClaim declares (``registrationTaints``)."""
    repair_toleration: timedelta = timedelta(minutes=10)
    """How long a NotReady node is tolerated before node repair replaces it."""
    fault_rates: Mapping[str, float] = field(default_factory=dict)
    create_slow_duration: timedelta = timedelta(seconds=30)
    fault_seed: int | None = None
    volume_attachment_limits: Mapping[str, int] = field(default_factory=dict)
    """Volumes per CSI driver every instance type attaches (``volumeAttachmentLimits``)."""

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> KwokOptions:
        """Build options from the operator's string settings (keys in this module's doc).

        Raises KwokSettingsError for an unknown key or a malformed value.
        """
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise KwokSettingsError(
                f"unknown kwok provider setting(s) {', '.join(unknown)}; "
                f"known: {', '.join(SETTINGS)}"
            )
        path = settings.get("instanceTypesFile")
        return cls(
            instance_types_file=Path(path) if path else None,
            launch_delay=_duration(settings, "launchDelay"),
            registration_delay=_duration(settings, "registrationDelay"),
            insufficient_capacity=frozenset(
                _patterns(settings.get("insufficientCapacity", "").split(","))
            ),
            unregistered_launches=_count(settings, "unregisteredLaunches"),
            registration_taints=_taints(settings, "registrationTaints"),
            repair_toleration=_duration(settings, "repairToleration") or timedelta(minutes=10),
            fault_rates={
                fault: rate
                for fault, key in _RATE_SETTINGS.items()
                if (rate := _rate(settings, key)) > 0
            },
            create_slow_duration=_duration(settings, "createSlowDuration")
            if settings.get("createSlowDuration")
            else timedelta(seconds=30),
            fault_seed=_count(settings, "faultSeed") if settings.get("faultSeed") else None,
            volume_attachment_limits=_volume_limits(settings, "volumeAttachmentLimits"),
        )


_RATE_SETTINGS = {
    FAULT_CREATE_ERROR: "createErrorRate",
    FAULT_CREATE_SLOW: "createSlowRate",
    FAULT_DELETE_ERROR: "deleteErrorRate",
    FAULT_GET_NOT_FOUND: "getNotFoundRate",
}


def _rate(settings: Mapping[str, str], key: str) -> float:
    text = settings.get(key)
    if not text:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise KwokSettingsError(f"{key}: {text!r} is not a share between 0 and 1 (e.g. 0.2)")
    return value


def _duration(settings: Mapping[str, str], key: str) -> timedelta:
    text = settings.get(key)
    if not text:
        return timedelta(0)
    try:
        value = parse_duration(text)
    except ValueError as exc:
        raise KwokSettingsError(f"{key}: {exc}") from exc
    if value < timedelta(0):
        raise KwokSettingsError(f"{key}: {text!r} is negative")
    return value


def _count(settings: Mapping[str, str], key: str) -> int:
    text = settings.get(key, "0") or "0"
    if not text.isdigit():
        raise KwokSettingsError(f"{key}: {text!r} is not a non-negative integer")
    return int(text)


_EFFECTS = (NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE)


def _taints(settings: Mapping[str, str], key: str) -> tuple[NodeTaint, ...]:
    taints = []
    for item in settings.get(key, "").split(","):
        if not item.strip():
            continue
        head, _, effect = item.strip().rpartition(":")
        name, _, value = head.partition("=")
        if not name or effect not in _EFFECTS:
            raise KwokSettingsError(
                f"{key}: {item.strip()!r} is not key=value:Effect or key:Effect with Effect "
                f"one of {', '.join(_EFFECTS)}"
            )
        taints.append(NodeTaint(key=name, value=value, effect=effect))
    return tuple(taints)


def _volume_limits(settings: Mapping[str, str], key: str) -> dict[str, int]:
    limits = {}
    for item in settings.get(key, "").split(","):
        if not item.strip():
            continue
        driver, _, count = item.strip().partition("=")
        if not driver or not count.isdigit():
            raise KwokSettingsError(
                f"{key}: {item.strip()!r} is not driver=count (e.g. ebs.csi.aws.com=16)")
        limits[driver] = int(count)
    return limits


def _patterns(items: Iterable[str]) -> list[OfferingPattern]:
    return [OfferingPattern.parse(item) for item in items if item.strip()]
