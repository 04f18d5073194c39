"""The lifecycle's hooks into NodeRegistrationHealthy: a NodeClaim that registers makes
its NodePool's condition True; NodeClaims deleted for not launching make it False."""

from __future__ import annotations

from typing import Any

import pytest
from nodeclaim_factories import node_manifest, nodeclaim_manifest

from karpy.controllers.nodeclaim import LifecycleController
from karpy.controllers.nodeclaim.lifecycle.launch import LaunchError
from karpy.runtime import Request
from karpy.runtime.kinds import NODE
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.kinds import NODE_CLAIM, NODE_POOL


def owned(name: str) -> dict[str, Any]:
    claim = nodeclaim_manifest(name)
    claim["metadata"]["ownerReferences"] = [{"apiVersion": "karpenter.sh/v1",
                                             "kind": "NodePool", "name": "default",
                                             "uid": "pool-uid"}]
    return claim


def healthy(kube: FakeClient) -> str | None:
    conds = (kube.peek(NODE_POOL, "default").get("status") or {}).get("conditions") or ()
    return next((c["status"] for c in conds if c["type"] == "NodeRegistrationHealthy"), None)


async def test_a_registered_nodeclaim_makes_its_nodepool_healthy(
    kube: FakeClient, lifecycle: LifecycleController
) -> None:
    kube.add(NODE_POOL, {"metadata": {"name": "default", "uid": "pool-uid", "generation": 1},
                         "spec": {"template": {"spec": {"requirements": []}}}})
    await kube.create(NODE_CLAIM, owned("default-a"))
    await lifecycle.reconcile(Request("", "default-a"))
    pid = str(kube.peek(NODE_CLAIM, "default-a")["status"]["providerID"])
    await kube.create(NODE, node_manifest("node-1", pid, ready=False))
    await lifecycle.reconcile(Request("", "default-a"))
    assert healthy(kube) == "True"


async def test_nodeclaims_that_never_launch_make_it_unhealthy(
    kube: FakeClient, lifecycle: LifecycleController, provider: Any, clock: FakeClock
) -> None:
    kube.add(NODE_POOL, {"metadata": {"name": "default", "uid": "pool-uid", "generation": 1},
                         "spec": {"template": {"spec": {"requirements": []}}}})
    for name in ("default-a", "default-b"):
        provider.next_create_error = RuntimeError("the cloud said no")
        await kube.create(NODE_CLAIM, owned(name))
        with pytest.raises(LaunchError):  # retried with backoff by the controller
            await lifecycle.reconcile(Request("", name))
    await clock.step(3600)
    for name in ("default-a", "default-b"):
        provider.next_create_error = RuntimeError("the cloud said no")
        await lifecycle.reconcile(Request("", name))  # launch timeout: deleted
    assert healthy(kube) == "False"
    conds = kube.peek(NODE_POOL, "default")["status"]["conditions"]
    [cond] = [c for c in conds if c["type"] == "NodeRegistrationHealthy"]
    assert (cond["reason"], cond["message"]) == ("LaunchFailed", "the cloud said no")
