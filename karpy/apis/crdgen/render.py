"""YAML the way Kubernetes projects check CRDs in: block style, indented lists, long
lines kept whole, multi-line text as literal blocks."""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["dump_yaml"]


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Indent list items under their key (controller-gen's style), not flush with it.
        super().increase_indent(flow, False)


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str_presenter)


def dump_yaml(data: Any, *, header: str = "") -> str:
    """One YAML document starting with ``---`` (after an optional comment header)."""
    body = yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        width=10_000,
        allow_unicode=True,
    )
    return f"{header}---\n{body}"
