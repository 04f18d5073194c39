"""The Helm charts, rendered with the helm built from its Go module (no cluster): the
values of seed-style AWS and Azure installs become the objects Karpenter's chart would
make, with karpy's settings under Karpenter's env names; every Karpenter values key is
accepted; deploy/rbac.yaml is the chart's RBAC; karpy-crd serves one provider's set."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from charts_support import (
    AWS_SEED,
    AZURE_SEED,
    CHART,
    CRD_CHART,
    REPO,
    by_kind,
    container_env,
    helm,
    one,
    render,
)

from karpy.apis import crdgen
from karpy.cloudprovider.kwok import RECORD_NAMESPACE
from karpy.options import add_run_arguments, options_from_args

#: Every values key of Karpenter's chart (aws/karpenter-provider-aws charts/karpenter,
#: v1.14), as dotted paths: a values file written for Karpenter must install karpy.
KARPENTER_KEYS = """
nameOverride fullnameOverride additionalLabels additionalAnnotations imagePullPolicy
imagePullSecrets service.annotations serviceAccount.create serviceAccount.name
serviceAccount.annotations additionalClusterRoleRules serviceMonitor.enabled
serviceMonitor.additionalLabels serviceMonitor.relabelings serviceMonitor.metricRelabelings
serviceMonitor.endpointConfig serviceMonitor.sampleLimit replicas revisionHistoryLimit
strategy podLabels podAnnotations podDisruptionBudget.name podDisruptionBudget.maxUnavailable
podSecurityContext priorityClassName terminationGracePeriodSeconds hostNetwork schedulerName
dnsPolicy dnsConfig initContainers nodeSelector affinity topologySpreadConstraints tolerations
extraVolumes controller.containerName controller.image.repository controller.image.tag
controller.image.digest controller.env controller.envFrom
controller.securityContext.appArmorProfile controller.securityContext.seLinuxOptions
controller.securityContext.seccompProfile controller.resources controller.extraVolumeMounts
controller.sidecarContainer controller.sidecarVolumeMounts controller.metrics.port
controller.healthProbe.port logLevel logOutputPaths logErrorOutputPaths
settings.batchMaxDuration settings.batchIdleDuration settings.preferencePolicy
settings.minValuesPolicy settings.clusterCABundle settings.clusterName
settings.clusterEndpoint settings.isolatedVPC settings.eksControlPlane
settings.vmMemoryOverheadPercent settings.interruptionQueue settings.enableZonalShift
settings.reservedENIs settings.ignoreDRARequests settings.disableClusterStateObservability
settings.disableDryRun settings.amiRefreshInterval settings.subnetRefreshInterval
settings.featureGates.nodeRepair settings.featureGates.nodeOverlay
settings.featureGates.reservedCapacity settings.featureGates.spotToSpotConsolidation
settings.featureGates.staticCapacity settings.featureGates.capacityBuffer
settings.awsFeatureGates.nodeClassCEL
""".split()  # noqa: SIM905 - easier to read as words


def values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return loaded


def has_path(tree: dict[str, Any], dotted: str) -> bool:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_helm_lint_passes_for_both_charts() -> None:
    for args in (
        (str(CHART), "--set", "settings.clusterName=lint"),
        (str(CHART), *AWS_SEED),
        (str(CHART), *AZURE_SEED),
        (str(CRD_CHART),),
        (str(CRD_CHART), "--set", "cloudProvider=aws"),
    ):
        out = helm("lint", "--strict", *args, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout


def test_values_have_every_karpenter_key_and_the_readme_documents_them() -> None:
    tree = values()
    missing = [k for k in KARPENTER_KEYS if not has_path(tree, k)]
    assert not missing, f"charts/karpy/values.yaml lacks Karpenter's keys {missing}"
    readme = (CHART / "README.md").read_text()
    line = next(line for line in readme.splitlines() if "logOutputPaths" in line)
    assert "LOG_OUTPUT_PATHS" in line and "LOG_ERROR_OUTPUT_PATHS" in line
    # karpy run reads these since issue 27: the chart passes them on
    line = next(line for line in readme.splitlines() if "preferencePolicy" in line)
    assert "PREFERENCE_POLICY" in line and "MIN_VALUES_POLICY" in line


def test_scheduling_policies_become_karpenters_variables() -> None:
    env = {e["name"]: e.get("value") for e in one(
        render("--set", "settings.clusterName=c", "--set", "settings.minValuesPolicy=BestEffort"),
        "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["PREFERENCE_POLICY"] == "Respect"
    assert env["MIN_VALUES_POLICY"] == "BestEffort"


def test_aws_seed_install_renders_karpenters_objects_with_its_values() -> None:
    docs = render(*AWS_SEED)
    kinds = sorted({d["kind"] for d in docs})
    assert kinds == [
        "ClusterRole", "ClusterRoleBinding", "Deployment", "PodDisruptionBudget", "Role",
        "RoleBinding", "Service", "ServiceAccount",
    ]  # fmt: skip
    sa = one(docs, "ServiceAccount")
    assert sa["metadata"]["name"] == "karpy" and sa["metadata"]["namespace"] == "kube-system"
    assert sa["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/KarpyController-seed-cluster"
    }
    deploy = one(docs, "Deployment")
    spec = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["replicas"] == 2
    assert spec["serviceAccountName"] == "karpy"
    assert spec["priorityClassName"] == "system-cluster-critical"
    (container,) = spec["containers"]
    assert container["resources"] == {
        "requests": {"cpu": 1, "memory": "1Gi"},
        "limits": {"cpu": 1, "memory": "1Gi"},
    }
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 65532
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http-metrics": 8080, "http": 8081}
    env = container_env(deploy)
    assert env["CLOUD_PROVIDER"] == "aws"
    assert env["CLUSTER_NAME"] == "seed-cluster"
    assert env["INTERRUPTION_QUEUE"] == "seed-cluster"
    assert env["BATCH_MAX_DURATION"] == "10s" and env["BATCH_IDLE_DURATION"] == "1s"
    assert env["VM_MEMORY_OVERHEAD_PERCENT"] == "0.075"
    assert env["SYSTEM_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]
    service = one(docs, "Service")
    assert service["spec"]["ports"][0]["port"] == 8080
    assert service["spec"]["selector"] == deploy["spec"]["selector"]["matchLabels"]
    roles = {d["metadata"]["name"]: d for d in by_kind(docs, "ClusterRole")}
    assert set(roles) == {"karpy", "karpy-aws"}
    groups = {g for r in roles["karpy-aws"]["rules"] for g in r["apiGroups"]}
    assert groups == {"karpenter.k8s.aws"}


def test_azure_seed_install_carries_workload_identity_and_azure_rbac() -> None:
    docs = render(*AZURE_SEED)
    sa = one(docs, "ServiceAccount")
    assert sa["metadata"]["annotations"] == {
        "azure.workload.identity/client-id": "00000000-0000-0000-0000-000000000001"
    }
    deploy = one(docs, "Deployment")
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert labels["azure.workload.identity/use"] == "true"
    env = container_env(deploy)
    assert env["CLOUD_PROVIDER"] == "azure"
    assert "INTERRUPTION_QUEUE" not in env and "AWS_FEATURE_GATES" not in env
    roles = {d["metadata"]["name"] for d in by_kind(docs, "ClusterRole")}
    assert roles == {"karpy", "karpy-azure"}


def test_the_azure_bootstrap_token_comes_from_the_named_secret() -> None:
    secret = ["--set", "settings.kubeletBootstrapTokenSecret.name=karpy-bootstrap-token"]
    env = container_env(one(render(*AZURE_SEED, *secret), "Deployment"))
    assert env["KUBELET_BOOTSTRAP_TOKEN"] == {
        "secretKeyRef": {"name": "karpy-bootstrap-token", "key": "token"}
    }
    other_key = [*secret, "--set", "settings.kubeletBootstrapTokenSecret.key=bootstrap"]
    env = container_env(one(render(*AZURE_SEED, *other_key), "Deployment"))
    assert env["KUBELET_BOOTSTRAP_TOKEN"]["secretKeyRef"]["key"] == "bootstrap"
    # only the Azure provider joins nodes with it
    aws = container_env(one(render(*AWS_SEED, *secret), "Deployment"))
    assert "KUBELET_BOOTSTRAP_TOKEN" not in aws


def test_pod_placement_gets_the_pods_own_selector_as_karpenters_chart_does() -> None:
    spec = one(render("--set", "settings.clusterName=c"), "Deployment")["spec"]["template"]["spec"]
    selector = {"app.kubernetes.io/name": "karpy", "app.kubernetes.io/instance": "karpy"}
    (anti,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti == {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": selector},
    }
    (spread,) = spec["topologySpreadConstraints"]
    assert spread["labelSelector"] == {"matchLabels": selector}
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]


def run_options(env: dict[str, Any]) -> Any:
    """What ``karpy run`` makes of the container's environment (no flags, like the pod)."""
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    plain = {k: v for k, v in env.items() if isinstance(v, str)}
    return options_from_args(parser.parse_args([]), plain)


