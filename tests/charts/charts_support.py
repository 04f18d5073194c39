"""helm for the chart tests: built from its Go module by tests/controlplane/build-helm.sh
(cached), and ``render()``, which runs ``helm template`` and returns the objects."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "karpy"
CRD_CHART = REPO / "charts" / "karpy-crd"
BUILD = REPO / "tests" / "controlplane" / "build-helm.sh"
HELM = REPO / "tests" / "controlplane" / "bin" / "helm"

#: The values of a seed-style AWS install (docs/install.md): IRSA, an interruption
#: queue, 1 CPU / 1Gi for the controller.
AWS_SEED = [
    "--set", "cloudProvider=aws",
    "--set", "settings.clusterName=seed-cluster",
    "--set", "settings.interruptionQueue=seed-cluster",
    "--set", "controller.resources.requests.cpu=1",
    "--set", "controller.resources.requests.memory=1Gi",
    "--set", "controller.resources.limits.cpu=1",
    "--set", "controller.resources.limits.memory=1Gi",
    "--set-string",
    "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn="
    "arn:aws:iam::111122223333:role/KarpyController-seed-cluster",
]  # fmt: skip

#: The same for Azure: workload identity on the ServiceAccount and the pod.
AZURE_SEED = [
    "--set", "cloudProvider=azure",
    "--set", "settings.clusterName=seed-cluster",
    "--set", "controller.resources.requests.cpu=1",
    "--set", "controller.resources.requests.memory=1Gi",
    "--set-string",
    "serviceAccount.annotations.azure\\.workload\\.identity/client-id="
    "00000000-0000-0000-0000-000000000001",
    "--set-string", "podLabels.azure\\.workload\\.identity/use=true",
]  # fmt: skip


def helm_binary() -> Path:
    """The helm binary, built (or found up to date) first."""
    proc = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"building helm failed:\n{proc.stdout}{proc.stderr}")
    return HELM


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run helm; with ``check``, raise naming its stderr when it fails."""
    proc = subprocess.run(
        [str(helm_binary()), *args], capture_output=True, text=True, timeout=120, check=False
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"helm {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def render(
    *values: str, chart: Path = CHART, release: str = "karpy", namespace: str = "kube-system"
) -> list[dict[str, Any]]:
    """The objects ``helm template`` renders for ``values`` (helm flags)."""
    out = helm("template", release, str(chart), "--namespace", namespace, *values).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (doc,) = by_kind(docs, kind)
    return doc


def container_env(deployment: dict[str, Any]) -> dict[str, Any]:
    """The controller container's env: name -> value (or the valueFrom mapping)."""
    (container, *_) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
