"""The user data that joins a node: checked by nodeadm's own validation (built from its
Go module, see nodeadm/build.sh), parsed as TOML for Bottlerocket, rendered for
examples/aws and for the EC2NodeClasses of Karpenter's own examples/v1, with the
cluster discovered from EKS (moto) as Karpenter discovers it."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import email
import re
import tomllib
from email.message import Message
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from conftest import (
    CLUSTER,
    K8S_VERSION,
    REGION,
    NodeadmValidate,
    node_class_manifest,
    resolved,
)
from iam_check import IAMCheck
from karpy_aws import AWSCloudProvider, AWSSettings
from karpy_aws._clients import AWSClients
from karpy_aws._cluster import ClusterDiscovery, ClusterFacts, kube_client_ca_bundle
from karpy_aws._factory import kube_dns_from
from karpy_aws._fleet import TemplateKey
from karpy_aws._instancetypes import eni_limited_pods
from karpy_aws._kinds import EC2_NODE_CLASS_KIND
from karpy_aws._nodeclass_status import NodeClassStatusController
from karpy_aws._nodeclasses import node_classes_from
from karpy_aws._resolve import alias_parameters, resolve_amis, resolve_status
from karpy_aws._settings import AWSSettingsError
from karpy_aws._userdata import BootstrapOptions, nodeadm_user_data
from karpy_aws.apis import EC2NodeClass
from moto.core import DEFAULT_ACCOUNT_ID
from moto.eks.models import eks_backends
from moto_harness import SERVICE_CIDR, Account, seed_public_parameter

from karpy.apis import NodeClaim
from karpy.apis import labels as wk
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import NodeClassNotReadyError
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.runtime import Request
from karpy.runtime.kinds import SERVICE
from karpy.runtime.testing import FakeClient

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "aws"
ON_DEMAND = {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}
DNS_IP = "10.100.0.10"

# The EC2NodeClass specs of Karpenter AWS's examples/v1 manifests, as karpy's own
# fixtures (what matters to user data: AMI family/alias, userData, kubelet,
# instanceStorePolicy, block devices), from github.com/aws/karpenter-provider-aws at
# commit 1d927085dd81a9df9301e613f371dac5b4d16bfe, file named in each key. Selectors and
# role are the test account's (node_class_manifest).
_MIME_SHELL = (
    'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="BOUNDARY"\n\n'
    '--BOUNDARY\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n'
    '#!/bin/bash\necho "Running a custom user data script"\n\n--BOUNDARY--\n'
)
_LOG_QUERY = (
    'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="BOUNDARY"\n\n'
    '--BOUNDARY\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n'
    "#!/bin/bash\n\nset -e\n\n# Add additional KUBELET_EXTRA_ARGS to the service\n"
    "# Requires Kubernetes 1.27 (alpha feature)\n"
    "cat << EOF > /etc/systemd/system/kubelet.service.d/90-kubelet-extra-args.conf\n"
    '[Service]\nEnvironment="KUBELET_EXTRA_ARGS=--feature-gates=NodeLogQuery=true '
    '$KUBELET_EXTRA_ARGS"\nEOF\n\n# Enable log handler and log query to the kubelet '
    "configuration\necho \"$(jq '.enableSystemLogHandler=true' "
    '/etc/kubernetes/kubelet/kubelet-config.json)" > '
    "/etc/kubernetes/kubelet/kubelet-config.json\necho \"$(jq '.enableSystemLogQuery=true' "
    '/etc/kubernetes/kubelet/kubelet-config.json)" > '
    "/etc/kubernetes/kubelet/kubelet-config.json\n\n--BOUNDARY--"
)
_AL2023_MIME = (
    'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n--//\n'
    "Content-Type: application/node.eks.aws\n\n"
    "# Example custom nodeconfig which mounts individual drives on an instance\n"
    "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  instance:\n"
    "    localStorage:\n      strategy: Mount\n\n--//\n"
    'Content-Type: text/x-shellscript; charset="us-ascii"\n\n#!/bin/bash\n'
    'echo "Hello, AL2023!"\n--//\n'
)
_CUSTOM_MIME = (
    'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="BOUNDARY"\n\n'
    '--BOUNDARY\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n'
    '#!/bin/bash\necho "Running my custom set-up"\n\n# Have the kubelet label the node\n'
    "/etc/eks/bootstrap.sh my-cluster --kubelet-extra-args='--node-labels=foo=bar'\n\n"
    "--BOUNDARY\n"
)
_EBS = [
    {"deviceName": "/dev/xvda", "ebs": {"volumeType": "gp3", "volumeSize": "20Gi"}},
    {"deviceName": "/dev/xvdb", "ebs": {"volumeType": "gp3", "volumeSize": "100Gi"}},
    {"deviceName": "/dev/xvdc", "ebs": {"volumeType": "gp3", "volumeSize": "2000Gi"}},
]
KARPENTER_AL2023: dict[str, dict[str, Any]] = {
    # also 100-cpu-limit, large-instances, max-node-lifetime, multiple-arch, spot
    "general-purpose.yaml": {"amiSelectorTerms": [{"alias": "al2023@latest"}]},
    # also min-values-multiple-keys
    "min-values-family.yaml": {"amiSelectorTerms": [{"alias": "al2023@v20240625"}]},
    "multiple-ebs.yaml": {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "blockDeviceMappings": _EBS,
    },
    "instance-store-ephemeral-storage.yaml": {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "instanceStorePolicy": "RAID0",
    },
    "al2-custom-userdata.yaml": {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "userData": _MIME_SHELL,
    },
    "al2-kubelet-log-query.yaml": {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "userData": _LOG_QUERY,
    },
    "al2023-custom-userdata.yaml": {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "userData": _AL2023_MIME,
    },
}
KARPENTER_BOTTLEROCKET: dict[str, dict[str, Any]] = {
    "bottlerocket.yaml": {
        "amiSelectorTerms": [{"alias": "bottlerocket@latest"}],
        "blockDeviceMappings": [
            {"deviceName": "/dev/xvda", "ebs": {"volumeType": "gp3", "volumeSize": "4Gi"}},
            {"deviceName": "/dev/xvdb", "ebs": {"volumeType": "gp3", "volumeSize": "20Gi"}},
        ],
    },
    "br-custom-userdata.yaml": {
        "amiSelectorTerms": [{"alias": "bottlerocket@latest"}],
        "userData": "[settings.kubernetes]\nkube-api-qps = 30\n",
    },
}
KARPENTER_CUSTOM: dict[str, dict[str, Any]] = {
    "custom-family.yaml": {
        "amiFamily": "Custom",
        "amiSelectorTerms": [{"id": "ami-123"}, {"id": "ami-456"}],
        "userData": _CUSTOM_MIME,
    },
    "custom-family-with-alias.yaml": {
        "amiFamily": "Custom",
        "amiSelectorTerms": [{"alias": "bottlerocket@latest"}],
        "userData": _CUSTOM_MIME,
    },
}
KARPENTER_UNRENDERED: dict[str, dict[str, Any]] = {
    "al2-custom-ami.yaml": {
        "amiFamily": "AL2",
        "amiSelectorTerms": [{"id": "ami-123"}, {"id": "ami-456"}],
        "userData": _MIME_SHELL.replace("BOUNDARY", "EXAMPLEBOUNDARY"),
    },
    # also windows-2019, windows-2025
    "windows-2022.yaml": {"amiSelectorTerms": [{"alias": "windows2022@latest"}]},
    "windows-custom-userdata.yaml": {
        "amiFamily": "Windows2022",
        "amiSelectorTerms": [{"alias": "windows2022@latest"}],
        "userData": "New-Item -Path 'C:\\temp\\' -ItemType Directory\n"
        "New-Item -Path 'C:\\temp\\sample.txt' -ItemType File",
    },
}


def _node_class(name: str, **spec: Any) -> EC2NodeClass:
    return EC2NodeClass.model_validate(node_class_manifest(name, **spec))


def _claim(pool_class: str = "default", **kwargs: Any) -> NodeClaim:
    ref = NodeClassReference(group="karpenter.k8s.aws", kind="EC2NodeClass", name=pool_class)
    return make_nodeclaim(make_nodepool(ref, name="team-a"), **kwargs)


async def render(
    provider: AWSCloudProvider,
    node_class: EC2NodeClass,
    *,
    max_pods: int = 29,
    claim: NodeClaim | None = None,
) -> str:
    """The user data karpy puts into the launch template for ``node_class``."""
    await provider.cluster.resolve()
    data = provider.template_contents.data(
        node_class,
        TemplateKey("ami-0", max_pods),
        claim or _claim(),
        capacity_type="on-demand",
        tags={},
    )
    return base64.b64decode(data["UserData"]).decode()


def node_configs(user_data: str) -> list[dict[str, Any]]:
    """The NodeConfig parts of an AL2023 MIME archive, in order."""
    parts = email.message_from_string(user_data).get_payload()
    assert isinstance(parts, list)
    return [
        yaml.safe_load(str(p.get_payload()))
        for p in parts
        if isinstance(p, Message) and p.get_content_type() == "application/node.eks.aws"
    ]


@pytest.fixture
def dns_provider(aws_settings: AWSSettings, aws_clients: AWSClients) -> AWSCloudProvider:
    """A provider whose cluster has a kube-dns Service (Karpenter reads its ClusterIP)."""

    async def kube_dns() -> str | None:
        return DNS_IP

    async def no_class(_: str) -> EC2NodeClass | None:
        return None

    return AWSCloudProvider(
        settings=aws_settings,
        clients=aws_clients,
        node_classes=no_class,
        owns_clients=False,
        cluster=ClusterDiscovery(aws_clients, aws_settings, kube_dns=kube_dns),
    )


# -- nodeadm's validation bites ----------------------------------------------------------


COMPLETE = BootstrapOptions(
    cluster_name="c1",
    cluster_endpoint="https://api.example",
    ca_bundle=base64.b64encode(b"a CA").decode(),
    cluster_cidr="10.100.0.0/16",
    kubelet={"maxPods": 29},
)


def test_nodeadm_accepts_a_complete_node_config(nodeadm_validate: NodeadmValidate) -> None:
    assert nodeadm_validate(nodeadm_user_data(COMPLETE)) is None


@pytest.mark.parametrize(
    ("missing", "error"),
    [
        ({"cluster_cidr": ""}, "CIDR is missing in cluster configuration"),
        ({"cluster_endpoint": ""}, "Apiserver endpoint is missing in cluster configuration"),
        ({"ca_bundle": ""}, "Certificate authority is missing in cluster configuration"),
    ],
)
def test_nodeadm_refuses_a_node_config_without_cidr_endpoint_or_ca(
    nodeadm_validate: NodeadmValidate, missing: dict[str, str], error: str
) -> None:
    broken = dataclasses.replace(COMPLETE, **missing)
    assert nodeadm_validate(nodeadm_user_data(broken)) == f"validate: {error}"


def test_nodeadm_validation_also_refuses_kubelet_settings_the_kubelet_would_not_read(
    nodeadm_validate: NodeadmValidate,
) -> None:
    typo = dataclasses.replace(COMPLETE, kubelet={"maxPod": 29})
    assert "unknown field" in (nodeadm_validate(nodeadm_user_data(typo)) or "")
    wrong_type = dataclasses.replace(COMPLETE, kubelet={"maxPods": "29"})
    assert "maxPods" in (nodeadm_validate(nodeadm_user_data(wrong_type)) or "")


# -- every NodeConfig karpy renders for the examples passes ------------------------------


async def test_examples_aws_node_config_passes_nodeadm_through_moto(
    aws_provider: AWSCloudProvider, aws_account: Account, nodeadm_validate: NodeadmValidate
) -> None:
    """examples/aws launched against moto: the launch template's user data, read back
    from EC2, passes nodeadm's validation and carries the discovered cluster."""
    text = (EXAMPLES / "ec2nodeclass.yaml").read_text().replace("my-cluster", CLUSTER)
    node_class = await resolved(aws_provider.clients, yaml.safe_load(text))
    assert node_class.status_conditions().is_true("Ready"), node_class.status.conditions
    launched = await aws_provider.create(_claim(requirements=[ON_DEMAND]))
    try:
        ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=aws_account.url)
        names = await aws_provider.launch_templates.list_names(node_class="default")
        versions = [
            ec2.describe_launch_template_versions(LaunchTemplateName=n, Versions=["$Latest"])[
                "LaunchTemplateVersions"
            ][0]
            for n in names
        ]
        user_data = [
            base64.b64decode(v["LaunchTemplateData"]["UserData"]).decode() for v in versions
        ]
        assert user_data
        for text in user_data:
            assert nodeadm_validate(text) is None
            (config,) = node_configs(text)
            cluster = config["spec"]["cluster"]
            assert cluster["cidr"] == SERVICE_CIDR  # from EKS DescribeCluster
            assert cluster["certificateAuthority"] == aws_account.ca_bundle
            assert cluster["apiServerEndpoint"] == aws_provider.settings.cluster_endpoint
        # the example's own class renders its kubelet.maxPods
        own = await render(aws_provider, node_class)
        assert nodeadm_validate(own) is None
        assert node_configs(own)[-1]["spec"]["kubelet"]["config"]["maxPods"] == 110
    finally:
        await aws_provider.delete(launched)


