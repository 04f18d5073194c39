"""karpy's EC2NodeClass hash is Karpenter AWS's, and the nodeclass.hash controller
re-stamps NodeClaims on a hash-version change as Karpenter AWS's does.

The golden values in data/ec2nodeclass_hash_golden.json were printed by Karpenter AWS's own
``EC2NodeClass.Hash(caBundle)`` (scripts/ec2nodeclass-hash, a Go program importing
github.com/aws/karpenter-provider-aws v1.14.1 pkg/apis/v1); refresh them as its docs say.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from karpy_aws._controllers import nodeclass_hash_spec
from karpy_aws._hash import HASH_VERSION, hash_drifted, node_class_hash
from karpy_aws._kinds import EC2_NODE_CLASS
from karpy_aws.apis import EC2NodeClass

from karpy.apis import NodeClaim
from karpy.cloudprovider import NODE_CLAIM
from karpy.cloudprovider.nodeclass_hash import NodeClassHash
from karpy.runtime import Request
from karpy.runtime.testing import FakeClient

GOLDEN = json.loads(
    (Path(__file__).parent / "data" / "ec2nodeclass_hash_golden.json").read_text()
)
BY_NAME = {c["name"]: c for c in GOLDEN["cases"]}
HASH = "karpenter.k8s.aws/ec2nodeclass-hash"
VERSION = "karpenter.k8s.aws/ec2nodeclass-hash-version"


def test_the_golden_file_is_karpenter_aws_v1_14_1s_hash_version() -> None:
    assert GOLDEN["hashVersion"] == HASH_VERSION == "v5"
    assert "v1.14.1" in GOLDEN["generator"]


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: c["name"])
def test_the_hash_equals_karpenter_aws(case: dict[str, Any]) -> None:
    node_class = EC2NodeClass.from_dict(case["ec2nodeclass"])
    assert node_class_hash(node_class, case.get("caBundle")) == case["hash"]


def test_the_golden_cases_show_what_karpenter_aws_hashes() -> None:
    h = {name: c["hash"] for name, c in BY_NAME.items()}
    # Ignored: selectors, ipPrefixCount; the family enters resolved, not as written.
    for same in ("other-selectors", "ip-prefix-count", "ami-family-al2023-with-ids",
                 "minimal-with-empty-ca"):
        assert h[same] == h["minimal"], same
    for pair in (("tags", "tags-reordered"), ("bdm-two", "bdm-two-reordered"),
                 ("kubelet-cluster-dns", "kubelet-cluster-dns-reordered"),
                 ("network-interfaces", "network-interfaces-reordered"),
                 ("kubelet-grace-1m", "kubelet-grace-60s"),
                 ("bdm-size-1024Gi", "bdm-size-1Ti"), ("bdm-size-1000G", "bdm-size-1T")):
        assert h[pair[0]] == h[pair[1]], pair
    for different in ("minimal-with-ca", "ami-family-bottlerocket", "user-data",
                      "user-data-empty", "tags-empty", "kubelet-empty", "bdm-empty-list",
                      "detailed-monitoring-false", "public-ip-false", "context",
                      "metadata-hop-limit-2", "placement-group-name",
                      "connection-tracking-tcp", "cpu-options-nested-disabled",
                      "cpu-options-empty"):
        assert h[different] != h["minimal"], different
    # every value of the v1.13+ fields counts (a takeover must not drift their nodes)
    assert len({h[n] for n in ("connection-tracking-tcp", "connection-tracking-tcp-60",
                               "connection-tracking-udp", "connection-tracking-all")}) == 4
    assert len({h[n] for n in ("cpu-options-nested-enabled", "cpu-options-nested-disabled",
                               "cpu-options-empty")}) == 3
    assert h["kubelet-max-pods"] != h["kubelet-max-pods-other"]
    assert h["bdm-size-1024Gi"] != h["bdm-size-1000G"] != h["bdm-root"]
    assert h["kubelet-grace-0s"] != h["kubelet-grace-1m"]


# -- the nodeclass.hash controller ------------------------------------------------------

def _node_class(annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    stored = json.loads(json.dumps(BY_NAME["minimal"]["ec2nodeclass"]))
    stored["metadata"] = {"name": "default", "annotations": annotations}
    stored["spec"].update(spec)
    return stored


def _nodeclaim(name: str, annotations: dict[str, str], *, drifted: bool = False,
               node_class: str = "default") -> dict[str, Any]:
    status: dict[str, Any] = {}
    if drifted:
        status["conditions"] = [{"type": "Drifted", "status": "True", "reason": "NodeClassDrift",
                                 "lastTransitionTime": "2026-01-01T00:00:00Z", "message": ""}]
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                      "name": node_class},
                     "requirements": []},
            "status": status}


def _annotations(client: FakeClient, kind: Any, name: str) -> dict[str, str]:
    stored = client.peek(kind, name)
    assert stored is not None
    return dict(stored["metadata"].get("annotations") or {})


async def test_a_version_change_restamps_nodeclaims_without_drifting_them() -> None:
    client = FakeClient()
    # What Karpenter AWS v1.11 (hash version v4) left behind.
    old = {HASH: "1111", VERSION: "v4"}
    client.add(EC2_NODE_CLASS, _node_class(old))
    client.add(NODE_CLAIM, _nodeclaim("launched-by-karpenter", old))
    client.add(NODE_CLAIM, _nodeclaim("already-drifted", old, drifted=True))
    client.add(NODE_CLAIM, _nodeclaim("current", {HASH: "2222", VERSION: "v5"}))
    client.add(NODE_CLAIM, _nodeclaim("other-class", old, node_class="other"))
    controller = NodeClassHash(nodeclass_hash_spec(""), client)  # type: ignore[arg-type]

    await controller.reconcile(Request(namespace=None, name="default"))

    want = BY_NAME["minimal"]["hash"]  # Karpenter AWS's own hash of this class
    assert _annotations(client, EC2_NODE_CLASS, "default") == {HASH: want, VERSION: "v5"}
    assert _annotations(client, NODE_CLAIM, "launched-by-karpenter") == {HASH: want,
                                                                        VERSION: "v5"}
    # Already judged: the verdict stays, only the version moves (as upstream).
    assert _annotations(client, NODE_CLAIM, "already-drifted") == {HASH: "1111", VERSION: "v5"}
    assert _annotations(client, NODE_CLAIM, "current") == {HASH: "2222", VERSION: "v5"}
    assert _annotations(client, NODE_CLAIM, "other-class") == old

    stamped = NodeClaim.from_dict(client.peek(NODE_CLAIM, "launched-by-karpenter"))
    node_class = EC2NodeClass.from_dict(client.peek(EC2_NODE_CLASS, "default"))
    assert not hash_drifted(stamped, node_class)

    # A change of a hashed field then drifts it (same version, other hash) ...
    changed = client.peek(EC2_NODE_CLASS, "default")
    assert changed is not None
    changed["spec"]["tags"] = {"team": "b"}
    client.add(EC2_NODE_CLASS, changed)
    await controller.reconcile(Request(namespace=None, name="default"))
    node_class = EC2NodeClass.from_dict(client.peek(EC2_NODE_CLASS, "default"))
    assert node_class.metadata.annotations[HASH] != want
    assert hash_drifted(stamped, node_class)
    # ... and the NodeClaims are left alone now that the version is current.
    assert _annotations(client, NODE_CLAIM, "launched-by-karpenter") == {HASH: want,
                                                                        VERSION: "v5"}


def test_drift_needs_both_annotations_of_the_same_version() -> None:
    node_class = EC2NodeClass.from_dict(_node_class({HASH: "1", VERSION: "v5"}))
    claim = NodeClaim.from_dict(_nodeclaim("c", {HASH: "2", VERSION: "v5"}))
    assert hash_drifted(claim, node_class)
    claim.metadata.annotations[VERSION] = "v4"
    assert not hash_drifted(claim, node_class)
    claim.metadata.annotations = {HASH: "2"}
    assert not hash_drifted(claim, node_class)
    node_class.metadata.annotations = {}
    assert not hash_drifted(NodeClaim.from_dict(_nodeclaim("d", {HASH: "2", VERSION: "v5"})),
                            node_class)
