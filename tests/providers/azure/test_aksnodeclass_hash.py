"""karpy's AKSNodeClass hash is Karpenter Azure's, and the nodeclass.hash controller
re-stamps NodeClaims on a hash-version change as Karpenter Azure's does.

The golden values in data/aksnodeclass_hash_golden.json were printed by Karpenter Azure's
own ``AKSNodeClass.Hash()`` (scripts/aksnodeclass-hash, a Go program importing
github.com/Azure/karpenter-provider-azure v1.14.2 pkg/apis/v1beta1); refresh them as its
docs say.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from karpy_azure._hash import (
    NODECLASS_HASH_SPEC,
    NODECLASS_HASH_VERSION,
    hash_drifted,
    node_class_hash,
)
from karpy_azure._nodeclasses import AKS_NODE_CLASS
from karpy_azure.apis import AKSNodeClass

from karpy.apis import NodeClaim
from karpy.cloudprovider import NODE_CLAIM
from karpy.cloudprovider.nodeclass_hash import NodeClassHash
from karpy.runtime import Request
from karpy.runtime.testing import FakeClient

GOLDEN = json.loads(
    (Path(__file__).parent / "data" / "aksnodeclass_hash_golden.json").read_text()
)
BY_NAME = {c["name"]: c for c in GOLDEN["cases"]}
HASH = "karpenter.azure.com/aksnodeclass-hash"
VERSION = "karpenter.azure.com/aksnodeclass-hash-version"


def test_the_golden_file_is_karpenter_azure_v1_14_2s_hash_version() -> None:
    assert GOLDEN["hashVersion"] == NODECLASS_HASH_VERSION == "v3"
    assert "v1.14.2" in GOLDEN["generator"]


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: c["name"])
def test_the_hash_equals_karpenter_azure(case: dict[str, Any]) -> None:
    assert node_class_hash(AKSNodeClass.from_dict(case["aksnodeclass"])) == case["hash"]


def test_the_golden_cases_show_what_karpenter_azure_hashes() -> None:
    h = {name: c["hash"] for name, c in BY_NAME.items()}
    for same in ("tags", "tags-empty"):  # tags: hash:"ignore" (updated in place)
        assert h[same] == h["minimal"], same
    for pair in (("kubelet-sysctls", "kubelet-sysctls-reordered"),
                 ("local-dns-two", "local-dns-two-reordered"),
                 ("kubelet-cfs-period-200ms", "kubelet-cfs-period-0.2s"),
                 ("local-dns-cache-60m", "local-dns-cache-1h")):
        assert h[pair[0]] == h[pair[1]], pair
    for different in ("subnet", "os-disk-256", "image-azure-linux", "fips", "max-pods",
                      "kubelet-defaults", "security-empty", "security-encryption-false",
                      "gpu-driver", "artifact-streaming-empty", "linux-os-empty",
                      "local-dns-disabled"):
        assert h[different] != h["minimal"], different
    assert h["local-dns"] != h["local-dns-swapped"]
    assert h["kubelet-sysctls"] != h["kubelet-sysctls-empty"] != h["kubelet-defaults"]
    assert h["linux-os-sysctls-empty"] != h["linux-os-empty"]


def _node_class(annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    stored = json.loads(json.dumps(BY_NAME["minimal"]["aksnodeclass"]))
    stored["metadata"] = {"name": "default", "annotations": annotations}
    stored["spec"].update(spec)
    return stored


def _nodeclaim(name: str, annotations: dict[str, str], *, drifted: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if drifted:
        status["conditions"] = [{"type": "Drifted", "status": "True", "reason": "NodeClassDrift",
                                 "lastTransitionTime": "2026-01-01T00:00:00Z", "message": ""}]
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass",
                                      "name": "default"},
                     "requirements": []},
            "status": status}


def _annotations(client: FakeClient, kind: Any, name: str) -> dict[str, str]:
    stored = client.peek(kind, name)
    assert stored is not None
    return dict(stored["metadata"].get("annotations") or {})


async def test_a_version_change_restamps_nodeclaims_then_a_change_drifts_them() -> None:
    client = FakeClient()
    old = {HASH: "1111", VERSION: "v2"}  # an older Karpenter Azure's
    client.add(AKS_NODE_CLASS, _node_class(old))
    client.add(NODE_CLAIM, _nodeclaim("launched-by-karpenter", old))
    client.add(NODE_CLAIM, _nodeclaim("already-drifted", old, drifted=True))
    controller = NodeClassHash(NODECLASS_HASH_SPEC, client)  # type: ignore[arg-type]

    await controller.reconcile(Request(namespace=None, name="default"))

    want = BY_NAME["minimal"]["hash"]
    assert _annotations(client, AKS_NODE_CLASS, "default") == {HASH: want, VERSION: "v3"}
    assert _annotations(client, NODE_CLAIM, "launched-by-karpenter") == {HASH: want,
                                                                        VERSION: "v3"}
    assert _annotations(client, NODE_CLAIM, "already-drifted") == {HASH: "1111", VERSION: "v3"}
    stamped = NodeClaim.from_dict(client.peek(NODE_CLAIM, "launched-by-karpenter"))
    assert not hash_drifted(stamped, AKSNodeClass.from_dict(client.peek(AKS_NODE_CLASS,
                                                                        "default")))

    changed = client.peek(AKS_NODE_CLASS, "default")
    assert changed is not None
    changed["spec"]["osDiskSizeGB"] = 64
    client.add(AKS_NODE_CLASS, changed)
    await controller.reconcile(Request(namespace=None, name="default"))
    node_class = AKSNodeClass.from_dict(client.peek(AKS_NODE_CLASS, "default"))
    assert hash_drifted(stamped, node_class)
    # A tags change is no drift (applied in place instead).
    tagged = client.peek(AKS_NODE_CLASS, "default")
    assert tagged is not None
    tagged["spec"]["osDiskSizeGB"] = 128
    tagged["spec"]["tags"] = {"team": "b"}
    client.add(AKS_NODE_CLASS, tagged)
    await controller.reconcile(Request(namespace=None, name="default"))
    assert not hash_drifted(stamped, AKSNodeClass.from_dict(client.peek(AKS_NODE_CLASS,
                                                                        "default")))