@pytest.mark.parametrize("source", sorted(KARPENTER_AL2023))
async def test_karpenter_examples_render_node_configs_nodeadm_accepts(
    dns_provider: AWSCloudProvider, nodeadm_validate: NodeadmValidate, source: str
) -> None:
    spec = KARPENTER_AL2023[source]
    node_class = _node_class("example", **spec)
    text = await render(dns_provider, node_class, max_pods=17)
    assert nodeadm_validate(text) is None
    ours = node_configs(text)[-1]
    kubelet = ours["spec"]["kubelet"]["config"]
    assert kubelet["maxPods"] == 17
    assert kubelet["clusterDNS"] == [DNS_IP]
    assert kubelet["registerWithTaints"] == [
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
    ]
    user = spec.get("userData")
    if user:  # the user's parts come first, unchanged, then karpy's NodeConfig
        parsed = email.message_from_string(user).get_payload()
        parts = email.message_from_string(text).get_payload()
        assert isinstance(parsed, list) and isinstance(parts, list)
        theirs = [p for p in parsed if p.get("Content-Type")]  # not an open archive's tail
        assert len(parts) == len(theirs) + 1
        for mine, their in zip(parts, theirs, strict=False):
            assert mine.get_content_type() == their.get_content_type()
            assert mine.get_payload() == their.get_payload()
    if spec.get("instanceStorePolicy") == "RAID0":
        assert ours["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}


@pytest.mark.parametrize("source", sorted(KARPENTER_BOTTLEROCKET))
async def test_karpenter_bottlerocket_examples_render_toml_with_their_settings(
    dns_provider: AWSCloudProvider, aws_account: Account, source: str
) -> None:
    spec = KARPENTER_BOTTLEROCKET[source]
    text = await render(dns_provider, _node_class("example", **spec), max_pods=17)
    kubernetes = tomllib.loads(text)["settings"]["kubernetes"]
    assert kubernetes["cluster-name"] == CLUSTER
    assert kubernetes["api-server"] == dns_provider.settings.cluster_endpoint
    assert kubernetes["cluster-certificate"] == aws_account.ca_bundle
    assert kubernetes["cluster-dns-ip"] == DNS_IP
    assert kubernetes["max-pods"] == 17
    assert kubernetes["node-taints"] == {"karpenter.sh/unregistered": [":NoExecute"]}
    if source == "br-custom-userdata.yaml":
        assert kubernetes["kube-api-qps"] == 30


@pytest.mark.parametrize("source", sorted(KARPENTER_CUSTOM))
async def test_karpenter_custom_family_examples_pass_user_data_through(
    aws_provider: AWSCloudProvider, source: str
) -> None:
    spec = KARPENTER_CUSTOM[source]
    assert await render(aws_provider, _node_class("example", **spec)) == spec["userData"]


# -- AL2 and Windows: never launched ----------------------------------------------------


@pytest.mark.parametrize("source", sorted(KARPENTER_UNRENDERED))
async def test_karpenter_al2_and_windows_examples_are_not_ready(
    aws_clients: AWSClients, aws_account: Account, source: str
) -> None:
    spec = dict(KARPENTER_UNRENDERED[source])
    if any("id" in t for t in spec["amiSelectorTerms"]):
        # the example's placeholder ids (ami-123) do not exist in moto; an AMI that does
        # keeps the AMI resolution out of the way of what is checked here
        spec["amiSelectorTerms"] = [{"id": aws_account.amis["x86_64"]}]
    node_class = await resolved(aws_clients, node_class_manifest("example", **spec))
    conditions = node_class.status_conditions()
    assert not conditions.is_true("Ready")
    validation = conditions.get("ValidationSucceeded")
    assert validation is not None and validation.status == "False"
    family = node_class.spec.ami_family_resolved()
    assert validation.reason == "UnsupportedAMIFamily"
    assert f"amiFamily {family}" in (validation.message or "")


@pytest.mark.parametrize("family", ["AL2", "Windows2022"])
async def test_an_al2_or_windows_class_never_launches(
    aws_provider: AWSCloudProvider, aws_account: Account, family: str
) -> None:
    """Against moto: the class resolves everything else (its AMI exists), is not Ready
    because of its family, and create launches nothing, even if asked."""
    manifest = node_class_manifest(
        "no-join", amiFamily=family, amiSelectorTerms=[{"id": aws_account.amis["x86_64"]}]
    )
    node_class = await resolved(aws_provider.clients, manifest)
    failed = {c.type for c in node_class.status.conditions if c.status == "False"}
    assert failed == {"ValidationSucceeded", "Ready"}

    async def get(name: str) -> EC2NodeClass | None:
        return node_class if name == "no-join" else None

    provider = AWSCloudProvider(
        settings=aws_provider.settings,
        clients=aws_provider.clients,
        node_classes=get,
        owns_clients=False,
        cluster=aws_provider.cluster,
    )
    before = provider.clients.calls["ec2:CreateFleet"]
    with pytest.raises(NodeClassNotReadyError, match=family):
        await provider.create(_claim("no-join", requirements=[ON_DEMAND]))
    # even a class someone marked Ready by hand is refused before any launch call
    forced = node_class.model_copy(deep=True)
    conditions = forced.status_conditions()
    conditions.set_true("ValidationSucceeded")
    forced.status.conditions = list(conditions.list())
    node_class = forced
    assert forced.status_conditions().is_true("Ready")
    with pytest.raises(NodeClassNotReadyError, match=f"amiFamily {family}"):
        await provider.create(_claim("no-join", requirements=[ON_DEMAND]))
    assert provider.clients.calls["ec2:CreateFleet"] == before
    assert await provider.launch_templates.list_names(node_class="no-join") == []


# -- cluster discovery ------------------------------------------------------------------


async def test_discovery_reads_eks_and_settings_override_it(
    aws_settings: AWSSettings, aws_clients: AWSClients, aws_account: Account
) -> None:
    facts = await ClusterDiscovery(aws_clients, aws_settings).resolve()
    assert facts.service_cidr == SERVICE_CIDR
    assert facts.ip_family == "ipv4"
    assert facts.ca_bundle == aws_account.ca_bundle
    # the endpoint setting wins over DescribeCluster's endpoint
    assert facts.endpoint == aws_settings.cluster_endpoint
    overridden = dataclasses.replace(
        aws_settings, cluster_cidr="10.7.0.0/16", cluster_ca_bundle="c2V0dGluZw=="
    )
    facts = await ClusterDiscovery(aws_clients, overridden).resolve()
    assert (facts.service_cidr, facts.ca_bundle) == ("10.7.0.0/16", "c2V0dGluZw==")
    without_endpoint = dataclasses.replace(aws_settings, cluster_endpoint="")
    facts = await ClusterDiscovery(aws_clients, without_endpoint).resolve()
    assert facts.endpoint.startswith("https://") and facts.endpoint.endswith(
        f".{REGION}.eks.amazonaws.com/"
    )


def _policy_for(cluster: str) -> list[dict[str, Any]]:
    """Karpenter's controller policy as deployed for ``cluster`` (it grants
    eks:DescribeCluster on that cluster only), beside the test cluster's: a role with
    both attached."""
    return [
        *IAMCheck.karpenter(cluster=cluster, region=REGION).statements,
        *IAMCheck.karpenter(cluster=CLUSTER, region=REGION).statements,
    ]


async def test_discovery_takes_the_ipv6_cidr_of_an_ipv6_cluster(
    aws_settings: AWSSettings, aws_clients: AWSClients, aws_account: Account, iam_check: IAMCheck
) -> None:
    eks = boto3.client("eks", region_name=REGION, endpoint_url=aws_account.url)
    name = "karpy-v6"
    if name not in eks.list_clusters()["clusters"]:
        eks.create_cluster(
            name=name,
            roleArn="arn:aws:iam::123456789012:role/c",
            resourcesVpcConfig={"subnetIds": list(aws_account.subnets)},
            kubernetesNetworkConfig={"ipFamily": "ipv6"},
        )
    # EKS picks an IPv6 cluster's service CIDR itself (CreateCluster takes none) and
    # still reports an IPv4 one; moto keeps what it was given: set EKS's answer there
    eks_backends[DEFAULT_ACCOUNT_ID][REGION].clusters[name].kubernetes_network_config = {
        "ipFamily": "ipv6",
        "serviceIpv4Cidr": "10.9.0.0/16",
        "serviceIpv6Cidr": "fd30:1c53:5f8a::/108",
    }
    settings = dataclasses.replace(aws_settings, cluster_name=name)
    with iam_check.policy(_policy_for(name)):
        facts = await ClusterDiscovery(aws_clients, settings).resolve()
    assert (facts.service_cidr, facts.ip_family) == ("fd30:1c53:5f8a::/108", "ipv6")


async def test_a_burst_of_launches_asks_eks_once(
    aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    """Many NodeClaims launch at once and each needs the cluster's facts: one
    DescribeCluster serves them all (the benchmark's burst of 100 made 100)."""
    no_endpoint = dataclasses.replace(aws_settings, cluster_endpoint="")
    discovery = ClusterDiscovery(aws_clients, no_endpoint)
    before = aws_clients.calls["eks:DescribeCluster"]
    facts = await asyncio.gather(*(discovery.resolve() for _ in range(20)))
    assert aws_clients.calls["eks:DescribeCluster"] - before == 1
    assert all(f.service_cidr == SERVICE_CIDR for f in facts)


async def test_the_kube_client_ca_is_the_fallback_ca(
    aws_settings: AWSSettings, tmp_path: Path
) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nkarpy\n-----END CERTIFICATE-----\n")

    class Configuration:
        ssl_ca_cert = str(ca)

    class ApiClient:
        configuration = Configuration()

    bundle = kube_client_ca_bundle(ApiClient())
    assert base64.b64decode(bundle) == ca.read_bytes()
    # no AWS client at all: settings and the kube client's CA are what is known
    facts = await ClusterDiscovery(None, aws_settings, kube_ca_bundle=bundle).resolve()
    assert facts.ca_bundle == bundle
    setting = dataclasses.replace(aws_settings, cluster_ca_bundle="c2V0dGluZw==")
    assert ClusterDiscovery(None, setting, kube_ca_bundle=bundle).facts.ca_bundle == (
        "c2V0dGluZw=="
    )


async def test_without_a_service_cidr_the_class_is_not_ready_and_nothing_launches(
    aws_settings: AWSSettings, aws_clients: AWSClients, iam_check: IAMCheck
) -> None:
    """Not EKS (DescribeCluster finds no such cluster) and no clusterCIDR setting: the
    status names what is missing and the setting that gives it; create never calls
    CreateFleet."""
    settings = dataclasses.replace(aws_settings, cluster_name="not-an-eks-cluster")
    discovery = ClusterDiscovery(aws_clients, settings)
    with iam_check.policy(_policy_for("not-an-eks-cluster")):
        facts = await discovery.resolve()
        assert facts.service_cidr == ""
        node_class = _node_class("no-cidr")
        resolution = await resolve_status(
            aws_clients,
            node_class,
            cluster_name=CLUSTER,
            region=REGION,
            k8s_version=K8S_VERSION,
            cluster=facts,
        )
        ok, reason, message = resolution.conditions["ValidationSucceeded"]
        assert not ok and reason == "ClusterCIDRResolutionFailed"
        assert "service CIDR" in message and "clusterCIDR" in message
        assert not resolution.ready

        ready = await resolved(aws_clients, node_class_manifest("no-cidr"))

        async def get(name: str) -> EC2NodeClass | None:
            return ready

        provider = AWSCloudProvider(
            settings=settings,
            clients=aws_clients,
            node_classes=get,
            owns_clients=False,
            cluster=discovery,
        )
        before = aws_clients.calls["ec2:CreateFleet"]
        with pytest.raises(NodeClassNotReadyError, match="clusterCIDR"):
            await provider.create(_claim("no-cidr", requirements=[ON_DEMAND]))
        assert aws_clients.calls["ec2:CreateFleet"] == before
        # the setting completes it
        cidr = dataclasses.replace(settings, cluster_cidr="10.1.0.0/16")
        given = ClusterDiscovery(aws_clients, cidr)
        assert (await given.resolve()).missing_for("AL2023") == [
            "the cluster CA bundle (set the aws provider setting clusterCABundle)"
        ]


def test_the_cluster_cidr_setting_is_checked() -> None:
    env = {"AWS_REGION": REGION}
    parsed = AWSSettings.from_settings({"clusterCIDR": "fd00::/108"}, cluster_name="c", environ=env)
    assert parsed.cluster_cidr == "fd00::/108"
    from_env = AWSSettings.from_settings(
        {}, cluster_name="c", environ={**env, "KARPY_CLUSTER_CIDR": "10.100.0.0/16"}
    )
    assert from_env.cluster_cidr == "10.100.0.0/16"
    with pytest.raises(AWSSettingsError, match=r"clusterCIDR='10\.100\.0\.0/33'"):
        AWSSettings.from_settings({"clusterCIDR": "10.100.0.0/33"}, cluster_name="c", environ=env)


def test_missing_facts_name_the_setting_per_family() -> None:
    facts = ClusterFacts(name="c")
    assert [m.split(" (")[0] for m in facts.missing_for("AL2023")] == [
        "the API server endpoint",
        "the cluster CA bundle",
        "the service CIDR",
    ]
    assert len(facts.missing_for("Bottlerocket")) == 2
    assert facts.missing_for("Custom") == []


# -- maxPods and clusterDNS -------------------------------------------------------------


async def test_max_pods_is_written_per_launch_template_with_reserved_enis(
    aws_settings: AWSSettings,
    aws_clients: AWSClients,
    aws_account: Account,
    default_node_class: EC2NodeClass,
    nodeadm_validate: NodeadmValidate,
) -> None:
    """reservedENIs=1: m5.large (3 ENIs x 10 IPs) gets maxPods 20 and m5.xlarge (4 x 15)
    44, each in its own launch template of the CreateFleet request, as Karpenter groups
    launch templates by maxPods."""
    settings = dataclasses.replace(aws_settings, reserved_enis=1)

    async def get(name: str) -> EC2NodeClass | None:
        return default_node_class

    provider = AWSCloudProvider(
        settings=settings, clients=aws_clients, node_classes=get, owns_clients=False
    )
    sent: list[dict[str, Any]] = []
    original = aws_clients.ec2.create_fleet

    async def record(**kwargs: Any) -> Any:
        sent.append(kwargs)
        return await original(**kwargs)

    aws_clients.ec2.create_fleet = record
    try:
        launched = await provider.create(
            _claim(
                requirements=[
                    ON_DEMAND,
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["m5.large", "m5.xlarge"],
                    },
                ]
            )
        )
    finally:
        aws_clients.ec2.create_fleet = original
    try:
        (request,) = sent
        ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=aws_account.url)
        by_type: dict[str, int] = {}
        for config in request["LaunchTemplateConfigs"]:
            name = config["LaunchTemplateSpecification"]["LaunchTemplateName"]
            version = ec2.describe_launch_template_versions(
                LaunchTemplateName=name, Versions=["$Latest"]
            )["LaunchTemplateVersions"][0]
            text = base64.b64decode(version["LaunchTemplateData"]["UserData"]).decode()
            assert nodeadm_validate(text) is None
            max_pods = node_configs(text)[-1]["spec"]["kubelet"]["config"]["maxPods"]
            for override in config["Overrides"]:
                by_type[override["InstanceType"]] = max_pods
        infos = provider.catalog.infos
        assert by_type == {
            "m5.large": eni_limited_pods(infos["m5.large"], reserved_enis=1),
            "m5.xlarge": eni_limited_pods(infos["m5.xlarge"], reserved_enis=1),
        }
        assert by_type == {"m5.large": 20, "m5.xlarge": 44}
    finally:
        await provider.delete(launched)


