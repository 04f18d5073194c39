"""The kwok provider on the local cluster: it passes the conformance kit, the Nodes it
creates are what kwok and the lifecycle controller expect, and the faults tests inject
(insufficient capacity, a launch that never registers, registration delay, a NodeClass
that is missing or not ready, and cloud faults drawn at set rates) behave as a real
cloud's would; its launched instances outlive the process that launched them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

from karpy.apis import NodeClaim
from karpy.apis.crdgen import generate
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import (
    CloudProviderError,
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
    ProviderContext,
)
from karpy.cloudprovider.errors import ProviderLoadError
from karpy.cloudprovider.kwok import (
    API_EXTENSION,
    FAULT_CREATE_ERROR,
    FAULT_CREATE_SLOW,
    FAULT_DELETE_ERROR,
    FAULT_GET_NOT_FOUND,
    KWOK_NODE_CLASS,
    RECORD_LABEL,
    RECORD_NAMESPACE,
    WELL_KNOWN_LABELS,
    InstanceRecords,
    KwokCloudProvider,
    KwokOptions,
    OfferingPattern,
)
from karpy.cloudprovider.registry import build_provider
from karpy.cloudprovider.testing import (
    CORE_WELL_KNOWN_LABELS,
    CloudProviderConformance,
    eventually,
    make_nodeclaim,
    make_nodepool,
)
from karpy.runtime import KubeClient
from karpy.runtime import errors as api_errors
from karpy.runtime.kinds import CONFIG_MAP, NODE

if TYPE_CHECKING:
    from tests.controlplane.fixtures import Cluster

pytestmark = pytest.mark.cluster

TYPE = "c-2x-amd64-linux"


@pytest.fixture(scope="session")
def kwok_crd(cluster: Cluster) -> None:
    """Install the KWOKNodeClass CRD (generated from the model) once per session."""
    (text,) = generate([API_EXTENSION]).values()
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=text)
    cluster.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s",
        f"crd/{KWOK_NODE_CLASS.plural}.{KWOK_NODE_CLASS.group}",
    )


def apply_node_class(cluster: Cluster, name: str, spec: dict[str, Any] | None = None) -> None:
    manifest = {
        "apiVersion": KWOK_NODE_CLASS.api_version,
        "kind": KWOK_NODE_CLASS.kind,
        "metadata": {"name": name},
        "spec": spec or {},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))


@pytest.fixture
def node_class(cluster: Cluster, kwok_crd: None) -> Iterator[str]:
    """A fresh, Ready KWOKNodeClass; deleted afterwards."""
    name = f"kit-{uuid.uuid4().hex[:6]}"
    apply_node_class(cluster, name)
    yield name
    cluster.kubectl("delete", "kwoknodeclass", name, "--ignore-not-found", "--wait=false")


@pytest_asyncio.fixture
async def client(api_client: Any) -> AsyncIterator[KubeClient]:
    async with KubeClient(api_client) as c:
        yield c


async def node_exists(client: KubeClient, name: str) -> bool:
    try:
        await client.get(NODE, name, live=True)
    except api_errors.NotFound:
        return False
    return True


class TestKwokConformance(CloudProviderConformance):
    """The kit, against Nodes on the local cluster."""

    timeout = 30.0
    well_known_labels = CORE_WELL_KNOWN_LABELS | WELL_KNOWN_LABELS

    @pytest.fixture
    def provider(self, client: KubeClient) -> KwokCloudProvider:
        return KwokCloudProvider(client)

    @pytest.fixture
    def node_class_ref(self, node_class: str) -> NodeClassReference:
        return NodeClassReference(
            group=KWOK_NODE_CLASS.group, kind=KWOK_NODE_CLASS.kind, name=node_class
        )


def claim(
    node_class: str,
    *,
    requirements: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
) -> NodeClaim:
    """A NodeClaim of the NodePool ``kwok-test`` asking for 1 CPU and 1Gi."""
    pool = make_nodepool(
        NodeClassReference(
            group=KWOK_NODE_CLASS.group, kind=KWOK_NODE_CLASS.kind, name=node_class
        ),
        name="kwok-test",
    )
    return make_nodeclaim(
        pool, requests={"cpu": "1", "memory": "1Gi"}, requirements=requirements or [],
        labels=labels,
    )


@pytest_asyncio.fixture
async def kwok(client: KubeClient) -> AsyncIterator[KwokCloudProvider]:
    provider = KwokCloudProvider(client)
    yield provider
    await provider.aclose()
    for nodeclaim in await provider.list():
        if nodeclaim.metadata.labels.get("karpenter.sh/nodepool") == "kwok-test":
            with contextlib.suppress(NodeClaimNotFoundError):
                await provider.delete(nodeclaim)


async def test_the_node_is_what_kwok_and_registration_expect(
    cluster: Cluster, kwok: KwokCloudProvider, node_class: str
) -> None:
    nodeclaim = claim(
        node_class,
        labels={"team": "a"},
        requirements=[{"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": [TYPE]}],
    )
    launched = await kwok.create(nodeclaim)
    name = nodeclaim.metadata.name or ""
    assert launched.status.provider_id == f"kwok://{name}"

    node = cluster.kubectl_json("get", "node", name)
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    labels = node["metadata"]["labels"]
    assert labels[LABEL_INSTANCE_TYPE] == TYPE
    assert labels["team"] == "a"
    assert labels["karpenter.sh/nodepool"] == "kwok-test"
    assert labels["kubernetes.io/hostname"] == name
    assert labels["karpenter.kwok.sh/instance-cpu"] == "2"
    assert float(labels["eks-node-viewer/instance-price"]) > 0
    assert node["spec"]["providerID"] == f"kwok://{name}"
    assert {"key": "karpenter.sh/unregistered", "effect": "NoExecute"} in node["spec"]["taints"]
    assert node["status"]["capacity"]["cpu"] == "2"
    assert node["status"]["allocatable"]["cpu"] == "1900m"
    assert launched.metadata.labels[LABEL_ZONE] == labels[LABEL_ZONE]

    def ready() -> bool:
        conditions = cluster.kubectl_json("get", "node", name)["status"].get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    async def kwok_made_it_ready() -> None:
        assert ready(), f"node {name} is not Ready"

    await eventually(kwok_made_it_ready, within=30, what="kwok brings the node up")


async def test_taints_of_the_nodeclaim_are_on_the_node(
    cluster: Cluster, kwok: KwokCloudProvider, node_class: str
) -> None:
    nodeclaim = claim(node_class)
    nodeclaim = NodeClaim.model_validate(
        {
            **nodeclaim.to_dict(),
            "spec": {
                **nodeclaim.to_dict()["spec"],
                "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "cni-not-ready", "effect": "NoSchedule"}],
            },
        }
    )
    await kwok.create(nodeclaim)
    taints = cluster.kubectl_json("get", "node", nodeclaim.metadata.name or "")["spec"]["taints"]
    keys = {(t["key"], t["effect"]) for t in taints}
    # the node lifecycle controller may add node.kubernetes.io/not-ready on its own
    assert keys - {("node.kubernetes.io/not-ready", "NoSchedule")} == {
        ("dedicated", "NoSchedule"),
        ("cni-not-ready", "NoSchedule"),
        ("karpenter.sh/unregistered", "NoExecute"),
    }


async def test_injected_insufficient_capacity_names_the_offerings_and_falls_back(
    kwok: KwokCloudProvider, node_class: str
) -> None:
    only = [
        {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": [TYPE]},
        {"key": LABEL_ZONE, "operator": "In", "values": ["test-zone-b"]},
    ]
    kwok.faults.insufficient_capacity = {OfferingPattern(TYPE, "test-zone-b", "*")}
    with pytest.raises(InsufficientCapacityError) as raised:
        await kwok.create(claim(node_class, requirements=only))
    assert {str(o) for o in raised.value.offerings} == {
        f"{TYPE}/test-zone-b/spot", f"{TYPE}/test-zone-b/on-demand"
    }
    # spot alone refused: the launch falls back to on-demand, as a real cloud would
    kwok.faults.insufficient_capacity = {OfferingPattern(TYPE, "test-zone-b", "spot")}
    launched = await kwok.create(claim(node_class, requirements=only))
    assert launched.metadata.labels[LABEL_CAPACITY_TYPE] == "on-demand"


async def test_a_launch_that_never_registers_has_an_instance_but_no_node(
    client: KubeClient, kwok: KwokCloudProvider, node_class: str
) -> None:
    kwok.faults.unregistered_launches = 1
    ghost = await kwok.create(claim(node_class))
    provider_id = ghost.status.provider_id or ""
    assert not await node_exists(client, ghost.metadata.name or "")
    assert (await kwok.get(provider_id)).status.provider_id == provider_id
    assert provider_id in {nc.status.provider_id for nc in await kwok.list()}
    # the next launch registers normally
    normal = await kwok.create(claim(node_class))
    assert await node_exists(client, normal.metadata.name or "")
    # deleting the ghost terminates it; then it is gone
    await kwok.delete(ghost)
    with pytest.raises(NodeClaimNotFoundError):
        await kwok.get(provider_id)
    with pytest.raises(NodeClaimNotFoundError):
        await kwok.delete(ghost)


async def test_registration_delay_from_options_and_node_class(
    cluster: Cluster, client: KubeClient, node_class: str
) -> None:
    delayed = f"{node_class}-slow"
    apply_node_class(cluster, delayed, {"nodeRegistrationDelay": "1s"})
    provider = KwokCloudProvider(client, options=KwokOptions())
    try:
        launched = await provider.create(claim(delayed))
        name = launched.metadata.name or ""
        assert not await node_exists(client, name), "the node appeared before its delay"
        assert (await provider.get(launched.status.provider_id or "")).metadata.name == name

        async def appeared() -> None:
            assert await node_exists(client, name), f"node {name} has not appeared"

        await eventually(appeared, within=15, what="the delayed node appears")
        with pytest.raises(NodeClaimNotFoundError):
            await provider.delete(launched)
    finally:
        await provider.aclose()
        cluster.kubectl("delete", "kwoknodeclass", delayed, "--ignore-not-found")


async def test_a_missing_or_unready_node_class_fails_the_launch(
    cluster: Cluster, kwok: KwokCloudProvider, node_class: str
) -> None:
    with pytest.raises(NodeClassNotReadyError, match="not found"):
        await kwok.create(claim(f"{node_class}-absent"))
    cluster.kubectl(
        "patch", "kwoknodeclass", node_class, "--subresource=status", "--type=merge", "-p",
        json.dumps({"status": {"conditions": [{
            "type": "Ready", "status": "False", "reason": "Broken", "message": "on purpose",
            "lastTransitionTime": "2024-01-01T00:00:00Z",
        }]}}),
    )
    with pytest.raises(NodeClassNotReadyError, match="Broken: on purpose"):
        await kwok.create(claim(node_class))


async def test_a_repeated_create_returns_the_same_instance(
    cluster: Cluster, kwok: KwokCloudProvider, node_class: str
) -> None:
    nodeclaim = claim(node_class)
    first = await kwok.create(nodeclaim)
    again = await kwok.create(nodeclaim)
    assert again.status.provider_id == first.status.provider_id
    assert again.metadata.labels[LABEL_INSTANCE_TYPE] == first.metadata.labels[LABEL_INSTANCE_TYPE]


async def test_the_operator_builds_it_by_name_with_settings(client: KubeClient) -> None:
    provider = await build_provider(
        "kwok",
        ProviderContext(client=client, settings={"insufficientCapacity": "*/test-zone-a/spot"}),
    )
    assert isinstance(provider, KwokCloudProvider)
    assert provider.faults.insufficient_capacity == {OfferingPattern("*", "test-zone-a", "spot")}
    with pytest.raises(ProviderLoadError, match="unknown kwok provider setting"):
        await build_provider("kwok", ProviderContext(client=client, settings={"typo": "1"}))


# -- the cloud outlives karpy: instance records, and faults drawn at set rates -------


async def test_a_booting_instance_outlives_the_process_that_launched_it(
    cluster: Cluster, client: KubeClient, node_class: str
) -> None:
    delayed = f"{node_class}-boot"
    apply_node_class(cluster, delayed, {"nodeRegistrationDelay": "2s"})
    first = KwokCloudProvider(client)
    launched = await first.create(claim(delayed))
    provider_id = launched.status.provider_id or ""
    name = launched.metadata.name or ""
    await first.aclose()  # karpy dies before the instance boots
    second = KwokCloudProvider(client)  # karpy restarted: a new process, no memory
    try:
        assert provider_id in {nc.status.provider_id for nc in await second.list()}
        assert (await second.get(provider_id)).metadata.name == name
        assert not await node_exists(client, name)

        async def booted() -> None:
            await second.boot_due()
            assert await node_exists(client, name), f"node {name} has not booted"

        await eventually(booted, within=15, what="the restarted provider boots the instance")
        assert await InstanceRecords(client).get(name) is None  # the record went with it
        assert [nc.status.provider_id for nc in await second.list()].count(provider_id) == 1
        with pytest.raises(NodeClaimNotFoundError):
            await second.delete(launched)
    finally:
        await second.aclose()
        cluster.kubectl("delete", "kwoknodeclass", delayed, "--ignore-not-found")


async def test_an_unregistered_instance_is_still_listed_after_a_restart_and_deletable(
    client: KubeClient, node_class: str
) -> None:
    first = KwokCloudProvider(client, options=KwokOptions(unregistered_launches=1))
    ghost = await first.create(claim(node_class))
    provider_id = ghost.status.provider_id or ""
    await first.aclose()
    # Its record is in the records' own namespace, none in kube-system: the Role that
    # lets karpy delete records then reaches no other ConfigMap.
    records = await client.list(CONFIG_MAP, namespace=RECORD_NAMESPACE,
                                label_selector=RECORD_LABEL, live=True)
    assert ghost.metadata.name in {r["metadata"]["labels"][RECORD_LABEL] for r in records}
    assert await client.list(CONFIG_MAP, namespace="kube-system",
                             label_selector=RECORD_LABEL, live=True) == []
    second = KwokCloudProvider(client)
    assert provider_id in {nc.status.provider_id for nc in await second.list()}
    assert await second.boot_due() == 0  # it never boots
    await second.delete(ghost)  # terminated by whoever runs now
    assert provider_id not in {nc.status.provider_id for nc in await second.list()}
    with pytest.raises(NodeClaimNotFoundError):
        await second.get(provider_id)


async def test_injected_create_errors_launch_nothing(
    kwok: KwokCloudProvider, node_class: str
) -> None:
    kwok.faults.rates = {FAULT_CREATE_ERROR: 1.0}
    failing = claim(node_class)
    for _ in range(4):
        with pytest.raises((CreateError, ConnectionResetError), match="injected fault"):
            await kwok.create(failing)
    listed = {nc.metadata.name for nc in await kwok.list()}
    assert failing.metadata.name not in listed
    kwok.faults.rates = {}
    assert (await kwok.create(failing)).metadata.name == failing.metadata.name


async def test_a_slow_create_has_launched_before_it_answers(
    client: KubeClient, node_class: str
) -> None:
    kwok = KwokCloudProvider(
        client,
        options=KwokOptions(
            fault_rates={FAULT_CREATE_SLOW: 1.0}, create_slow_duration=timedelta(seconds=2)
        ),
    )
    nodeclaim = claim(node_class)
    name = nodeclaim.metadata.name or ""
    started = time.monotonic()
    create = asyncio.create_task(kwok.create(nodeclaim))

    async def launched_already() -> None:
        assert await node_exists(client, name)

    await eventually(launched_already, within=10, what="the Node exists while create waits")
    assert not create.done()
    launched = await create
    assert time.monotonic() - started >= 2.0
    kwok.faults.rates = {}
    # a karpy that was killed during the wait retries: the same instance comes back
    again = await KwokCloudProvider(client).create(nodeclaim)
    assert again.status.provider_id == launched.status.provider_id
    with pytest.raises(NodeClaimNotFoundError):
        await kwok.delete(launched)


async def test_injected_delete_errors_and_stale_gets_leave_the_instance(
    client: KubeClient, kwok: KwokCloudProvider, node_class: str
) -> None:
    launched = await kwok.create(claim(node_class))
    provider_id = launched.status.provider_id or ""
    kwok.faults.rates = {FAULT_DELETE_ERROR: 1.0, FAULT_GET_NOT_FOUND: 1.0}
    with pytest.raises(CloudProviderError, match="injected fault"):
        await kwok.delete(launched)
    with pytest.raises(NodeClaimNotFoundError, match="stale"):
        await kwok.get(provider_id)
    assert await node_exists(client, launched.metadata.name or "")
    assert provider_id in {nc.status.provider_id for nc in await kwok.list()}
    kwok.faults.rates = {}
    assert (await kwok.get(provider_id)).status.provider_id == provider_id
