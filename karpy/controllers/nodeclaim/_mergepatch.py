"""JSON merge patches (RFC 7386) computed from two versions of an object.

The lifecycle controller edits a copy of the NodeClaim (or Node) and sends only what
changed, as controller-runtime's ``client.MergeFrom`` does: maps are merged key by key,
so labels another controller adds meanwhile survive; lists are replaced whole, which is
why list edits (finalizers, taints) go with the resourceVersion as an optimistic lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["merge_patch"]


def merge_patch(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch turning ``before`` into ``after`` ({} when they are equal).

    Keys missing from ``after`` become ``None`` (delete); nested maps recurse; any other
    changed value (lists included) is sent whole.
    """
    patch: dict[str, Any] = {}
    for key in before.keys() - after.keys():
        patch[key] = None
    for key, new in after.items():
        old = before.get(key, _MISSING)
        if old is _MISSING:
            patch[key] = new
        elif isinstance(old, Mapping) and isinstance(new, Mapping):
            nested = merge_patch(old, new)
            if nested:
                patch[key] = nested
        elif old != new:
            patch[key] = new
    return patch


_MISSING: Any = object()