async def test_the_users_cluster_dns_wins_over_kube_dns(
    dns_provider: AWSCloudProvider, nodeadm_validate: NodeadmValidate
) -> None:
    node_class = _node_class("dns", kubelet={"clusterDNS": ["169.254.20.10"], "maxPods": 50})
    text = await render(dns_provider, node_class, max_pods=17)
    assert nodeadm_validate(text) is None
    kubelet = node_configs(text)[-1]["spec"]["kubelet"]["config"]
    assert (kubelet["clusterDNS"], kubelet["maxPods"]) == (["169.254.20.10"], 50)


FULL_KUBELET: dict[str, Any] = {
    "maxPods": 50,
    "podsPerCore": 10,
    "systemReserved": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"},
    "kubeReserved": {"cpu": "200m", "memory": "200Mi", "ephemeral-storage": "3Gi"},
    "evictionHard": {"memory.available": "5%", "nodefs.available": "10%"},
    "evictionSoft": {"memory.available": "500Mi"},
    "evictionSoftGracePeriod": {"memory.available": "1m"},
    "evictionMaxPodGracePeriod": 60,
    "imageGCHighThresholdPercent": 85,
    "imageGCLowThresholdPercent": 80,
    "cpuCFSQuota": True,
}


async def test_the_whole_kubelet_config_reaches_the_node_config(
    dns_provider: AWSCloudProvider, nodeadm_validate: NodeadmValidate
) -> None:
    node_class = _node_class("kubelet", kubelet=FULL_KUBELET)
    claim = _claim(labels={"team": "a"})
    claim.spec.taints = []
    text = await render(dns_provider, node_class, claim=claim)
    assert nodeadm_validate(text) is None
    kubelet = node_configs(text)[-1]["spec"]
    assert kubelet["kubelet"]["config"] == {
        **FULL_KUBELET,
        "clusterDNS": [DNS_IP],
        "registerWithTaints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
    }
    assert kubelet["kubelet"]["flags"] == ["--node-labels=karpenter.sh/nodepool=team-a,team=a"]


