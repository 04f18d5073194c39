"""AKS's reservations: kube-reserved by memory brackets and CPU cores, the 750Mi eviction
threshold, memory minus the hypervisor's share, max pods by network plugin."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from karpy_azure._overhead import (
    aks_overhead,
    kube_reserved_cpu_millis,
    kube_reserved_memory_mib,
    max_pods,
    memory_capacity_bytes,
)

from karpy.scheduling import resources as res


def test_kube_reserved_follows_the_aks_brackets() -> None:
    # 25% of 4 GiB + 20% of the next 4 GiB = 1.8 GiB
    assert kube_reserved_memory_mib(8) == 1843
    # ... + 10% of 8 + 6% of 16 = 1.8 + 0.8 + 0.96 = 3.56 GiB
    assert kube_reserved_memory_mib(32) == 3645
    # 6% + 4% of the first two cores
    assert kube_reserved_cpu_millis(2) == 100
    # + 2% of cores 3-4 + 1% of 12 more
    assert kube_reserved_cpu_millis(16) == 260
    assert aks_overhead(2, 8).eviction_threshold == {res.MEMORY: 750 * 2**20}


def test_memory_capacity_drops_fractions_and_the_hypervisor_share() -> None:
    assert memory_capacity_bytes(8, 0.075) == 8 * 2**30 - int(8 * 2**30 * 0.075 + 1)
    assert memory_capacity_bytes(0.75, 0.075) == 0
    assert memory_capacity_bytes(7, 0) == 7 * 2**30


def test_max_pods_by_network_plugin() -> None:
    assert max_pods(None, "azure", "overlay") == 250
    assert max_pods(None, "azure", "") == 30
    assert max_pods(None, "none", "") == 250
    assert max_pods(None, "kubenet", "") == 110
    assert max_pods(42, "azure", "overlay") == 42


@given(st.floats(min_value=0, max_value=4096), st.floats(min_value=0, max_value=4096))
def test_more_memory_never_reserves_less_and_never_reserves_all(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert kube_reserved_memory_mib(lo) <= kube_reserved_memory_mib(hi)
    assert kube_reserved_memory_mib(hi) <= max(hi * 1024 * 0.25, 0) + 1


@given(st.integers(min_value=1, max_value=1024))
def test_cpu_reservation_is_monotone_and_small(vcpus: int) -> None:
    assert kube_reserved_cpu_millis(vcpus) <= kube_reserved_cpu_millis(vcpus + 1)
    assert kube_reserved_cpu_millis(vcpus) <= vcpus * 60
