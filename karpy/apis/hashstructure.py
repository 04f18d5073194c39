"""A port of Go's ``github.com/mitchellh/hashstructure/v2`` (v2.0.2), the structural hash
Karpenter stamps on NodePools and NodeClaims as ``karpenter.sh/nodepool-hash`` and the
providers stamp as their NodeClass hashes (``karpenter.k8s.aws/ec2nodeclass-hash``,
``karpenter.azure.com/aksnodeclass-hash``). One port serves them all: the core's NodePool
hash, karpy_aws and karpy_azure describe their Go types with the vocabulary below.

Karpenter hashes a Go value by reflection, so the result depends on the Go types
involved — struct type names, field names and order, pointers, nil versus empty
collections — not only on the JSON. Python has no such types, so a caller describes the
Go value with the small vocabulary below (:class:`GoStruct`, :class:`GoString`, ...) and
:func:`hash_v2` walks it exactly as hashstructure's ``walker.visit`` walks the Go value
with ``FormatV2`` and the options Karpenter passes (``SlicesAsSets``,
``IgnoreZeroValue``, ``ZeroNil``).

What the walk does, in brief (hashstructure.go):

* every leaf is hashed with FNV-1 (64 bit, not FNV-1a): strings as their UTF-8 bytes,
  integers as little-endian bytes of their Go size (``int`` widened to 8, ``int32`` 4),
  ``bool`` as one byte (0 or 1), ``time.Time`` as its ``MarshalBinary`` form;
* a struct starts from the hash of its type name; each field that is exported, not
  tagged ``hash:"ignore"`` and not a zero value contributes
  ``ordered(hash(field name), hash(value))`` by XOR, and the running value is
  "finished" (re-hashed) after each such field — so field order matters;
* a map XORs ``ordered(hash(key), hash(value))`` over its entries, then finishes once;
* a slice, with SlicesAsSets, XORs its elements' hashes and is *not* finished (so two
  equal elements cancel out, as they do in Karpenter);
* a pointer is followed; a nil one is never reached, being a zero value.

``ordered(a, b)`` is FNV-1 over the 16 little-endian bytes of ``a`` then ``b``; to
"finish" ``h`` is FNV-1 over its 8 little-endian bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

__all__ = [
    "GoBool",
    "GoInt32",
    "GoInt64",
    "GoMap",
    "GoPointer",
    "GoSlice",
    "GoString",
    "GoStruct",
    "GoTime",
    "GoValue",
    "StructField",
    "fnv1_64",
    "hash_v2",
    "ptr_bool",
    "ptr_int32",
    "ptr_int64",
    "ptr_string",
]

_OFFSET: Final = 0xCBF29CE484222325
_PRIME: Final = 0x100000001B3
_MASK: Final = 0xFFFFFFFFFFFFFFFF


def fnv1_64(data: bytes) -> int:
    """FNV-1 64-bit (Go's ``hash/fnv.New64``): multiply, then XOR each byte."""
    h = _OFFSET
    for byte in data:
        h = ((h * _PRIME) & _MASK) ^ byte
    return h


def _ordered(a: int, b: int) -> int:
    return fnv1_64(struct.pack("<QQ", a, b))


def _finish(h: int) -> int:
    return fnv1_64(struct.pack("<Q", h))


@dataclass(frozen=True, slots=True)
class GoString:
    """A Go ``string`` (or a string-kinded type such as ``TaintEffect``)."""

    value: str

    def is_zero(self) -> bool:
        """The empty string is Go's zero value."""
        return self.value == ""


@dataclass(frozen=True, slots=True)
class GoInt64:
    """A Go ``int64``-kinded value (``time.Duration`` among them)."""

    value: int

    def is_zero(self) -> bool:
        """Zero is the zero value."""
        return self.value == 0


@dataclass(frozen=True, slots=True)
class GoInt32:
    """A Go ``int32``: hashed as its 4 little-endian bytes (hashstructure widens only
    ``int``, so an ``int32`` hashes differently from the same ``int64``)."""

    value: int

    def is_zero(self) -> bool:
        """Zero is the zero value."""
        return self.value == 0


@dataclass(frozen=True, slots=True)
class GoBool:
    """A Go ``bool``: hashed as the one byte of an ``int8`` 0 or 1."""

    value: bool

    def is_zero(self) -> bool:
        """false is the zero value."""
        return not self.value


@dataclass(frozen=True, slots=True)
class GoTime:
    """A Go ``time.Time``, hashed through ``MarshalBinary``.

    ``utc_location`` says whether the Go value's location is ``time.UTC`` itself (offset
    written as -1) rather than another zone at offset 0 — what ``metav1.Time`` gives after
    decoding JSON (it converts to ``time.Local``, UTC in Karpenter's container).
    """

    value: datetime
    utc_location: bool = False

    def is_zero(self) -> bool:
        """A decoded timestamp is never Go's zero ``time.Time``."""
        return False

    def marshal_binary(self) -> bytes:
        """``time.Time.MarshalBinary`` (version 1: whole-minute offsets only)."""
        value = self.value if self.value.tzinfo else self.value.replace(tzinfo=UTC)
        offset = value.utcoffset()
        offset_seconds = int(offset.total_seconds()) if offset is not None else 0
        if offset_seconds % 60:
            raise ValueError(f"{value.isoformat()}: offsets of whole minutes only")
        utc = value.astimezone(UTC).replace(tzinfo=None)
        # Seconds since January 1, year 1 (Go's absolute epoch for MarshalBinary).
        since_year_one = utc - datetime(1, 1, 1)
        seconds = since_year_one.days * 86_400 + since_year_one.seconds
        offset_min = -1 if self.utc_location else offset_seconds // 60
        return struct.pack(">BqiH", 1, seconds, utc.microsecond * 1000, offset_min & 0xFFFF)


@dataclass(frozen=True, slots=True)
class GoPointer:
    """A Go pointer: nil (``None``) or pointing at ``target``."""

    target: GoValue | None

    def is_zero(self) -> bool:
        """A nil pointer is the zero value; a pointer to a zero value is not."""
        return self.target is None


@dataclass(frozen=True, slots=True)
class GoMap:
    """A Go map with string keys: nil (``None``) or the entries (possibly none); a plain
    ``str`` value stands for a Go ``string``."""

    entries: Mapping[str, str] | Mapping[str, GoValue] | None

    def is_zero(self) -> bool:
        """Only a nil map is the zero value; an empty one is not."""
        return self.entries is None


@dataclass(frozen=True, slots=True)
class GoSlice:
    """A Go slice: nil (``None``) or the elements (possibly none)."""

    items: Sequence[GoValue] | None

    def is_zero(self) -> bool:
        """Only a nil slice is the zero value; an empty one is not."""
        return self.items is None


@dataclass(frozen=True, slots=True)
class StructField:
    """One field of a :class:`GoStruct`, in declaration order."""

    name: str
    value: GoValue
    ignored: bool = False
    """Tagged ``hash:"ignore"``: skipped by the hash, but still part of the struct's
    zero-ness (``reflect.Value.IsZero`` looks at every field)."""


@dataclass(frozen=True, slots=True)
class GoStruct:
    """A Go struct value: its type's name and its exported fields in order."""

    type_name: str
    fields: Sequence[StructField] = field(default_factory=tuple)

    def is_zero(self) -> bool:
        """Zero when every field, ignored ones included, is zero."""
        return all(f.value.is_zero() for f in self.fields)


GoValue = (
    GoString | GoInt64 | GoInt32 | GoBool | GoTime | GoPointer | GoMap | GoSlice | GoStruct
)


def _string(text: str) -> int:
    return fnv1_64(text.encode())


def _visit(value: GoValue) -> int:
    while isinstance(value, GoPointer):
        if value.target is None:
            raise ValueError("a nil pointer is a zero value and is never hashed")
        value = value.target
    if isinstance(value, GoString):
        return _string(value.value)
    if isinstance(value, GoInt64):
        return fnv1_64(struct.pack("<q", value.value))
    if isinstance(value, GoInt32):
        return fnv1_64(struct.pack("<i", value.value))
    if isinstance(value, GoBool):
        return fnv1_64(b"\x01" if value.value else b"\x00")
    if isinstance(value, GoTime):
        return fnv1_64(value.marshal_binary())
    if isinstance(value, GoMap):
        h = 0
        for key, item in (value.entries or {}).items():
            item_hash = _string(item) if isinstance(item, str) else _visit(item)
            h ^= _ordered(_string(key), item_hash)
        return _finish(h)
    if isinstance(value, GoSlice):
        h = 0
        for element in value.items or ():
            h ^= _visit(element)
        return h  # SlicesAsSets without a "set" tag: no finishing step
    h = _string(value.type_name)
    for f in value.fields:
        if f.ignored or f.value.is_zero():
            continue
        h ^= _ordered(_string(f.name), _visit(f.value))
        h = _finish(h)
    return h


def hash_v2(value: GoValue) -> int:
    """hashstructure v2's ``Hash(value, FormatV2, &HashOptions{SlicesAsSets: true,
    IgnoreZeroValue: true, ZeroNil: true})`` of the described Go value.

    A Go ``[]any{a, b, c}`` (how the providers hash a spec beside resolved values) is a
    :class:`GoSlice` of the elements: interfaces are looked through, and with
    SlicesAsSets the elements are XORed, so their order does not matter.
    """
    return _visit(value)


# Go's optional fields are pointers: None is a nil one. The four the API types use.
def ptr_string(value: str | None) -> GoPointer:
    """A Go ``*string``: nil for None."""
    return GoPointer(None if value is None else GoString(value))


def ptr_bool(value: bool | None) -> GoPointer:
    """A Go ``*bool``: nil for None."""
    return GoPointer(None if value is None else GoBool(value))


def ptr_int32(value: int | None) -> GoPointer:
    """A Go ``*int32``: nil for None."""
    return GoPointer(None if value is None else GoInt32(value))


def ptr_int64(value: int | None) -> GoPointer:
    """A Go ``*int64``: nil for None."""
    return GoPointer(None if value is None else GoInt64(value))