# -- Bottlerocket -----------------------------------------------------------------------


async def test_bottlerocket_merges_the_users_kubernetes_table_and_the_kubelet_settings(
    dns_provider: AWSCloudProvider,
) -> None:
    user = (
        "[settings.kubernetes]\n"
        "kube-api-qps = 30\n"
        'cluster-name = "not-this"\n'
        "[settings.kubernetes.node-labels]\n"
        '"mine" = "yes"\n'
        "[settings.kubernetes.node-taints]\n"
        '"gone" = ["x:NoSchedule"]\n'
        "[settings.host-containers.admin]\n"
        "enabled = true\n"
    )
    node_class = _node_class(
        "br",
        amiSelectorTerms=[{"alias": "bottlerocket@latest"}],
        kubelet=FULL_KUBELET,
        userData=user,
        instanceStorePolicy="RAID0",
    )
    text = await render(dns_provider, node_class, claim=_claim(labels={"team": "a"}))
    settings = tomllib.loads(text)["settings"]
    kubernetes = settings["kubernetes"]
    assert kubernetes["kube-api-qps"] == 30  # the user's own setting survives
    assert kubernetes["cluster-name"] == CLUSTER  # karpy's cluster wins
    assert kubernetes["node-labels"] == {
        "mine": "yes",
        "team": "a",
        "karpenter.sh/nodepool": "team-a",
    }
    assert kubernetes["node-taints"] == {"karpenter.sh/unregistered": [":NoExecute"]}
    assert settings["host-containers"]["admin"]["enabled"] is True
    assert {k: kubernetes[k] for k in kubernetes if k not in _CLUSTER_KEYS} == {
        "kube-api-qps": 30,
        "max-pods": 50,
        "cluster-dns-ip": DNS_IP,
        "system-reserved": FULL_KUBELET["systemReserved"],
        "kube-reserved": FULL_KUBELET["kubeReserved"],
        "eviction-hard": FULL_KUBELET["evictionHard"],
        "eviction-soft": FULL_KUBELET["evictionSoft"],
        "eviction-soft-grace-period": FULL_KUBELET["evictionSoftGracePeriod"],
        "eviction-max-pod-grace-period": 60,
        "image-gc-high-threshold-percent": "85",
        "image-gc-low-threshold-percent": "80",
        "cpu-cfs-quota": True,
    }
    raid = settings["bootstrap-commands"]["000-mount-instance-storage"]
    assert raid["commands"][0] == ["apiclient", "ephemeral-storage", "init"]
    assert raid["commands"][1][:3] == ["apiclient", "ephemeral-storage", "bind"]
    assert (raid["mode"], raid["essential"]) == ("always", True)


