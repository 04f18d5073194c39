"""Preference relaxation during one solve: one :class:`Signature` per pod shape and
relaxation step, built once and bound to its topology groups, and the next step to try
when a pod fits nowhere.

The steps themselves (which preference goes first) are :mod:`karpy.scheduling.signature`'s;
this module only caches the signatures they produce for one solve.
"""

from __future__ import annotations

from typing import Any

from karpy.scheduling.pod import Pod
from karpy.scheduling.signature import Relaxation, Signature
from karpy.scheduling.topologyrules import TopologyRules

__all__ = ["Signatures"]


class Signatures:
    """The signatures of one solve.

    ``base_min`` maps a pod signature to the smallest requests of its pending pods
    (filled in by the solve before the first :meth:`get`); :attr:`min_vec` gives the
    same per :class:`Signature`, relaxed ones included.
    """

    __slots__ = ("_sigs", "base_min", "min_vec", "prefer", "prefer_no_schedule", "topology")

    def __init__(self, topology: TopologyRules, *, prefer: bool, prefer_no_schedule: bool) -> None:
        self.topology = topology
        self.prefer = prefer
        self.prefer_no_schedule = prefer_no_schedule
        self._sigs: dict[tuple[Any, Relaxation], Signature] = {}
        self.min_vec: dict[Signature, list[int]] = {}
        self.base_min: dict[tuple[Any, ...], list[int]] = {}

    def get(self, pod: Pod, relaxation: Relaxation) -> Signature:
        """The signature of ``pod``'s shape with ``relaxation`` applied."""
        key = (pod.signature, relaxation)
        sig = self._sigs.get(key)
        if sig is not None:
            return sig
        sig = Signature(pod, relaxation, self.prefer)
        self.topology.bind(sig)
        self._sigs[key] = sig
        self.min_vec[sig] = self.base_min[pod.signature]
        return sig

    def relax(self, sig: Signature) -> Signature | None:
        """The next, more relaxed signature (None: nothing left to relax)."""
        if sig.relaxed is False:
            step = sig.next_relaxation(self.prefer_no_schedule)
            if step is None:
                sig.relaxed = None
            else:
                relaxation, because = step
                sig.relaxed = self.get(sig.pod, relaxation)
                sig.relaxed_because = because
        return sig.relaxed if isinstance(sig.relaxed, Signature) else None