def test_karpy_run_accepts_the_environment_the_chart_gives_it() -> None:
    # Every feature gate on: the chart passes each under Karpenter's name, all of which
    # karpy knows (an unknown one would make it exit 2 at start-up).
    gates = [
        "--set", "settings.featureGates.spotToSpotConsolidation=true",
        "--set", "settings.featureGates.nodeRepair=true",
        "--set", "settings.featureGates.capacityBuffer=true",
        "--set", "settings.batchMaxDuration=20s",
    ]  # fmt: skip
    env = container_env(one(render(*AWS_SEED, *gates), "Deployment"))
    assert "CapacityBuffer=true" in env["FEATURE_GATES"].split(",")
    options = run_options(env)
    assert options.settings.feature_gates.capacity_buffer
    assert env["IGNORE_DRA_REQUESTS"] == "true" and options.settings.ignore_dra_requests
    off = container_env(one(render(*AWS_SEED, "--set", "settings.ignoreDRARequests=false"),
                            "Deployment"))
    assert not run_options(off).settings.ignore_dra_requests
    assert options.cloud_provider == "aws"
    assert options.settings.cluster_name == "seed-cluster"
    assert options.settings.batch_max_duration == 20.0
    assert options.settings.feature_gates.spot_to_spot_consolidation is True
    assert options.settings.feature_gates.node_repair is True
    assert options.leader_elect is True
    assert options.metrics_bind_address == ":8080"
    assert options.health_probe_bind_address == ":8081"


