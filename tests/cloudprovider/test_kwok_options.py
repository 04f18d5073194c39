"""The kwok provider's settings (as the operator passes them) parse into options, and a
typo or a malformed value fails naming the setting; the catalogue becomes instance
types carrying Karpenter kwok's labels and overhead."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from karpy.apis.labels import LABEL_ARCH, LABEL_INSTANCE_TYPE, LABEL_OS, LABEL_ZONE
from karpy.cloudprovider import OfferingKey, RepairPolicy
from karpy.cloudprovider.kwok import (
    FAULT_CREATE_ERROR,
    FAULT_CREATE_SLOW,
    FAULT_DELETE_ERROR,
    FAULT_GET_NOT_FOUND,
    KwokCloudProvider,
    KwokFaults,
    KwokOptions,
    KwokSettingsError,
    OfferingPattern,
    generate_catalogue,
    to_instance_types,
)


def test_settings_become_options() -> None:
    options = KwokOptions.from_settings(
        {
            "instanceTypesFile": "/etc/kwok/types.json",
            "launchDelay": "1500ms",
            "registrationDelay": "1m30s",
            "insufficientCapacity": "c-4x-amd64-linux/*/spot, */test-zone-b/*",
            "unregisteredLaunches": "2",
            "registrationTaints": "example.com/surprise=x:NoSchedule, example.com/gpu:NoExecute",
        }
    )
    assert options.instance_types_file == Path("/etc/kwok/types.json")
    assert options.launch_delay == timedelta(seconds=1.5)
    assert options.registration_delay == timedelta(seconds=90)
    assert options.insufficient_capacity == {
        OfferingPattern("c-4x-amd64-linux", "*", "spot"),
        OfferingPattern("*", "test-zone-b", "*"),
    }
    assert options.unregistered_launches == 2
    assert [str(t) for t in options.registration_taints] == [
        "example.com/surprise=x:NoSchedule", "example.com/gpu:NoExecute"
    ]


def test_fault_rates_become_options() -> None:
    options = KwokOptions.from_settings(
        {
            "createErrorRate": "0.2",
            "createSlowRate": "0.05",
            "createSlowDuration": "3s",
            "deleteErrorRate": "1",
            "getNotFoundRate": "0",
            "faultSeed": "7",
        }
    )
    assert options.fault_rates == {
        FAULT_CREATE_ERROR: 0.2, FAULT_CREATE_SLOW: 0.05, FAULT_DELETE_ERROR: 1.0,
    }
    assert options.create_slow_duration == timedelta(seconds=3)
    assert options.fault_seed == 7
    assert KwokOptions.from_settings({}).create_slow_duration == timedelta(seconds=30)


def test_faults_are_drawn_at_their_rate_and_seeded() -> None:
    import random

    def draws(seed: int) -> list[bool]:
        faults = KwokFaults(rates={FAULT_CREATE_ERROR: 0.25}, rng=random.Random(seed))
        return [faults.roll(FAULT_CREATE_ERROR) for _ in range(4000)]

    hits = sum(draws(1))
    assert 800 < hits < 1200  # 1,000 expected; far outside this is a broken draw
    assert draws(1) == draws(1)
    never = KwokFaults(rates={FAULT_CREATE_ERROR: 1.0})
    assert not any(never.roll(FAULT_GET_NOT_FOUND) for _ in range(100))
    assert all(never.roll(FAULT_CREATE_ERROR) for _ in range(100))


def test_no_settings_mean_a_fault_free_provider() -> None:
    assert KwokOptions.from_settings({}) == KwokOptions()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"launchdelay": "1s"}, "unknown kwok provider setting.*launchdelay.*launchDelay"),
        ({"launchDelay": "soon"}, "launchDelay: 'soon' is not a duration"),
        ({"registrationDelay": "-1s"}, "registrationDelay: '-1s' is negative"),
        ({"insufficientCapacity": "c-4x/spot"}, "is not type/zone/capacity-type"),
        ({"unregisteredLaunches": "many"}, "unregisteredLaunches: 'many'"),
        ({"createErrorRate": "1.5"}, "createErrorRate: '1.5' is not a share between 0 and 1"),
        ({"getNotFoundRate": "often"}, "getNotFoundRate: 'often' is not a share"),
        ({"faultSeed": "x"}, "faultSeed: 'x' is not a non-negative integer"),
        ({"registrationTaints": "example.com/surprise=x"}, "registrationTaints: "
         "'example.com/surprise=x' is not key=value:Effect"),
        ({"registrationTaints": "a=b:Sometimes"}, "Effect one of NoSchedule"),
    ],
)
def test_a_bad_setting_is_rejected_by_name(settings: dict[str, str], message: str) -> None:
    with pytest.raises(KwokSettingsError, match=message):
        KwokOptions.from_settings(settings)


def test_faults_match_offerings_and_count_unregistered_launches() -> None:
    faults = KwokFaults(
        insufficient_capacity={OfferingPattern("*", "test-zone-a", "spot")},
        unregistered_launches=1,
    )
    assert faults.refuses(OfferingKey("c-1x-amd64-linux", "test-zone-a", "spot"))
    assert not faults.refuses(OfferingKey("c-1x-amd64-linux", "test-zone-a", "on-demand"))
    assert not faults.refuses(OfferingKey("c-1x-amd64-linux", "test-zone-b", "spot"))
    assert [faults.take_unregistered() for _ in range(3)] == [True, False, False]


def test_catalogue_entries_become_instance_types_with_kwok_labels() -> None:
    types = {it.name: it for it in to_instance_types(generate_catalogue())}
    it = types["m-8x-arm64-linux"]
    assert it.requirements.labels() == {
        LABEL_INSTANCE_TYPE: "m-8x-arm64-linux",
        LABEL_ARCH: "arm64",
        LABEL_OS: "linux",
        "karpenter.kwok.sh/instance-family": "m",
        "karpenter.kwok.sh/instance-size": "8",
        "karpenter.kwok.sh/instance-cpu": "8",
        "karpenter.kwok.sh/instance-memory": "32Gi",
    }
    assert it.requirements[LABEL_ZONE].sorted_values() == [
        "test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"
    ]
    assert it.capacity["cpu"] == 8000
    assert it.capacity["pods"] == 128
    # Karpenter kwok's kube-reserved: 100m CPU and 10Mi memory
    assert it.allocatable["cpu"] == 7900
    assert it.capacity["memory"] - it.allocatable["memory"] == 10 * 2**20
    assert len(it.offerings) == 8


def test_repair_policies_are_karpenter_kwoks_with_a_settable_toleration() -> None:
    assert KwokOptions.from_settings({}).repair_toleration == timedelta(minutes=10)
    options = KwokOptions.from_settings({"repairToleration": "20s"})
    provider = KwokCloudProvider(None, options=options)  # type: ignore[arg-type]
    # Karpenter v1.15.0 kwok: Ready=False the one fallback, Ready=Unknown by ".*", both
    # drained forcefully (a termination grace period of 0)
    assert list(provider.repair_policies()) == [
        RepairPolicy("Ready", "False", timedelta(seconds=20),
                     termination_grace_period=timedelta(0)),
        RepairPolicy("Ready", "Unknown", timedelta(seconds=20), reason_regex=".*",
                     termination_grace_period=timedelta(0)),
    ]
    with pytest.raises(KwokSettingsError, match="repairToleration"):
        KwokOptions.from_settings({"repairToleration": "soon"})
