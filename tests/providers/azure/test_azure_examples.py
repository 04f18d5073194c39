"""examples/azure parses with karpy's models; its v1alpha2 AKSNodeClass converts to
exactly its v1beta1 one."""

from __future__ import annotations

from pathlib import Path

import yaml
from karpy_azure.apis import AKSNodeClass
from karpy_azure.apis.convert import CONVERTERS

from karpy.apis import NodePool

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "azure"


def load(name: str) -> dict[str, object]:
    doc = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(doc, dict)
    return doc


def test_the_manifests_parse() -> None:
    node_class = AKSNodeClass.model_validate(load("aksnodeclass.yaml"))
    assert node_class.spec.image_family == "Ubuntu2204"
    pool = NodePool.model_validate(load("nodepool.yaml"))
    ref = pool.spec.template.spec.node_class_ref
    assert (ref.group, ref.kind, ref.name) == ("karpenter.azure.com", "AKSNodeClass", "default")


def test_v1alpha2_is_the_same_class() -> None:
    old, new = load("aksnodeclass-v1alpha2.yaml"), load("aksnodeclass.yaml")
    assert old["apiVersion"] == "karpenter.azure.com/v1alpha2"
    assert {k: v for k, v in old.items() if k != "apiVersion"} == {
        k: v for k, v in new.items() if k != "apiVersion"
    }
    assert any(c.api_version == "karpenter.azure.com/v1alpha2" for c in CONVERTERS)