def _lease_role(docs: list[dict[str, Any]]) -> tuple[str, list[str], str]:
    (role,) = [d for d in by_kind(docs, "Role") if "leases" in str(d["rules"])]
    (binding,) = [d for d in by_kind(docs, "RoleBinding")
                  if d["roleRef"]["name"] == role["metadata"]["name"]]
    (named,) = [r for r in role["rules"] if "resourceNames" in r]
    assert named["verbs"] == ["update"]
    assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]
    subject = binding["subjects"][0]
    return role["metadata"]["namespace"], named["resourceNames"], subject["namespace"]


def test_the_lease_role_follows_the_lease_karpy_run_is_given() -> None:
    # Karpenter's chart: Lease karpenter-leader-election in the release namespace.
    assert _lease_role(render("--set", "settings.clusterName=c", namespace="karpenter")) == (
        "karpenter", ["karpenter-leader-election"], "karpenter")
    moved = render(
        "--set", "settings.clusterName=c",
        "--set", "controller.env[0].name=LEADER_ELECTION_NAME",
        "--set", "controller.env[0].value=karpy-leader",
        "--set", "controller.env[1].name=LEADER_ELECTION_NAMESPACE",
        "--set", "controller.env[1].value=ops",
        namespace="karpenter",
    )  # fmt: skip
    assert _lease_role(moved) == ("ops", ["karpy-leader"], "karpenter")
    options = run_options(container_env(one(moved, "Deployment")))
    assert (options.leader_election_name, options.leader_election_namespace) == (
        "karpy-leader", "ops")


def test_karpenter_azures_webhook_values_install_and_serve_nothing() -> None:
    """Karpenter-Azure's values turn its webhooks on by default (webhook.enabled: true):
    such a file installs karpy, which serves v1 only and opens no webhook port, asks for
    no webhook RBAC and sets none of the webhook variables."""
    webhook = ["--set", "webhook.enabled=true", "--set", "webhook.port=9443"]
    docs = render(*AZURE_SEED, *webhook)
    assert docs == render(*AZURE_SEED)
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert {p["containerPort"] for p in container["ports"]} == {8080, 8081}
    env = container_env(one(docs, "Deployment"))
    assert not {"DISABLE_WEBHOOK", "WEBHOOK_PORT", "WEBHOOK_METRICS_PORT"} & set(env)
    readme = (CHART / "README.md").read_text()
    line = next(line for line in readme.splitlines() if "`webhook." in line)
    assert "ignored" in line


