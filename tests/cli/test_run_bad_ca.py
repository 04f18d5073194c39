"""A malformed CA certificate (a broken ca.crt mounted into the pod, or bad
certificate-authority-data in a kubeconfig) stops ``karpy run`` with one line that names
where the CA came from, and status 1 — not a Python traceback."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import yaml


def karpy_run(env: dict[str, str], home: Path) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "karpy.cli", "run", "--cloud-provider", "kwok"],
        capture_output=True, text=True, env={**base, **env}, timeout=120, check=False,
    )  # fmt: skip


def test_a_malformed_service_account_ca_is_one_line_naming_the_file(tmp_path: Path) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("token")
    (account / "namespace").write_text("karpenter")
    (account / "ca.crt").write_text("not a certificate\n")
    done = karpy_run({"KARPY_SERVICE_ACCOUNT_DIR": str(account),
                      "KUBERNETES_SERVICE_HOST": "127.0.0.1",
                      "KUBERNETES_SERVICE_PORT": "6443"}, tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    verdict = done.stderr.strip().splitlines()[-1]
    assert verdict.startswith("karpy run: cannot load the CA certificate from service account CA "
                              f"{account / 'ca.crt'}"), verdict  # fmt: skip


def test_a_malformed_kubeconfig_ca_is_one_line_naming_the_kubeconfig(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {
            "server": "https://127.0.0.1:6443",
            "certificate-authority-data": base64.b64encode(b"not a certificate").decode()}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))  # fmt: skip
    done = karpy_run({"KUBECONFIG": str(kubeconfig)}, tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    verdict = done.stderr.strip().splitlines()[-1]
    expected = f"karpy run: cannot load the CA certificate from kubeconfig {kubeconfig}"
    assert verdict.startswith(expected), verdict