_CLUSTER_KEYS = {
    "cluster-name",
    "api-server",
    "cluster-certificate",
    "node-labels",
    "node-taints",
}


@pytest.mark.parametrize(
    ("alias", "user", "error"),
    [
        ("bottlerocket@latest", "[settings", "spec.userData is not valid TOML"),
        (
            "al2023@latest",
            "MIME-Version: 1.0\nContent-Type: text/x-shellscript\n\necho hi\n",
            "spec.userData starts with MIME headers but is not a multipart archive",
        ),
    ],
)
async def test_user_data_that_cannot_be_merged_makes_the_class_not_ready(
    aws_provider: AWSCloudProvider, alias: str, user: str, error: str
) -> None:
    manifest = node_class_manifest("bad-user-data", amiSelectorTerms=[{"alias": alias}])
    manifest["spec"]["userData"] = user  # type: ignore[index]
    node_class = await resolved(aws_provider.clients, manifest)
    validation = node_class.status_conditions().get("ValidationSucceeded")
    assert validation is not None and validation.status == "False"
    assert validation.reason == "UserDataInvalid"
    assert (validation.message or "").startswith(error)
    # and were it launched anyway, the launch is refused by name, before any call
    with pytest.raises(NodeClassNotReadyError, match=re.escape(error)):
        await render(aws_provider, node_class)


