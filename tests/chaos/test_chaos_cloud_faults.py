"""Chaos scenario 4: the cloud misbehaves at set rates while karpy (two replicas) scales
a workload up, then everything is deleted.

The kwok provider injects, per call: create failing before it launches (a 5xx-like
CreateError or a dropped connection), create launching but answering only after 30 s,
delete failing transiently, get answering a stale "not found". Pods must still all run,
and once everything is deleted the cloud must be empty: nothing leaked, nothing
doubled, nothing stuck. Faults are counted from the replicas' "kwok: injected fault"
log lines.

Short: 45 pods. KARPY_CHAOS=full: 300 pods.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from audit import settled
from fleet import Fleet
from kube import connect
from workload import Workload

from karpy.cloudprovider.kwok import (
    FAULT_CREATE_ERROR,
    FAULT_CREATE_SLOW,
    FAULT_DELETE_ERROR,
    FAULT_GET_NOT_FOUND,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

RATES = {
    "createErrorRate": "0.3",
    "createSlowRate": "0.1",
    "createSlowDuration": "30s",
    "deleteErrorRate": "0.3",
    "getNotFoundRate": "0.3",
    # The leader's first draw (its first create) is a failure under this seed, so the
    # short run always injects a create error; the rest follows the rates.
    "faultSeed": "1",
}


async def test_pods_run_and_nothing_leaks_while_the_cloud_fails(
    cluster: Any, namespace: str, kwok_crd: None, scale: Any
) -> None:
    pods = scale.pick(45, 300)
    started = time.monotonic()
    async with connect(cluster) as client, \
            Fleet(cluster, lease_namespace=namespace, provider_settings=RATES) as fleet:
        async with Workload(client, namespace, "chaos-cloud") as work:
            await fleet.start()
            await fleet.start()
            await fleet.leader(timeout=60)
            await work.scale(pods)
            found = await settled(client, pools=[work.pool], namespace=namespace,
                                  app=work.name, pods=pods, timeout=300)
            up_faults = _faults(fleet)
            print(f"\nscenario 4 up: {found.line(sum(up_faults.values()), 'cloud faults')}: "
                  f"{dict(up_faults)}")
            assert found.pods == pods
            assert found.clean, found.details()
            assert up_faults[FAULT_CREATE_ERROR] > 0
        faults = _faults(fleet)
        print(f"scenario 4 after deleting everything: {sum(faults.values())} cloud faults "
              f"injected in all {dict(faults)}; {len(work.left_in_cloud)} instances left, "
              f"{len(work.forced)} objects forced; {time.monotonic() - started:.0f}s")
        assert faults[FAULT_DELETE_ERROR] > 0
        assert work.forced == [], f"termination left these behind: {work.forced}"
        assert work.left_in_cloud == [], f"instances left in the cloud: {work.left_in_cloud}"


def _faults(fleet: Fleet) -> Counter[str]:
    counts: Counter[str] = Counter()
    for record in fleet.messages("kwok: injected fault"):
        counts[str(record.get("fault"))] += 1
    for name in (FAULT_CREATE_ERROR, FAULT_CREATE_SLOW, FAULT_DELETE_ERROR,
                 FAULT_GET_NOT_FOUND):
        counts.setdefault(name, 0)
    return counts
