"""Which field a converter was reading when it met a value of the wrong shape.

The converters read the shapes Karpenter writes (``spec.get("disruption") or {}``); a
string where a mapping belongs ends in ``'str' object has no attribute 'get'``, which
names neither the field nor its fix. Rather than checking every field by hand in every
converter, the input document is wrapped in containers that record each key (or list
index) read, so the error can name the last field read — the one holding the value of
the wrong shape. :func:`plain` turns the containers back into plain dicts and lists
(yaml.safe_dump refuses subclasses).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, SupportsIndex, overload

__all__ = ["Trail", "copy_of", "plain", "track", "untracked_get"]


class Trail:
    """The path of the last field read (``spec.template.spec.requirements[2]``)."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last = ""


def _join(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


class _Dict(dict[Any, Any]):
    __slots__ = ("_path", "_trail")
    _path: str
    _trail: Trail

    def __getitem__(self, key: Any) -> Any:
        self._trail.last = _join(self._path, key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._trail.last = _join(self._path, key)
        return super().get(key, default)


class _List(list[Any]):
    __slots__ = ("_path", "_trail")
    _path: str
    _trail: Trail

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        if not isinstance(index, slice):
            self._trail.last = _join(self._path, int(index))
        return super().__getitem__(index)

    def __iter__(self) -> Iterator[Any]:
        for i, item in enumerate(super().__iter__()):
            self._trail.last = _join(self._path, i)
            yield item


def track(value: Any, trail: Trail, path: str = "") -> Any:
    """``value`` with every mapping and list recording reads into ``trail``."""
    out: _Dict | _List
    if isinstance(value, dict):
        out = _Dict((k, track(v, trail, _join(path, k))) for k, v in value.items())
    elif isinstance(value, list):
        out = _List(track(v, trail, _join(path, i)) for i, v in enumerate(value))
    else:
        return value
    out._path, out._trail = path, trail
    return out


def copy_of(mapping: Any) -> dict[Any, Any]:
    """``dict(mapping)``, still recording reads when ``mapping`` does (converters copy a
    mapping before they edit it; a plain copy would stop naming the fields read)."""
    if isinstance(mapping, _Dict):
        out = _Dict(dict.items(mapping))
        out._path, out._trail = mapping._path, mapping._trail
        return out
    return dict(mapping)


def untracked_get(mapping: Any, key: Any, default: Any = None) -> Any:
    """``mapping.get(key, default)`` without recording the read (for messages that
    describe the object, which must not move the trail off the field that failed)."""
    return dict.get(mapping, key, default) if isinstance(mapping, dict) else mapping.get(
        key, default)


def plain(value: Any) -> Any:
    """``value`` with every mapping and list a plain dict and list again."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
