"""The requirements algebra: node-selector requirements as small immutable values.

Every operator is normalised the way Karpenter does it (pkg/scheduling/requirement.go):
a requirement is a *complement* flag, a value set and optional inclusive integer bounds.

====================  ==========  ==========  ==============
operator              complement  values      bounds
====================  ==========  ==========  ==============
In [a, b]             no          {a, b}
NotIn [a]             yes         {a}
Exists                yes         {}
DoesNotExist          no          {}
Gt 3                  yes         {}          >= 4
Lt 3                  yes         {}          <= 2
Gte 3                 yes         {}          >= 3
Lte 3                 yes         {}          <= 3
====================  ==========  ==========  ==============

(Gte and Lte are Karpenter's own operators, v1.9; kube-scheduler does not know them.)

so intersection is plain set algebra. Compatibility checks return the reason they fail
(a string a human can act on) and ``None`` when compatible. Both types are immutable and
hashable, which lets the simulator cache intersections and instance-type masks by value.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Literal

from karpy.apis.labels import NORMALIZED_LABELS
from karpy.apis.strconv import parse_go_int

__all__ = [
    "DOES_NOT_EXIST",
    "EXISTS",
    "GT",
    "GTE",
    "IN",
    "LT",
    "LTE",
    "NOT_IN",
    "InvalidRequirement",
    "Operator",
    "Requirement",
    "Requirements",
]

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
IN: Final = "In"
"""Operator: the value is one of the values."""
NOT_IN: Final = "NotIn"
"""Operator: the value is none of the values (or the key is absent)."""
EXISTS: Final = "Exists"
"""Operator: the key is present, any value."""
DOES_NOT_EXIST: Final = "DoesNotExist"
"""Operator: the key is absent."""
GT: Final = "Gt"
"""Operator: an integer value above the one given."""
LT: Final = "Lt"
"""Operator: an integer value below the one given."""
GTE: Final = "Gte"
"""Operator: an integer value at or above the one given (Karpenter v1.9)."""
LTE: Final = "Lte"
"""Operator: an integer value at or below the one given (Karpenter v1.9)."""
_OPERATORS: Final = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE})

_EMPTY: frozenset[str] = frozenset()


class InvalidRequirement(ValueError):  # noqa: N818 - a ValueError, named for what is wrong
    """A node-selector requirement that cannot be read: a missing or unknown operator, a
    Gt/Lt/Gte/Lte value that is not one integer, a key or values of the wrong type. The
    message names the field (``key``, ``operator``, ``values``) and the requirement."""


def _as_int(value: str) -> int | None:
    # Karpenter and kube-scheduler read these with strconv.Atoi / ParseInt(10, 64):
    # "1_000", "\u0661" and values past int64 are no integers to them, so none here either.
    try:
        return parse_go_int(value)
    except ValueError:
        return None


def _within(value: str, gte: int | None, lte: int | None) -> bool:
    if gte is None and lte is None:
        return True
    number = _as_int(value)
    if number is None:
        return False
    return (gte is None or number >= gte) and (lte is None or number <= lte)


def _max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a > b else b


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a < b else b


class Requirement:
    """One label key's allowed values. Build with :meth:`new`; immutable and hashable."""

    __slots__ = ("_hash", "complement", "gte", "key", "lte", "min_values", "values")

    key: str
    complement: bool
    values: frozenset[str]
    gte: int | None
    lte: int | None
    min_values: int | None
    _hash: int

    def __init__(
        self,
        key: str,
        complement: bool,
        values: frozenset[str],
        gte: int | None = None,
        lte: int | None = None,
        min_values: int | None = None,
    ) -> None:
        """Low-level constructor taking the normalised form; prefer :meth:`new`."""
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "complement", complement)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "gte", gte)
        object.__setattr__(self, "lte", lte)
        object.__setattr__(self, "min_values", min_values)
        object.__setattr__(self, "_hash", hash((key, complement, values, gte, lte, min_values)))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Requirement is immutable")

    @classmethod
    def new(
        cls,
        key: str,
        operator: str,
        values: Iterable[str] = (),
        min_values: int | None = None,
    ) -> Requirement:
        """A requirement from a node-selector operator. Deprecated label keys (the beta
        zone/arch/os/instance-type labels) are normalised to their well-known names.

        Raises :class:`InvalidRequirement` (a ValueError) for an unknown operator or a
        Gt/Lt/Gte/Lte without one integer value.
        """
        if not isinstance(key, str):
            raise InvalidRequirement(f"requirement key {key!r}: key must be a string")
        key = NORMALIZED_LABELS.get(key, key)
        if operator == IN:
            return cls(key, False, frozenset(values), None, None, min_values)
        if operator == NOT_IN:
            return cls(key, True, frozenset(values), None, None, min_values)
        if operator == EXISTS:
            return cls(key, True, _EMPTY, None, None, min_values)
        if operator == DOES_NOT_EXIST:
            return cls(key, False, _EMPTY, None, None, min_values)
        if operator in (GT, LT, GTE, LTE):
            vals = list(values)
            number = _as_int(vals[0]) if len(vals) == 1 and isinstance(vals[0], str) else None
            if number is None:
                raise InvalidRequirement(
                    f"requirement {_shown(key)} {operator} {vals}: values: operator "
                    f"{operator} needs exactly one integer value (ASCII digits within int64)"
                )
            if operator == GT:
                return cls(key, True, _EMPTY, number + 1, None, min_values)
            if operator == GTE:
                return cls(key, True, _EMPTY, number, None, min_values)
            if operator == LT:
                return cls(key, True, _EMPTY, None, number - 1, min_values)
            return cls(key, True, _EMPTY, None, number, min_values)
        raise InvalidRequirement(
            f"requirement on {_shown(key)}: operator: unknown operator {operator!r} "
            "(use In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte)"
        )

    @classmethod
    def from_dict(cls, requirement: Mapping[str, Any]) -> Requirement:
        """From a node-selector requirement dict: ``{key, operator, values, minValues}``.

        Raises :class:`InvalidRequirement` naming the field that is missing or malformed.
        """
        if not isinstance(requirement, Mapping):
            raise InvalidRequirement(
                f"requirement {requirement!r}: expected an object with key and operator"
            )
        for name in ("key", "operator"):
            if not isinstance(requirement.get(name), str):
                raise InvalidRequirement(
                    f"requirement {dict(requirement)!r}: {name}: required, a string"
                )
        values = requirement.get("values") or ()
        if not isinstance(values, list | tuple) or not all(isinstance(v, str) for v in values):
            raise InvalidRequirement(
                f"requirement on {_shown(requirement['key'])}: values: must be a list of strings"
            )
        min_values = requirement.get("minValues")
        if min_values is not None and (isinstance(min_values, bool)
                                       or not isinstance(min_values, int)):  # fmt: skip
            raise InvalidRequirement(
                f"requirement on {_shown(requirement['key'])}: minValues: must be an integer"
            )
        return cls.new(requirement["key"], requirement["operator"], values, min_values)

    # -- queries ---------------------------------------------------------------------

    @property
    def operator(self) -> str:
        """The operator this requirement reads as (Gt/Lt read as Exists with bounds)."""
        if self.complement:
            return NOT_IN if self.values else EXISTS
        return IN if self.values else DOES_NOT_EXIST

    def has(self, value: str) -> bool:
        """Whether a node whose label has ``value`` satisfies this requirement."""
        if self.complement:
            return value not in self.values and _within(value, self.gte, self.lte)
        return value in self.values and _within(value, self.gte, self.lte)

    def single(self) -> str | None:
        """The only allowed value when the requirement is ``In`` one value, else None."""
        if not self.complement and len(self.values) == 1:
            for value in self.values:
                return value
        return None

    def sorted_values(self) -> list[str]:
        """The value set, sorted (the allowed values for In, the excluded ones for NotIn)."""
        return sorted(self.values)

    def __len__(self) -> int:
        """Number of allowed values; complements count as unbounded (``sys.maxsize``)."""
        if self.complement:
            return (1 << 62) - len(self.values)
        return len(self.values)

    # -- algebra ---------------------------------------------------------------------

    def intersection(self, other: Requirement) -> Requirement:
        """The requirement both sides allow (keys are assumed equal; ``self.key`` wins)."""
        if other is self:
            return self
        gte = _max_opt(self.gte, other.gte)
        lte = _min_opt(self.lte, other.lte)
        min_values = _max_opt(self.min_values, other.min_values)
        if gte is not None and lte is not None and gte > lte:
            return Requirement(self.key, False, _EMPTY, None, None, min_values)
        complement = self.complement and other.complement
        if self.complement:
            values = self.values | other.values if other.complement else other.values - self.values
        else:
            values = self.values - other.values if other.complement else self.values & other.values
        if gte is not None or lte is not None:
            values = (
                frozenset(v for v in values if _within(v, gte, lte)) if not complement else values
            )
        if not complement:
            gte = lte = None
        return Requirement(self.key, complement, values, gte, lte, min_values)

    def has_intersection(self, other: Requirement) -> bool:
        """Whether some value satisfies both (cheaper than building the intersection)."""
        gte = _max_opt(self.gte, other.gte)
        lte = _min_opt(self.lte, other.lte)
        if gte is not None and lte is not None and gte > lte:
            return False
        if self.complement and other.complement:
            return True
        if self.complement:
            return any(v not in self.values and _within(v, gte, lte) for v in other.values)
        if other.complement:
            return any(v not in other.values and _within(v, gte, lte) for v in self.values)
        if gte is None and lte is None:
            return not self.values.isdisjoint(other.values)
        return any(v in other.values and _within(v, gte, lte) for v in self.values)

    def with_min_values(self, min_values: int | None) -> Requirement:
        """The same requirement with another ``minValues``."""
        return Requirement(self.key, self.complement, self.values, self.gte, self.lte, min_values)

    # -- conversion ------------------------------------------------------------------

    def to_dicts(self) -> list[dict[str, Any]]:
        """As node-selector requirement dicts (two when both integer bounds are set).

        Bounds are written as Gt/Lt, which every consumer knows, unless that would need a
        negative value (``Gte 0``), which the CRDs refuse: then as Gte/Lte."""
        extra: dict[str, Any] = {} if self.min_values is None else {"minValues": self.min_values}
        if self.gte is not None or self.lte is not None:
            out: list[dict[str, Any]] = []
            if self.gte is not None:
                op, bound = (GT, self.gte - 1) if self.gte >= 1 else (GTE, self.gte)
                out.append({"key": self.key, "operator": op, "values": [str(bound)], **extra})
            if self.lte is not None:
                op, bound = (LT, self.lte + 1) if self.lte >= -1 else (LTE, self.lte)
                out.append({"key": self.key, "operator": op, "values": [str(bound)], **extra})
            return out
        operator = self.operator
        if operator in (IN, NOT_IN):
            return [
                {"key": self.key, "operator": operator, "values": self.sorted_values(), **extra}
            ]
        return [{"key": self.key, "operator": operator, **extra}]

    def __str__(self) -> str:
        operator = self.operator
        if operator in (EXISTS, DOES_NOT_EXIST):
            text = f"{self.key} {operator}"
        else:
            values = self.sorted_values()
            if len(values) > 5:
                values = [*values[:5], f"and {len(values) - 5} others"]
            text = f"{self.key} {operator} [{', '.join(values)}]"
        if self.gte is not None:
            text += f" >={self.gte}"
        if self.lte is not None:
            text += f" <={self.lte}"
        if self.min_values is not None:
            text += f" minValues {self.min_values}"
        return text

    def __repr__(self) -> str:
        return f"Requirement({self})"

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Requirement):
            return NotImplemented
        return (
            self._hash == other._hash
            and self.key == other.key
            and self.complement == other.complement
            and self.values == other.values
            and self.gte == other.gte
            and self.lte == other.lte
            and self.min_values == other.min_values
        )

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            Requirement,
            (self.key, self.complement, self.values, self.gte, self.lte, self.min_values),
        )


