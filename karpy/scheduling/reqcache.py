"""Requirement intersections cached by value for one solve.

A solve asks the same questions many times (this NodeClaim's requirements with that
signature's, these with one more domain); :class:`RequirementCache` answers each once and
interns the results, so equal requirements are the same object and later look-ups hash
and compare by identity first.
"""

from __future__ import annotations

from karpy.scheduling.requirements import Requirement, Requirements

__all__ = ["RequirementCache"]


class RequirementCache:
    """Cached :meth:`Requirements.compatible` + :meth:`Requirements.intersect`.

    ``well_known`` are the labels a NodeClaim need not define for a pod to require them
    (used by :meth:`merge`; :meth:`merge_node` allows none: a node's labels are final).
    """

    __slots__ = ("_intern", "_merge_cache", "_narrow_cache", "_node_merge_cache", "well_known")

    def __init__(self, well_known: frozenset[str]) -> None:
        self.well_known = well_known
        self._merge_cache: dict[tuple[Requirements, Requirements], Requirements | str] = {}
        self._node_merge_cache: dict[tuple[Requirements, Requirements], Requirements | str] = {}
        self._narrow_cache: dict[tuple[Requirements, str, tuple[str, ...]], Requirements] = {}
        self._intern: dict[Requirements, Requirements] = {}

    def _interned(self, reqs: Requirements) -> Requirements:
        return self._intern.setdefault(reqs, reqs)

    def merge(self, base: Requirements, pod: Requirements) -> Requirements | str:
        """A NodeClaim's requirements with a pod's, or why they do not meet."""
        key = (base, pod)
        cached = self._merge_cache.get(key)
        if cached is None:
            reason = base.compatible(pod, self.well_known)
            cached = reason if reason is not None else self._interned(base.intersect(pod))
            self._merge_cache[key] = cached
        return cached

    def merge_node(self, base: Requirements, pod: Requirements) -> Requirements | str:
        """An existing node's requirements with a pod's, or why they do not meet."""
        key = (base, pod)
        cached = self._node_merge_cache.get(key)
        if cached is None:
            reason = base.compatible(pod)
            cached = reason if reason is not None else self._interned(base.intersect(pod))
            self._node_merge_cache[key] = cached
        return cached

    def narrow(self, reqs: Requirements, key: str, domains: tuple[str, ...]) -> Requirements:
        """``reqs`` with ``key`` limited to ``domains``."""
        cache_key = (reqs, key, domains)
        cached = self._narrow_cache.get(cache_key)
        if cached is None:
            cached = self._interned(reqs.add(Requirement(key, False, frozenset(domains))))
            self._narrow_cache[cache_key] = cached
        return cached
