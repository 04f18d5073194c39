"""Kubernetes' DRA CEL environment (karpy.scheduling.devicecel) on karpy.apis.cel:
the selectors a DeviceClass writes select the devices Kubernetes would."""

from __future__ import annotations

from fractions import Fraction

import pytest

from karpy.apis.cel import CelError, compile_expression
from karpy.scheduling.devicecel import DeviceSelector, Semver, device_variable

GPU = device_variable(
    "gpu.example.com",
    {"model": "A100", "index": 3, "driverVersion": Semver("1.2.3"),
     "other.example.com/numa": 1},
    {"memory": Fraction(80 * 2**30)},
)


@pytest.mark.parametrize(
    ("expression", "selected"),
    [
        ('device.driver == "gpu.example.com" && '
         'device.attributes["gpu.example.com"].model == "A100"', True),
        ('device.driver == "nic.example.com"', False),
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
        ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("100Gi"))', False),
        ('device.capacity["gpu.example.com"].memory == quantity("80Gi")', True),
        ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))',
         True),
        ('device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("1.2.3-rc1"))',
         False),
        ('device.attributes["other.example.com"].numa == 1', True),
        # A domain the device lacks is an empty map (Kubernetes' default), not an error.
        ('"model" in device.attributes["nic.example.com"]', False),
        ('!("model" in device.attributes["nic.example.com"])', True),
        # A missing attribute is an evaluation error: the device is not selected.
        ('device.attributes["gpu.example.com"].nokey == 1', False),
        ('!(device.attributes["gpu.example.com"].nokey == 1)', False),
        # A non-boolean answer selects nothing.
        ('device.attributes["gpu.example.com"].index', False),
    ],
)
def test_selector_matches_as_kubernetes(expression: str, selected: bool) -> None:
    assert DeviceSelector(expression).matches(GPU) is selected


def test_compile_error_names_the_expression() -> None:
    with pytest.raises(CelError, match=r"device.driver ==.*failed to compile"):
        compile_expression("device.driver ==")


def test_evaluation_error_names_the_expression() -> None:
    with pytest.raises(CelError, match="evaluation failed"):
        compile_expression("m.missing").evaluate({"m": {}})
