"""examples/aws/ parses with karpy's models, and its EC2NodeClass resolves and launches
against moto once its discovery tags name the test cluster."""

from __future__ import annotations

from pathlib import Path

import yaml
from conftest import CLUSTER, resolved
from karpy_aws._clients import AWSClients
from karpy_aws._instancetypes import NodeClassShape
from karpy_aws.apis import EC2NodeClass

from karpy.apis import NodePool

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "aws"


def load(name: str) -> dict[str, object]:
    loaded: dict[str, object] = yaml.safe_load((EXAMPLES / name).read_text())
    return loaded


def test_the_nodepool_uses_the_node_class() -> None:
    pool = NodePool.model_validate(load("nodepool.yaml"))
    node_class = EC2NodeClass.model_validate(load("ec2nodeclass.yaml"))
    ref = pool.spec.template.spec.node_class_ref
    assert (ref.group, ref.kind, ref.name) == ("karpenter.k8s.aws", "EC2NodeClass", "default")
    assert node_class.metadata.name == "default"


async def test_the_node_class_resolves_against_moto(aws_clients: AWSClients) -> None:
    text = (EXAMPLES / "ec2nodeclass.yaml").read_text().replace("my-cluster", CLUSTER)
    manifest = yaml.safe_load(text)
    node_class = await resolved(aws_clients, manifest)
    assert node_class.status_conditions().is_true("Ready"), node_class.status.conditions
    shape = NodeClassShape.of(node_class)
    assert shape.max_pods == 110
    assert shape.root_volume_bytes == 50 * 2**30
