"""Small concepts have one home each (issue 26): the function is defined in exactly one
module of karpy/ and providers/, and the text that would betray a private copy (an RFC
3339 format string, ``fromisoformat``, a ``KEY=VALUE`` split of ``--provider-setting``)
appears nowhere else. A second definition is how meanings drift apart."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (ROOT / "karpy", ROOT / "providers")

HOMES = {
    # pod predicates (Karpenter's pkg/utils/pod)
    "is_terminal": "karpy/apis/pods.py",
    "is_terminating": "karpy/apis/pods.py",
    "is_active": "karpy/apis/pods.py",
    "is_owned_by": "karpy/apis/pods.py",
    "is_owned_by_node": "karpy/apis/pods.py",
    "is_owned_by_daemonset": "karpy/apis/pods.py",
    "is_owned_by_statefulset": "karpy/apis/pods.py",
    "owner_reference": "karpy/apis/pods.py",
    "daemonset_reference": "karpy/apis/pods.py",
    # "is this node being disrupted"
    "has_disrupted_taint": "karpy/apis/taints.py",
    # API timestamps
    "parse_time": "karpy/runtime/_timestamps.py",
    "format_time": "karpy/runtime/_timestamps.py",
    "format_micro_time": "karpy/runtime/_timestamps.py",
    # Go duration text
    "parse_duration": "karpy/apis/duration.py",
    "format_duration": "karpy/apis/duration.py",
    "format_go_duration": "karpy/apis/duration.py",
    "go_duration_nanoseconds": "karpy/apis/duration.py",
    # cache indexes shared by controllers
    "index_nodeclass_ref": "karpy/controllers/indexes.py",
    "index_nodepool_label": "karpy/controllers/indexes.py",
    "nodeclass_ref_key": "karpy/controllers/indexes.py",
    # "this condition is True" on a raw object: the first entry of its type decides
    "condition_is_true": "karpy/apis/conditions.py",
    # what a running machine's offering costs (None when unknown: each caller says why)
    "offering_price": "karpy/state/cost.py",
    # CamelCase -> snake_case in metric labels (Karpenter's pretty.ToSnakeCase)
    "to_snake_case": "karpy/apis/pretty.py",
    # --provider-setting KEY=VALUE
    "parse_provider_settings": "karpy/options.py",
    "add_provider_setting_argument": "karpy/options.py",
}

# Text only a home may hold, with the homes (and the deliberate other formats) allowed it.
SIGNS = {
    '"%Y-%m-%dT%H:%M:%S': {
        "karpy/runtime/_timestamps.py",
        # The JSON log line's millisecond time (zap's encoder), not an API timestamp.
        "karpy/runtime/_logging.py",
    },
    "fromisoformat(": {"karpy/runtime/_timestamps.py"},
    "provider_setting:": {"karpy/options.py"},
    # a condition read for True by hand; the holders read more than that (the condition
    # itself, its reason, its observedGeneration), and the runtime may not import apis
    '.get("status") == "True"': {
        "karpy/apis/conditions.py",
        "karpy/controllers/termination/_eviction.py",
        "karpy/controllers/capacitybuffer/_controller.py",
        "karpy/controllers/metrics/_pod.py",
        "karpy/controllers/nodeclaim/lifecycle/controller.py",
        "karpy/runtime/_fakeclient.py",
    },
    # the capacity type's value: karpy.apis.labels.CAPACITY_TYPE_ON_DEMAND
    '"on-demand"': {"karpy/apis/labels.py"},
}


@cache
def _modules() -> dict[str, str]:
    return {
        str(path.relative_to(ROOT)): path.read_text()
        for source in SOURCES
        for path in sorted(source.rglob("*.py"))
    }


@cache
def _definitions() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, text in _modules().items():
        # Module-level functions: a method (a budget's is_active) is another concept.
        for node in ast.parse(text, name).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.setdefault(node.name, []).append(name)
    return found


@pytest.mark.parametrize("function", sorted(HOMES))
def test_each_concept_is_defined_once_in_its_home(function: str) -> None:
    assert _definitions().get(function) == [HOMES[function]], (
        f"{function} must be defined only in {HOMES[function]}; import it from there"
    )


@pytest.mark.parametrize("sign", sorted(SIGNS))
def test_no_private_copy_of_a_concept(sign: str) -> None:
    holders = {name for name, text in _modules().items() if sign in text}
    assert holders <= SIGNS[sign], f"{sign!r} outside its home: {sorted(holders - SIGNS[sign])}"