def test_log_paths_other_than_karpenters_defaults_reach_karpy_run(tmp_path: Path) -> None:
    """logOutputPaths / logErrorOutputPaths become LOG_OUTPUT_PATHS /
    LOG_ERROR_OUTPUT_PATHS that karpy run reads; Karpenter's defaults are not passed, so
    karpy keeps logging to stderr."""
    default = container_env(one(render(*AWS_SEED), "Deployment"))
    assert "LOG_OUTPUT_PATHS" not in default and "LOG_ERROR_OUTPUT_PATHS" not in default
    assert run_options(default).log_output_paths == ("stderr",)
    log = tmp_path / "karpy.log"
    env = container_env(one(render(
        *AWS_SEED, "--set", f"logOutputPaths={{stdout,{log}}}",
        "--set", "logErrorOutputPaths={stdout}"), "Deployment"))  # fmt: skip
    assert env["LOG_OUTPUT_PATHS"] == f"stdout,{log}"
    options = run_options(env)
    assert options.log_output_paths == ("stdout", str(log))
    assert options.log_error_output_paths == ("stdout",)


def test_karpy_aws_reads_karpenter_aws_values_the_chart_passes() -> None:
    """settings.disableDryRun, amiRefreshInterval, subnetRefreshInterval, eksControlPlane
    and awsFeatureGates reach karpy-aws under Karpenter AWS's variables and take effect;
    enableZonalShift=true is refused naming it (karpy-aws has no zonal shift)."""
    from karpy_aws import AWSSettings, AWSSettingsError

    chosen = [
        "--set", "settings.disableDryRun=true",
        "--set", "settings.amiRefreshInterval=5m",
        "--set", "settings.subnetRefreshInterval=10m",
        "--set", "settings.eksControlPlane=true",
    ]  # fmt: skip
    env = container_env(one(render(*AWS_SEED, *chosen), "Deployment"))
    plain = {k: v for k, v in env.items() if isinstance(v, str)}
    parsed = AWSSettings.from_settings(
        {}, cluster_name="seed-cluster", environ={**plain, "AWS_REGION": "us-east-1"}
    )
    assert parsed.disable_dry_run and parsed.eks_control_plane
    assert (parsed.ami_refresh_interval, parsed.subnet_refresh_interval) == (300.0, 600.0)
    defaults = container_env(one(render(*AWS_SEED), "Deployment"))
    plain = {k: v for k, v in defaults.items() if isinstance(v, str)}
    assert plain["AWS_FEATURE_GATES"] == "NodeClassCEL=false"
    parsed = AWSSettings.from_settings(
        {}, cluster_name="seed-cluster", environ={**plain, "AWS_REGION": "us-east-1"}
    )
    assert not parsed.disable_dry_run and parsed.ami_refresh_interval == 60.0
    shifted = container_env(
        one(render(*AWS_SEED, "--set", "settings.enableZonalShift=true"), "Deployment")
    )
    plain = {k: v for k, v in shifted.items() if isinstance(v, str)}
    with pytest.raises(AWSSettingsError, match="ENABLE_ZONAL_SHIFT"):
        AWSSettings.from_settings(
            {}, cluster_name="seed-cluster", environ={**plain, "AWS_REGION": "us-east-1"}
        )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ((), "settings.clusterName"),
        (("--set", "settings.clusterName=c", "--set", "cloudProvider=gce"), "cloudProvider"),
    ],
)
def test_a_bad_install_fails_naming_the_value(args: tuple[str, ...], named: str) -> None:
    out = helm("template", "karpy", str(CHART), *args, check=False)
    assert out.returncode != 0
    assert named in out.stderr


def test_deploy_rbac_yaml_is_the_charts_rbac() -> None:
    fresh = subprocess.run(
        ["bash", str(REPO / "scripts" / "render-rbac.sh"), "-"],
        capture_output=True, text=True, check=True, timeout=300,
    ).stdout  # fmt: skip
    on_disk = (REPO / "deploy" / "rbac.yaml").read_text()
    assert on_disk == fresh, "deploy/rbac.yaml is stale: run scripts/render-rbac.sh"
    kinds = sorted(d["kind"] for d in yaml.safe_load_all(on_disk) if d)
    # kwok adds a namespace for its instance records, with a Role (and binding) there.
    assert kinds == [
        "ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "Namespace",
        "Role", "Role", "RoleBinding", "RoleBinding", "ServiceAccount",
    ]  # fmt: skip


