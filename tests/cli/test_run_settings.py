"""``karpy run``'s settings as a user meets them, through the real command (subprocess,
no cluster): ``--help`` lists every setting with its environment variable and default,
and a bad or missing one ends the command with status 2 and one line on stderr that
names the flag, the variable and what is expected — no traceback, no usage dump."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from karpy.options import SETTINGS


def karpy_run(*args: str, env: dict[str, str], home: Path) -> subprocess.CompletedProcess[str]:
    # A bare environment: no AWS/Azure variables of the machine leak in, no kubeconfig.
    base = {"PATH": "/usr/bin:/bin", "HOME": str(home), "KUBECONFIG": str(home / "none")}
    return subprocess.run(
        [sys.executable, "-m", "karpy.cli", "run", *args],
        capture_output=True, text=True, env={**base, **env}, timeout=120, check=False,
    )  # fmt: skip


def test_help_lists_every_setting_with_its_variable_and_default(tmp_path: Path) -> None:
    done = karpy_run("--help", env={}, home=tmp_path)
    assert done.returncode == 0, done.stderr
    text = "".join(done.stdout.split())  # argparse wraps lines, even inside long words
    for setting in SETTINGS:
        assert setting.flag in text
        wanted = f"env {setting.env}; default {setting.default or '(none)'})"
        assert "".join(wanted.split()) in text, setting
    # The providers' settings (Karpenter's variables) follow the core's.
    for env, default in (
        ("CLUSTER_ENDPOINT", "(none)"),
        ("INTERRUPTION_QUEUE", "(none)"),
        ("VM_MEMORY_OVERHEAD_PERCENT", "0.075"),
        ("ARM_SUBSCRIPTION_ID", None),
    ):
        (line,) = [ln for ln in done.stdout.splitlines() if f" {env} " in ln][:1]
        assert (f"default {default}" if default else "required") in line, line


#: Every setting the azure provider requires, valid, so a later check is what fails.
AZURE = {
    "CLOUD_PROVIDER": "azure", "CLUSTER_NAME": "c",
    "ARM_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
    "AZURE_NODE_RESOURCE_GROUP": "nodes", "LOCATION": "southcentralus",
    "VNET_SUBNET_ID": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/"
                      "rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/nodes",
    "CLUSTER_ENDPOINT": "https://c.hcp.southcentralus.azmk8s.io:443",
    "KUBELET_BOOTSTRAP_TOKEN": "abcdef.0123456789abcdef",
    "SSH_PUBLIC_KEY": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB7 test",
}  # fmt: skip

BAD = [
    # (environment, words the one line must contain)
    ({"BATCH_MAX_DURATION": "abc"}, ["BATCH_MAX_DURATION", "--batch-max-duration", "'abc'",
                                     "30s"]),
    ({"CLOUD_PROVIDER": "gce"}, ["CLOUD_PROVIDER", "--cloud-provider", "'gce'", "kwok"]),
    ({"CLOUD_PROVIDER": "aws", "AWS_REGION": "us-east-1"}, ["--cluster-name", "CLUSTER_NAME"]),
    ({"CLOUD_PROVIDER": "aws", "CLUSTER_NAME": "c", "AWS_REGION": "us-east-1",
      "VM_MEMORY_OVERHEAD_PERCENT": "7.5"}, ["vmMemoryOverheadPercent",
                                           "VM_MEMORY_OVERHEAD_PERCENT", "[0, 1)"]),
    ({"CLOUD_PROVIDER": "azure", "CLUSTER_NAME": "c"}, ["subscriptionID",
                                                        "ARM_SUBSCRIPTION_ID"]),
    ({"FEATURE_GATES": "Bogus=true"}, ["FEATURE_GATES", "--feature-gates", "'Bogus'",
                                       "SpotToSpotConsolidation"]),
    ({"METRICS_PORT": "http"}, ["METRICS_PORT", "--metrics-port", "0-65535"]),
    ({"DISABLE_LEADER_ELECTION": "maybe"}, ["DISABLE_LEADER_ELECTION", "true or false"]),
    ({"LOG_LEVEL": "loud"}, ["LOG_LEVEL", "--log-level", "debug, info, warn, error"]),
    # Accepted once: a zero period, a duration beyond Go's, nonsense provider values.
    ({"GARBAGE_COLLECTION_GRACE": "0s"}, ["GARBAGE_COLLECTION_GRACE",
                                          "--garbage-collection-grace", "'0s'",
                                          "longer than zero"]),
    ({"DISRUPTION_POLL_PERIOD": "0s"}, ["DISRUPTION_POLL_PERIOD", "--disruption-poll-period",
                                        "longer than zero"]),
    ({"LAUNCH_TTL": "99999999h"}, ["LAUNCH_TTL", "--launch-ttl", "'99999999h'", "2562047h"]),
    ({"LAUNCH_TTL": "9" * 400 + "h"}, ["LAUNCH_TTL", "--launch-ttl", "not a duration"]),
    ({"CLOUD_PROVIDER": "aws", "CLUSTER_NAME": "c", "AWS_REGION": "the moon"},
     ["region", "'the moon'", "AWS_REGION", "not an AWS region name"]),
    ({"CLOUD_PROVIDER": "aws", "CLUSTER_NAME": "c", "AWS_REGION": "us-east-1",
      "AWS_ENDPOINT_URL": "notaurl"}, ["endpointURL", "AWS_ENDPOINT_URL", "http(s) URL"]),
    ({"CLOUD_PROVIDER": "azure", "AZURE_POLL_INTERVAL": "inf"},
     ["pollInterval", "'inf'", "AZURE_POLL_INTERVAL", "finite"]),
    ({**AZURE, "ARM_ENDPOINT": "notaurl"}, ["armEndpoint", "'notaurl'", "ARM_ENDPOINT",
                                            "https:// URL"]),
    ({**AZURE, "LOCATION": "South Central US!"}, ["location", "LOCATION",
                                                  "not an Azure region name"]),
]  # fmt: skip


@pytest.mark.parametrize("env,words", BAD, ids=lambda v: ",".join(v) if isinstance(v, dict) else "")
def test_a_bad_setting_exits_2_with_one_line_naming_it(
    env: dict[str, str], words: list[str], tmp_path: Path
) -> None:
    done = karpy_run(env=env, home=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("karpy run: ")
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_a_bad_flag_value_names_the_flag(tmp_path: Path) -> None:
    done = karpy_run("--batch-idle-duration", "soon", env={}, home=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "karpy run: --batch-idle-duration: 'soon' is not a duration (expected e.g. 30s, 15m, "
        "1h30m)"
    )


def test_good_settings_get_past_the_checks_to_the_cluster(tmp_path: Path) -> None:
    # Valid settings and no cluster: the failure is the connection (status 1), still
    # one line, so the checks above are what produced status 2.
    done = karpy_run(env={"BATCH_MAX_DURATION": "20s", "FEATURE_GATES": "NodeRepair=true"},
                     home=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr
    (last,) = [ln for ln in done.stderr.splitlines() if ln.startswith("karpy run:")]
    assert "kubeconfig" in last and "Traceback" not in done.stderr


def test_karpenters_default_feature_gates_get_past_the_checks(tmp_path: Path) -> None:
    # A Deployment moved from Karpenter v1.14 carries its default FEATURE_GATES string
    # (CapacityBuffer among them); `karpy run` must not stop on it.
    gates = ("NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,"
             "NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false")  # fmt: skip
    done = karpy_run(env={"FEATURE_GATES": gates}, home=tmp_path)
    assert done.returncode == 1, done.stderr
    (last,) = [ln for ln in done.stderr.splitlines() if ln.startswith("karpy run:")]
    assert "kubeconfig" in last and "FEATURE_GATES" not in done.stderr


def test_the_settings_table_of_docs_install_is_fresh() -> None:
    from karpy.cli.run import settings_markdown

    page = (Path(__file__).resolve().parents[2] / "docs" / "install.md").read_text()
    begin = page.index("<!-- settings:begin")
    block = page[page.index("\n", begin) + 1 : page.index("<!-- settings:end -->")]
    assert block == settings_markdown(), (
        "docs/install.md's settings table is stale: replace the block between the "
        "settings markers with what karpy.cli.run.settings_markdown() returns"
    )