async def test_bottlerocket_x86_64_image_is_also_the_neuron_variant(
    aws_clients: AWSClients, aws_account: Account
) -> None:
    params = alias_parameters("bottlerocket@v1.26.0", K8S_VERSION)
    x86 = f"/aws/service/bottlerocket/aws-k8s-{K8S_VERSION}/x86_64/1.26.0/image_id"
    assert params[x86] == ("x86_64", ("standard", "neuron"))
    seed_public_parameter(REGION, x86, aws_account.amis["x86_64"])
    amis = await resolve_amis(
        aws_clients,
        _node_class(
            "n", amiSelectorTerms=[{"alias": "bottlerocket@v1.26.0"}]
        ).spec.ami_selector_terms,
        k8s_version=K8S_VERSION,
    )
    assert {a.id for a in amis} == {aws_account.amis["x86_64"]}
    accelerated = [
        a
        for a in amis
        if any(
            r.key == "karpenter.k8s.aws/instance-accelerator-count" and r.operator == "Exists"
            for r in a.requirements
        )
    ]
    assert len(amis) == 2 and len(accelerated) == 1


# -- MIME --------------------------------------------------------------------------------


def test_a_users_mime_archive_is_merged_part_by_part(nodeadm_validate: NodeadmValidate) -> None:
    options = dataclasses.replace(COMPLETE, custom_user_data=_AL2023_MIME)
    text = nodeadm_user_data(options)
    assert nodeadm_validate(text) is None
    parts = email.message_from_string(text).get_payload()
    assert isinstance(parts, list)
    assert [p.get_content_type() for p in parts] == [
        "application/node.eks.aws",
        "text/x-shellscript",
        "application/node.eks.aws",
    ]
    assert "strategy: Mount" in str(parts[0].get_payload())
    assert 'echo "Hello, AL2023!"' in str(parts[1].get_payload())
    assert node_configs(text)[-1]["spec"]["cluster"]["name"] == "c1"


