"""Label and field selector query strings, parsed once and matched against cached objects.

The API server filters watches and lists itself; these classes let the cache answer the
same questions locally (``Client.list(kind, label_selector=...)`` served from the cache)
with the server's syntax: ``a=b,c!=d,e in (x,y),f notin (z),g,!h`` for labels and
``spec.nodeName=n,metadata.namespace!=kube-system`` for fields.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FieldQuery", "LabelQuery"]

_TERM = re.compile(
    r"""\s*(?:
        (?P<not>!)\s*(?P<nkey>[^\s,=!()]+)                                   # !key
      | (?P<skey>[^\s,=!()]+)\s+(?P<op>in|notin)\s*\((?P<vals>[^)]*)\)        # key in (a,b)
      | (?P<ekey>[^\s,=!()]+)\s*(?P<eop>==|=|!=)\s*(?P<val>[^\s,=!()]*)       # key=value
      | (?P<xkey>[^\s,=!()]+)                                                 # key
    )\s*(?:,|$)""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    op: str  # "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "in":
            return present and labels[self.key] in self.values
        if self.op == "notin":
            return not present or labels[self.key] not in self.values
        if self.op == "exists":
            return present
        return not present


@dataclass(frozen=True, slots=True)
class LabelQuery:
    """A parsed ``label_selector=`` query string (``a=b,c in (x,y),!d``) or equality
    mapping; the empty query matches everything."""

    requirements: tuple[_Requirement, ...] = ()
    text: str = ""

    @classmethod
    def parse(cls, selector: str | Mapping[str, str] | None) -> LabelQuery:
        """Parse the server's string syntax, or take a ``{key: value}`` equality mapping."""
        if selector is None:
            return cls()
        if isinstance(selector, Mapping):
            reqs = tuple(_Requirement(k, "in", frozenset([v])) for k, v in sorted(selector.items()))
            return cls(reqs, ",".join(f"{k}={v}" for k, v in sorted(selector.items())))
        reqs_list: list[_Requirement] = []
        pos = 0
        text = selector.strip()
        while pos < len(text):
            m = _TERM.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"invalid label selector {selector!r} near position {pos}")
            pos = m.end()
            if m.group("nkey"):
                reqs_list.append(_Requirement(m.group("nkey"), "!exists"))
            elif m.group("skey"):
                vals = frozenset(v.strip() for v in m.group("vals").split(",") if v.strip())
                reqs_list.append(_Requirement(m.group("skey"), m.group("op"), vals))
            elif m.group("ekey"):
                op = "notin" if m.group("eop") == "!=" else "in"
                reqs_list.append(_Requirement(m.group("ekey"), op, frozenset([m.group("val")])))
            else:
                reqs_list.append(_Requirement(m.group("xkey"), "exists"))
        return cls(tuple(reqs_list), text)

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """True if ``labels`` satisfy every requirement."""
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)

    def __str__(self) -> str:
        return self.text


def _as_text(value: Any) -> str:
    # The server renders booleans the JSON way in field selectors ("true", not "True").
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True, slots=True)
class FieldQuery:
    """A parsed field selector (``path=value`` / ``path!=value`` terms, ANDed)."""

    terms: tuple[tuple[tuple[str, ...], bool, str], ...] = ()
    text: str = ""

    @classmethod
    def parse(cls, selector: str | None) -> FieldQuery:
        """Parse ``a.b=c,d!=e``; values compare as strings, as the server does."""
        if not selector:
            return cls()
        terms = []
        for raw in selector.split(","):
            term = raw.strip()
            if not term:
                continue
            if "!=" in term:
                path, value = term.split("!=", 1)
                equal = False
            elif "==" in term:
                path, value = term.split("==", 1)
                equal = True
            elif "=" in term:
                path, value = term.split("=", 1)
                equal = True
            else:
                raise ValueError(f"invalid field selector term {term!r}: expected path=value")
            terms.append((tuple(path.strip().split(".")), equal, value.strip()))
        return cls(tuple(terms), selector)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """True if every term holds for ``obj`` (a missing field reads as "")."""
        for path, equal, value in self.terms:
            cur: Any = obj
            for part in path:
                cur = cur.get(part) if isinstance(cur, Mapping) else None
            actual = "" if cur is None else _as_text(cur)
            if (actual == value) != equal:
                return False
        return True

    def __bool__(self) -> bool:
        return bool(self.terms)

    def __str__(self) -> str:
        return self.text
