"""Fixtures of the AWS provider's tests: one moto server per session (see moto_harness.py
for what it fills in), an account seeded the way an EKS cluster's would be (tagged
subnets and security group, the node role, the EKS AMI parameters), and a provider
pointed at it. Karpenter's controller IAM policy is enforced on every request karpy
sends (iam_check.py): a test during which a call was refused fails, naming the
statements considered, unless it expected the refusal."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from iam_check import IAMCheck
from karpy_aws import AWSCloudProvider, AWSSettings
from karpy_aws._clients import AWSClients
from karpy_aws._resolve import resolve_status
from karpy_aws.apis import EC2NodeClass
from moto_harness import (
    DISCOVERY,
    ROLE,
    Account,
    FleetFaults,
    moto_server,
    seed_account,
    use_test_credentials,
)

NODEADM_BUILD = Path(__file__).resolve().parent / "nodeadm" / "build.sh"

REGION = "us-east-1"
CLUSTER = "karpy-test"
K8S_VERSION = "1.31"


@pytest.fixture(scope="session")
def iam_check() -> IAMCheck:
    """Karpenter's controller policy for the test cluster, enforced at moto."""
    return IAMCheck.karpenter(cluster=CLUSTER, region=REGION)


@pytest.fixture(scope="session")
def aws_account(iam_check: IAMCheck) -> Iterator[Account]:
    use_test_credentials()
    with moto_server(iam=iam_check) as url, FleetFaults().installed() as faults:
        yield seed_account(url, faults, cluster=CLUSTER, k8s_versions=(K8S_VERSION,))


@pytest.fixture(autouse=True)
def _no_call_denied(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test if the IAM policy refused one of karpy's calls during it."""
    yield
    if "aws_account" in request.fixturenames:
        check: IAMCheck = request.getfixturevalue("iam_check")
        check.raise_for_denials()


@pytest.fixture
def fleet_faults(aws_account: Account) -> Iterator[FleetFaults]:
    """moto's CreateFleet faults, reset after the test."""
    yield aws_account.faults
    aws_account.faults.no_capacity.clear()
    aws_account.faults.full_subnets.clear()
    aws_account.faults.throttle_next = 0
    aws_account.faults.lose_answer_next = 0


@pytest.fixture(scope="session")
def aws_settings(aws_account: Account) -> AWSSettings:
    return AWSSettings(
        cluster_name=CLUSTER,
        region=REGION,
        cluster_endpoint="https://127.0.0.1:6443",
        endpoint_url=aws_account.url,
        isolated_vpc=True,
    )


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def aws_clients(aws_settings: AWSSettings) -> AsyncIterator[AWSClients]:
    clients = await AWSClients.open(aws_settings)
    try:
        yield clients
    finally:
        await clients.aclose()


def node_class_manifest(name: str = "default", **spec: object) -> dict[str, object]:
    """An EC2NodeClass as a user writes it (alias AMI, discovery-tag selectors, role)."""
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": DISCOVERY}],
            "securityGroupSelectorTerms": [{"tags": DISCOVERY}],
            "role": ROLE,
            **spec,
        },
    }


async def resolved(clients: AWSClients, manifest: dict[str, object]) -> EC2NodeClass:
    """The EC2NodeClass with its status resolved against moto and Ready set, as the
    status controller would write it."""
    node_class = EC2NodeClass.model_validate(manifest)
    resolution = await resolve_status(
        clients, node_class, cluster_name=CLUSTER, region=REGION, k8s_version=K8S_VERSION
    )
    node_class.status = resolution.status
    conditions = node_class.status_conditions()
    for kind, (ok, reason, message) in resolution.conditions.items():
        if ok:
            conditions.set_true(kind)
        else:
            conditions.set_false(kind, reason, message)
    node_class.status.conditions = list(conditions.list())
    return node_class


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def default_node_class(aws_clients: AWSClients) -> EC2NodeClass:
    return await resolved(aws_clients, node_class_manifest())


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def aws_provider(
    aws_settings: AWSSettings, aws_clients: AWSClients, default_node_class: EC2NodeClass
) -> AWSCloudProvider:
    classes = {"default": default_node_class}

    async def get(name: str) -> EC2NodeClass | None:
        return classes.get(name)

    return AWSCloudProvider(
        settings=aws_settings, clients=aws_clients, node_classes=get, owns_clients=False
    )


NodeadmValidate = Callable[[str], "str | None"]


@pytest.fixture(scope="session")
def nodeadm_validate() -> NodeadmValidate:
    """The EKS node agent's own checks of user data (nodeadm's MIME parsing and
    ValidateNodeConfig, built from its Go module by nodeadm/build.sh: on demand, cached
    by input hash): ``validate(user_data_text)`` is None when nodeadm accepts it, else
    its error ("validate: CIDR is missing in cluster configuration")."""
    if shutil.which("go") is None:
        pytest.fail("nodeadm's validator is built with Go, which is not installed")
    built = subprocess.run(
        ["bash", str(NODEADM_BUILD)], capture_output=True, text=True, timeout=1800, check=False
    )
    if built.returncode != 0:
        pytest.fail(f"building nodeadm's validator failed:\n{built.stderr[-4000:]}")
    binary = built.stdout.strip().splitlines()[-1]

    def validate(user_data: str) -> str | None:
        done = subprocess.run(
            [binary], input=user_data, capture_output=True, text=True, timeout=60, check=False
        )
        return None if done.returncode == 0 else done.stderr.strip()

    return validate
