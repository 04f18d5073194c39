"""End to end: node repair under Karpenter v1.15.0's default (repair as a disruption
method; ``LEGACY_NODE_REPAIR`` false) against the local cluster (issue 37 acceptance).

A node whose Ready condition goes False past the kwok provider's toleration (15 s here)
is replaced first: a replacement NodeClaim exists and is initialized while the
unhealthy one still stands; only then is the unhealthy NodeClaim deleted, with its
termination deadline stamped by kwok's policy drain bound (0: at once), and the pod runs
on the replacement. v1.14's behaviour (``LEGACY_NODE_REPAIR=true``) is
test_node_repair_e2e.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from harness import karpy_operator
from kube import (
    clean_up,
    connect,
    deployment,
    eventually,
    moved_pods,
    nodepool,
    pool_objects,
    ready_node_class,
    running_pods,
)
from test_node_repair_e2e import (
    NODE_CLASS,
    PROVIDER,
    SELECT,
    TOLERATION,
    make_not_ready,
    nodeclaim_of,
)

from karpy.controllers.settings import FeatureGates, Settings
from karpy.runtime import kinds, parse_time
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SETTINGS = Settings(batch_idle_duration=0.5, batch_max_duration=3.0, eviction_retry=1.0,
                    disruption_poll_period=2.0,
                    feature_gates=FeatureGates(node_repair=True))  # fmt: skip
STAMP = "karpenter.sh/nodeclaim-termination-timestamp"


def _initialized(claim: dict[str, Any]) -> bool:
    return any(c.get("type") == "Initialized" and c.get("status") == "True"
               for c in (claim.get("status") or {}).get("conditions") or ())  # fmt: skip


async def test_an_unhealthy_node_is_replaced_first_and_drained_within_its_bound(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    pool, app = "rp-first", "rp-first-web"
    async with connect(cluster) as client, karpy_operator(
            cluster, settings=SETTINGS, provider_settings=PROVIDER) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, nodepool(pool, node_class=NODE_CLASS,
                                                labels={SELECT: pool}))
        try:
            await client.create(kinds.DEPLOYMENT, deployment(
                app, node_selector={SELECT: pool}, replicas=1, cpu="500m"), namespace=namespace)
            [pod] = await eventually(lambda: running_pods(client, namespace, app, 1),
                                     timeout=60, what="the pod Running")
            sick = pod["spec"]["nodeName"]
            claim = await eventually(lambda: nodeclaim_of(client, pool, sick), timeout=30,
                                     what="the node's NodeClaim")
            claim_name = claim["metadata"]["name"]
            ill_since = await make_not_ready(client, sick)
            seen: dict[str, Any] = {}

            async def replaced_first() -> bool | None:
                claims = await pool_objects(client, NODE_CLAIM, [pool])
                old = next((c for c in claims if c["metadata"]["name"] == claim_name), None)
                others = [c for c in claims if c["metadata"]["name"] != claim_name]
                if old is None or old["metadata"].get("deletionTimestamp"):
                    # deleted: a replacement must have been initialized before
                    assert seen.get("ready_replacement_while_old_stood"), (
                        "the unhealthy NodeClaim was deleted before a replacement was ready")
                    if old is not None:
                        seen["stamp"] = (old["metadata"].get("annotations") or {}).get(STAMP)
                    return True
                if any(_initialized(c) for c in others):
                    seen["ready_replacement_while_old_stood"] = True
                return None

            await eventually(replaced_first, timeout=TOLERATION + 60,
                             what=f"a replacement first, then {claim_name} deleted")
            repaired_at = datetime.now(UTC)
            assert (repaired_at - ill_since).total_seconds() >= TOLERATION - 1
            lines = [r for r in op.messages("selected repair policy")
                     if r.get("Node", {}).get("name") == sick]
            assert lines, "no 'selected repair policy' log line"
            assert (lines[0]["condition"], lines[0]["action"]) == ("Ready", "ReplaceNode")
            assert lines[0]["termination-grace-period"] == "0s"
            if seen.get("stamp"):  # kwok's drain bound 0: the deadline is deletion time
                stamp = parse_time(seen["stamp"])
                assert stamp is not None and stamp <= repaired_at

            await eventually(lambda: moved_pods(client, namespace, app, sick), timeout=60,
                             what="the pod Running on the replacement")
        finally:
            forced = await clean_up(client, namespace, app, [pool], timeout=120)
        assert forced == [], f"termination left these behind: {forced}"
