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

import asyncio
import contextlib
from collections.abc import Mapping
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

from karpy.apis.labels import LABEL_NODEPOOL
from karpy.controllers.settings import FeatureGates, Settings
from karpy.runtime import kinds, parse_time
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SETTINGS = Settings(batch_idle_duration=0.5, batch_max_duration=3.0, eviction_retry=1.0,
                    disruption_poll_period=2.0,
                    feature_gates=FeatureGates(node_repair=True))  # fmt: skip
STAMP = "karpenter.sh/nodeclaim-termination-timestamp"


def _initialized(claim: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Initialized" and c.get("status") == "True"
               for c in (claim.get("status") or {}).get("conditions") or ())  # fmt: skip


async def _record(client: Any, pool: str, old: str, since: str,
                  changes: list[tuple[str, str, str]]) -> None:
    """Append to ``changes``, in the API server's order, each replacement NodeClaim of
    ``pool`` becoming initialized, ``("ready", name, "")``, and ``old`` being marked for
    deletion or deleted, ``("deleting", old, its termination-timestamp annotation)``."""
    async with contextlib.aclosing(client.watch(
            NODE_CLAIM, label_selector={LABEL_NODEPOOL: pool}, resource_version=since,
            inactivity_timeout=None)) as events:
        async for event in events:
            if event.type == "BOOKMARK":
                continue
            name = event.object["metadata"]["name"]
            if name == old:
                meta = event.object["metadata"]
                if event.type == "DELETED" or meta.get("deletionTimestamp"):
                    stamp = (meta.get("annotations") or {}).get(STAMP, "")
                    changes.append(("deleting", name, stamp))
            elif event.type != "DELETED" and _initialized(event.object):
                changes.append(("ready", name, ""))


async def _where(client: Any, namespace: str, app: str) -> str:
    """The app's pods and the cluster's nodes, as a failure message tells them."""
    pods = await client.list(kinds.POD, namespace=namespace, label_selector={"app": app})
    nodes = await client.list(kinds.NODE)
    return "pods: {}; nodes: {}".format(
        [(p["metadata"]["name"], p["spec"].get("nodeName"), (p.get("status") or {}).get("phase"),
          p["metadata"].get("deletionTimestamp")) for p in pods],
        [(n["metadata"]["name"], [t.get("key") for t in (n.get("spec") or {}).get("taints") or ()])
         for n in nodes])


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
            # The order is read from a watch of the pool's NodeClaims, which sees every
            # change in the order the API server made them: polling could fall between the
            # replacement's initialization and the old NodeClaim's deletion (kwok's drain
            # bound is 0) and not tell a right order from a wrong one.
            start = await client.list_page(NODE_CLAIM, label_selector={LABEL_NODEPOOL: pool})
            changes: list[tuple[str, str, str]] = []
            watcher = asyncio.create_task(_record(client, pool, claim_name,
                                                  start.resource_version, changes))
            try:
                ill_since = await make_not_ready(client, sick)

                async def old_deleting() -> bool:
                    if watcher.done():
                        watcher.result()  # raises what ended the watch
                    return any(what == "deleting" for what, _, _ in changes)

                await eventually(old_deleting, timeout=TOLERATION + 60,
                                 what=f"{claim_name} to be deleted after a replacement")
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            order = [what for what, _, _ in changes]
            assert "ready" in order and order.index("ready") < order.index("deleting"), (
                f"the unhealthy NodeClaim was deleted before a replacement was ready: {changes}")
            stamp_text = changes[order.index("deleting")][2]
            repaired_at = datetime.now(UTC)
            assert (repaired_at - ill_since).total_seconds() >= TOLERATION - 1
            lines = [r for r in op.messages("selected repair policy")
                     if r.get("Node", {}).get("name") == sick]
            assert lines, "no 'selected repair policy' log line"
            assert (lines[0]["condition"], lines[0]["action"]) == ("Ready", "ReplaceNode")
            assert lines[0]["termination-grace-period"] == "0s"
            # kwok's drain bound 0: the deadline stamped at deletion is the deletion time
            stamp = parse_time(stamp_text)
            assert stamp is not None, f"{claim_name} was deleted without {STAMP}"
            assert stamp <= repaired_at

            try:
                await eventually(lambda: moved_pods(client, namespace, app, sick),
                                 timeout=60, what="the pod Running on the replacement")
            except AssertionError as timed_out:
                raise AssertionError(f"{timed_out}; {await _where(client, namespace, app)}"
                                     ) from None
        finally:
            forced = await clean_up(client, namespace, app, [pool], timeout=120)
        assert forced == [], f"termination left these behind: {forced}"