def test_the_kwok_records_role_reaches_no_configmap_outside_their_namespace() -> None:
    """A Role cannot be narrowed to a label: one on kube-system's ConfigMaps would let
    karpy delete kube-proxy's, CoreDNS's and the CA bundle."""
    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "rbac.yaml").read_text()) if d]
    configmap_roles = {
        d["metadata"]["namespace"] for d in docs
        if d["kind"] == "Role"
        and any("configmaps" in rule.get("resources", ()) for rule in d["rules"])
    }  # fmt: skip
    assert configmap_roles == {RECORD_NAMESPACE}
    assert RECORD_NAMESPACE != "kube-system"
    assert {"kind": "Namespace", "name": RECORD_NAMESPACE} in [
        {"kind": d["kind"], "name": d["metadata"]["name"]} for d in docs
    ]


@pytest.mark.parametrize("provider", ["aws", "azure", "kwok"])
def test_the_crd_chart_installs_exactly_one_providers_set(provider: str) -> None:
    docs = render("--set", f"cloudProvider={provider}", chart=CRD_CHART, release="karpy-crd")
    generated = {
        name: yaml.safe_load(text.split("---\n", 1)[1])
        for name, text in crdgen.generate(provider=provider).items()
    }
    assert len(docs) == len(generated)
    by_name = {d["metadata"]["name"]: d for d in docs}
    for crd in generated.values():
        rendered = by_name[crd["metadata"]["name"]]
        assert rendered["spec"] == crd["spec"]
        assert rendered["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    pools = by_name["nodepools.karpenter.sh"]["spec"]["versions"][0]
    text = yaml.safe_dump(pools)
    assert ('label "accelerator" is restricted' in text) == (provider == "azure")
    out = helm("template", "x", str(CRD_CHART), "--set", "cloudProvider=gce", check=False)
    assert out.returncode != 0 and "cloudProvider" in out.stderr


def test_the_aws_provider_reads_its_settings_from_the_charts_environment() -> None:
    from karpy_aws import AWSSettings

    region = [
        "--set",
        "controller.env[0].name=AWS_REGION",
        "--set",
        "controller.env[0].value=eu-west-1",
    ]
    env = container_env(one(render(*AWS_SEED, *region, "--set", "settings.reservedENIs=1"),
                            "Deployment"))  # fmt: skip
    plain = {k: v for k, v in env.items() if isinstance(v, str)}
    settings = AWSSettings.from_settings({}, cluster_name=plain["CLUSTER_NAME"], environ=plain)
    assert settings.interruption_queue == "seed-cluster"
    assert settings.region == "eu-west-1"
    assert settings.reserved_enis == 1
    assert settings.vm_memory_overhead_percent == 0.075


def test_the_azure_provider_reads_its_settings_from_the_charts_environment() -> None:
    from karpy_azure import AzureSettings

    required = {
        "ARM_SUBSCRIPTION_ID": "00000000-0000-0000-0000-0000000000aa",
        "LOCATION": "westus2",
        "AZURE_NODE_RESOURCE_GROUP": "MC_rg_seed-cluster_westus2",
        "VNET_SUBNET_ID": "/subscriptions/00000000-0000-0000-0000-0000000000aa/resourceGroups/"
        "rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/nodes",
        # what nodes join with (Karpenter-Azure's installs pass them as controller env too)
        "CLUSTER_ENDPOINT": "https://seed-dns.hcp.westus2.azmk8s.io:443",
        "KUBELET_BOOTSTRAP_TOKEN": "abcdef.0123456789abcdef",
        "SSH_PUBLIC_KEY": "ssh-rsa AAAA seed",
    }
    extra = []
    for i, (name, value) in enumerate(required.items()):
        extra += ["--set", f"controller.env[{i}].name={name}",
                  "--set-string", f"controller.env[{i}].value={value}"]  # fmt: skip
    tags = ["--set-string", "settings.tags.team=ml", "--set-string", "settings.tags.env=prod"]
    env = container_env(one(render(*AZURE_SEED, *extra, *tags), "Deployment"))
    plain = {k: v for k, v in env.items() if isinstance(v, str)}
    settings = AzureSettings.from_settings({}, cluster_name=plain["CLUSTER_NAME"], environ=plain)
    assert settings.location == "westus2"
    assert settings.additional_tags == {"env": "prod", "team": "ml"}