def _is_negative(requirement: Requirement) -> bool:
    """NotIn or DoesNotExist: a requirement a node without the label satisfies."""
    if requirement.complement:
        return bool(requirement.values)
    return not requirement.values


def _typo_hint(key: str, known: Iterable[str]) -> str:
    suffix = key.partition("/")[2] or key
    for candidate in sorted(known):
        if candidate != key and (key in candidate or candidate.endswith(suffix)):
            return f" (typo of {candidate!r}?)"
    return ""


class Requirements(Mapping[str, Requirement]):
    """Requirements keyed by label key: an immutable, hashable value.

    Adding a requirement for a key already present intersects the two, so a value of
    this type always holds at most one requirement per key.
    """

    __slots__ = ("_hash", "_reqs")

    _reqs: dict[str, Requirement]
    _hash: int | None

    def __init__(self, requirements: Iterable[Requirement] = ()) -> None:
        """Requirements from individual requirements; duplicates by key are intersected."""
        reqs: dict[str, Requirement] = {}
        for requirement in requirements:
            existing = reqs.get(requirement.key)
            reqs[requirement.key] = (
                requirement if existing is None else existing.intersection(requirement)
            )
        self._reqs = reqs
        self._hash = None

    @classmethod
    def _of(cls, reqs: dict[str, Requirement]) -> Requirements:
        out = cls.__new__(cls)
        out._reqs = reqs
        out._hash = None
        return out

    @classmethod
    def from_node_selector(cls, requirements: Iterable[Mapping[str, Any]] | None) -> Requirements:
        """From node-selector requirement dicts (``matchExpressions`` of a node-selector
        term, or a NodePool's ``requirements`` with ``minValues``)."""
        return cls(Requirement.from_dict(r) for r in requirements or ())

    @classmethod
    def from_labels(cls, labels: Mapping[str, str] | None) -> Requirements:
        """One ``In [value]`` requirement per label (a nodeSelector, a node's labels)."""
        return cls(Requirement.new(k, IN, (v,)) for k, v in (labels or {}).items())

    # -- Mapping protocol ------------------------------------------------------------

    def __getitem__(self, key: str) -> Requirement:
        return self._reqs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._reqs)

    def __len__(self) -> int:
        return len(self._reqs)

    def __contains__(self, key: object) -> bool:
        return key in self._reqs

    # -- queries ---------------------------------------------------------------------

    def get(self, key: str, default: Any = None) -> Any:
        """The requirement for ``key``, or ``default`` (a fast ``Mapping.get``)."""
        return self._reqs.get(key, default)

    def has(self, key: str) -> bool:
        """Whether a requirement for ``key`` is present."""
        return key in self._reqs

    def get_requirement(self, key: str) -> Requirement:
        """The requirement for ``key``; ``Exists`` (anything goes) when absent."""
        requirement = self._reqs.get(key)
        if requirement is None:
            return Requirement(key, True, _EMPTY)
        return requirement

    def requirements(self) -> Sequence[Requirement]:
        """The requirements, sorted by key."""
        return [self._reqs[k] for k in sorted(self._reqs)]

    def labels(self) -> dict[str, str]:
        """The keys restricted to exactly one value, as labels."""
        out: dict[str, str] = {}
        for key, requirement in self._reqs.items():
            value = requirement.single()
            if value is not None:
                out[key] = value
        return out

    def has_min_values(self) -> bool:
        """Whether any requirement carries ``minValues``."""
        return any(r.min_values is not None for r in self._reqs.values())

    # -- algebra ---------------------------------------------------------------------

    def add(self, *requirements: Requirement) -> Requirements:
        """These requirements narrowed by more (intersecting per key)."""
        reqs = dict(self._reqs)
        for requirement in requirements:
            existing = reqs.get(requirement.key)
            reqs[requirement.key] = (
                requirement if existing is None else existing.intersection(requirement)
            )
        return Requirements._of(reqs)

    def intersect(self, other: Requirements) -> Requirements:
        """Both sets of requirements at once (the per-key intersection)."""
        if not other._reqs:
            return self
        if not self._reqs:
            return other
        reqs = dict(self._reqs)
        for key, requirement in other._reqs.items():
            existing = reqs.get(key)
            reqs[key] = requirement if existing is None else existing.intersection(requirement)
        return Requirements._of(reqs)

    def without(self, *keys: str) -> Requirements:
        """A copy without the given keys."""
        if not any(k in self._reqs for k in keys):
            return self
        return Requirements._of({k: v for k, v in self._reqs.items() if k not in keys})

    def overlaps(self, other: Requirements) -> bool:
        """Fast boolean form of :meth:`intersects` (no reason is built)."""
        small, large = (self._reqs, other._reqs)
        if len(small) > len(large):
            small, large = large, small
        for key, requirement in small.items():
            counterpart = large.get(key)
            if counterpart is None or requirement is counterpart:
                continue
            if requirement.has_intersection(counterpart):
                continue
            if _is_negative(requirement) and _is_negative(counterpart):
                continue
            return False
        return True

    def intersects(self, other: Requirements) -> str | None:
        """Why the requirements on keys both sides define cannot all be met, or None.

        Keys only one side defines are fine. Two negative requirements (NotIn or
        DoesNotExist) never conflict: a node without the label satisfies both.
        """
        small, large = (self._reqs, other._reqs)
        if len(small) > len(large):
            small, large = large, small
        for key, requirement in small.items():
            counterpart = large.get(key)
            if counterpart is None or requirement is counterpart:
                continue
            if requirement.has_intersection(counterpart):
                continue
            mine = self._reqs[key]
            theirs = other._reqs[key]
            if _is_negative(mine) and _is_negative(theirs):
                continue
            return f"{theirs} is not compatible with {mine}"
        return None

    def compatible(
        self, other: Requirements, allow_undefined: frozenset[str] = _EMPTY
    ) -> str | None:
        """Why ``other`` (what a pod asks for) cannot be met by ``self`` (what a node or
        NodePool offers), or None when it can.

        A key ``other`` requires must be defined by ``self`` unless its requirement is
        NotIn/DoesNotExist or the key is in ``allow_undefined`` (the well-known labels,
        which instance types define even when a NodePool does not).
        """
        reqs = self._reqs
        for key, requirement in other._reqs.items():
            if key in reqs or key in allow_undefined or _is_negative(requirement):
                continue
            hint = _typo_hint(key, [*allow_undefined, *reqs])
            return f"label {key!r} does not have known values{hint}"
        return self.intersects(other)

    # -- conversion ------------------------------------------------------------------

    def to_node_selector(self) -> list[dict[str, Any]]:
        """As node-selector requirement dicts, sorted by key."""
        out: list[dict[str, Any]] = []
        for requirement in self.requirements():
            out.extend(requirement.to_dicts())
        return out

    def __str__(self) -> str:
        return ", ".join(str(r) for r in self.requirements())

    def __repr__(self) -> str:
        return f"Requirements({self})"

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Requirements):
            return NotImplemented
        return self._reqs == other._reqs

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._reqs.values()))
        return self._hash


def _shown(key: str) -> str:
    """A label key as an error message names it: as is, or quoted when it holds a line
    break or another unprintable character (the message stays one line)."""
    return key if key.isprintable() else repr(key)
