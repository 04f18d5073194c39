"""The vocabulary of ``karpy convert``: notes, errors, the shared context and converters."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.apis.convert.fieldpath import untracked_get

__all__ = [
    "ConversionContext",
    "ConversionError",
    "Converter",
    "Document",
    "Note",
    "PendingKubelet",
    "describe",
]

#: One manifest as parsed from YAML.
Document = dict[str, Any]


class ConversionError(Exception):
    """Input that cannot be converted: an unknown kind, or a field with no v1 meaning
    that cannot be dropped safely. The message names the object, the field and the fix."""


@dataclass(frozen=True)
class Note:
    """One field that was dropped, moved or changed, reported on stderr."""

    subject: str
    message: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.message}"


def describe(doc: Mapping[str, Any]) -> str:
    """``Kind/name (apiVersion)`` for messages."""
    # Untracked reads: describing the object is not reading a field of it (fieldpath).
    metadata = untracked_get(doc, "metadata")
    name = untracked_get(metadata, "name", "<unnamed>") if isinstance(metadata, Mapping) \
        else "<unnamed>"
    kind = untracked_get(doc, "kind", "<no kind>")
    return f"{kind}/{name} ({untracked_get(doc, 'apiVersion', '<no apiVersion>')})"


@dataclass
class PendingKubelet:
    """Kubelet settings taken off a NodePool, to be put on the NodeClass it references."""

    kubelet: dict[str, Any]
    source: str
    consumed: bool = False


@dataclass
class ConversionContext:
    """State shared by the converters of one run."""

    #: The NodeClass (group, kind) to use when an old nodeClassRef/providerRef names none.
    default_nodeclass: tuple[str, str] | None = None
    notes: list[Note] = field(default_factory=list)
    #: Kubelet settings by the (group, kind, name) of the NodeClass they belong on.
    kubelets: dict[tuple[str, str, str], PendingKubelet] = field(default_factory=dict)
    #: Old NodeClass kinds and their v1 names, by (group, old kind).
    renamed_kinds: dict[tuple[str, str], str] = field(default_factory=dict)

    def note(self, doc: Mapping[str, Any], message: str) -> None:
        """Report a change made to ``doc``."""
        self.notes.append(Note(describe(doc), message))

    def hand_kubelet_to_nodeclass(
        self, doc: Mapping[str, Any], ref: tuple[str, str, str], kubelet: dict[str, Any]
    ) -> None:
        """Record kubelet settings of ``doc`` for the NodeClass ``ref``."""
        source = describe(doc)
        existing = self.kubelets.get(ref)
        if existing is not None and existing.kubelet != kubelet:
            raise ConversionError(
                f"{source} and {existing.source} both reference {ref[1]}/{ref[2]} with "
                f"different kubelet settings ({json.dumps(kubelet, sort_keys=True)} vs "
                f"{json.dumps(existing.kubelet, sort_keys=True)}); in v1 kubelet settings live "
                f"on the NodeClass, so give each NodePool its own {ref[1]} and convert again"
            )
        if existing is None:
            self.kubelets[ref] = PendingKubelet(kubelet, source)

    def take_kubelet(self, ref: tuple[str, str, str]) -> PendingKubelet | None:
        """Kubelet settings destined for the NodeClass ``ref``, marking them delivered."""
        pending = self.kubelets.get(ref)
        if pending is not None:
            pending.consumed = True
        return pending


@dataclass(frozen=True)
class Converter:
    """Converts one (apiVersion, kind) of input into v1 documents.

    Converters of ``phase`` 0 (NodePools and the like) run before those of phase 1
    (NodeClasses), so that kubelet settings taken off a NodePool reach its NodeClass.
    """

    api_version: str
    kind: str
    convert: Callable[[Document, ConversionContext], list[Document]]
    phase: int = 0
    #: The kind this converter writes when it differs from ``kind`` (AWSNodeTemplate ->
    #: EC2NodeClass), so that references to the old kind are renamed too.
    output_kind: str | None = None
