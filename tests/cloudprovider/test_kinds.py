"""One descriptor for every kind (karpy.runtime.Kind), and one declaration per kind
across the core and the providers."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from karpy.cloudprovider import NODE_CLAIM, NodeClassKind
from karpy.cloudprovider.fake import FAKE_NODE_CLASS
from karpy.cloudprovider.kwok import KWOK_NODE_CLASS
from karpy.runtime import Kind
from karpy.runtime.kinds import POD
from karpy.state.kinds import NODE_CLAIM as STATE_NODE_CLAIM

ROOT = Path(__file__).resolve().parents[2]


def _declarations() -> Counter[str]:
    """How often each ``Kind(..., kind="X")`` is written in karpy/ and providers/."""
    found: Counter[str] = Counter()
    for base in (ROOT / "karpy", ROOT / "providers"):
        for path in base.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Kind":
                    for kw in node.keywords:
                        if kw.arg == "kind" and isinstance(kw.value, ast.Constant):
                            found[str(kw.value.value)] += 1
    return found


def test_every_kind_is_declared_once() -> None:
    declared = _declarations()
    assert {"NodeClaim", "NodePool", "EC2NodeClass", "AKSNodeClass"} <= set(declared)
    assert {kind: n for kind, n in declared.items() if n > 1} == {}


def test_node_class_kinds_are_runtime_kinds_named_as_karpenter_names_them() -> None:
    assert NodeClassKind is Kind
    assert STATE_NODE_CLAIM is NODE_CLAIM
    assert str(NODE_CLAIM) == "NodeClaim.karpenter.sh"
    assert str(POD) == "Pod"
    for node_class in (FAKE_NODE_CLASS, KWOK_NODE_CLASS):
        assert isinstance(node_class, Kind)
        assert not node_class.namespaced