# -- the status controller wires discovery in --------------------------------------------


async def test_the_status_controller_reports_a_cluster_it_cannot_discover(
    aws_settings: AWSSettings, aws_clients: AWSClients, iam_check: IAMCheck
) -> None:
    """Not EKS and no clusterCIDR: the EC2NodeClass's status says ValidationSucceeded
    False, naming the service CIDR and the setting; kube-dns is read from the cluster."""
    client = FakeClient()
    client.add(EC2_NODE_CLASS_KIND, node_class_manifest("status-no-cidr"))
    client.add(
        SERVICE,
        {
            "metadata": {"name": "kube-dns", "namespace": "kube-system"},
            "spec": {"clusterIP": DNS_IP},
        },
    )
    settings = dataclasses.replace(aws_settings, cluster_name="not-an-eks-cluster")
    discovery = ClusterDiscovery(aws_clients, settings, kube_dns=kube_dns_from(client))
    provider = AWSCloudProvider(
        settings=settings,
        clients=aws_clients,
        node_classes=node_classes_from(client),
        owns_clients=False,
        cluster=discovery,
    )
    controller = NodeClassStatusController(provider, client, k8s_version=K8S_VERSION)
    with iam_check.policy(_policy_for("not-an-eks-cluster")):
        await controller.reconcile(Request("", "status-no-cidr"))
    stored = client.peek(EC2_NODE_CLASS_KIND, "status-no-cidr")
    assert stored is not None
    by_type = {c["type"]: c for c in stored["status"]["conditions"]}
    validation = by_type["ValidationSucceeded"]
    assert (validation["status"], validation["reason"]) == (
        "False",
        "ClusterCIDRResolutionFailed",
    )
    assert "service CIDR" in validation["message"] and "clusterCIDR" in validation["message"]
    assert by_type["Ready"]["status"] == "False"
    assert discovery.facts.dns_ip == DNS_IP


async def test_a_headless_or_missing_kube_dns_gives_no_cluster_dns() -> None:
    client = FakeClient()
    assert await kube_dns_from(client)() is None
    client.add(
        SERVICE,
        {
            "metadata": {"name": "kube-dns", "namespace": "kube-system"},
            "spec": {"clusterIP": "None"},
        },
    )
    assert await kube_dns_from(client)() is None
