"""Reading back what a node was launched with, as AKS's node scripts would: the
provisioning variables of the VM's custom data or of its Custom Script Extension, and
the kubelet's labels, taints and flags among them."""

from __future__ import annotations

import base64
import re
import shlex
from typing import Any

_ASSIGNMENT = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")


def script_variables(script: str) -> dict[str, str]:
    """The ``NAME=value`` assignments of a provisioning script, values unquoted as bash
    would."""
    found: dict[str, str] = {}
    for line in script.splitlines():
        m = _ASSIGNMENT.match(line)
        if m is None:
            continue
        words = shlex.split(m.group(2)) if m.group(2) else [""]
        found[m.group(1)] = words[0] if words else ""
    return found


def custom_data_script(vm: dict[str, Any]) -> str:
    """The decoded custom data of a VM body ("" when it has none)."""
    data = (vm.get("properties") or {}).get("osProfile", {}).get("customData")
    return base64.b64decode(data).decode() if data else ""


def cse_script(extension: dict[str, Any]) -> str:
    """The script a Custom Script Extension body runs (``/bin/bash -c '<script>'``)."""
    command = extension["properties"]["protectedSettings"]["commandToExecute"]
    words = shlex.split(command)
    assert words[:2] == ["/bin/bash", "-c"], command
    return str(words[2])


def kubelet_flags(variables: dict[str, str]) -> dict[str, str]:
    """``KUBELET_FLAGS`` as flag -> value."""
    flags: dict[str, str] = {}
    for item in variables.get("KUBELET_FLAGS", "").split():
        name, _, value = item.partition("=")
        flags[name] = value
    return flags


def node_labels(variables: dict[str, str]) -> dict[str, str]:
    """``KUBELET_NODE_LABELS`` as a dict."""
    return dict(
        item.split("=", 1) for item in variables.get("KUBELET_NODE_LABELS", "").split(",")
        if "=" in item
    )


def taints(variables: dict[str, str]) -> list[dict[str, str]]:
    """``--register-with-taints`` as Node taints."""
    found = []
    for item in filter(None, kubelet_flags(variables).get("--register-with-taints", "").split(",")):
        kv, effect = item.rsplit(":", 1)
        key, _, value = kv.partition("=")
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        found.append(taint)
    return found
