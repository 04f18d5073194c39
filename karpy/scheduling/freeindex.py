"""First fit over existing nodes without walking the full ones.

:class:`FreeIndex` is a segment tree over nodes (in their scheduling order) whose inner
entries hold the per-resource maximum of the free resources below them, so "the first
node at or after position p with room for this request" skips every subtree that has
no such node. A per-resource maximum can promise more than any single node has; the
search then backs out of that subtree, which is still exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import ge

__all__ = ["FreeIndex"]


class FreeIndex:
    """Leftmost-fit queries over fixed positions with free-resource vectors."""

    __slots__ = ("_size", "_tree")

    def __init__(self, free: Sequence[Sequence[int]], dimensions: int) -> None:
        size = 1
        while size < max(len(free), 1):
            size *= 2
        # Padding leaves can never fit: every request asks for at least one pod slot.
        padding = (-1,) * dimensions
        tree: list[tuple[int, ...]] = [padding] * (2 * size)
        for position, vector in enumerate(free):
            tree[size + position] = tuple(max(v, 0) for v in vector)
        for i in range(size - 1, 0, -1):
            tree[i] = tuple(map(max, tree[2 * i], tree[2 * i + 1]))
        self._size = size
        self._tree = tree

    def update(self, position: int, free: Sequence[int]) -> None:
        """Set the free resources of the node at ``position``."""
        tree = self._tree
        i = self._size + position
        leaf = tuple([v if v > 0 else 0 for v in free])
        if leaf == tree[i]:
            return  # unchanged, so are the maxima above
        tree[i] = leaf
        i >>= 1
        while i:
            left = 2 * i
            merged = tuple(map(max, tree[left], tree[left + 1]))
            if merged == tree[i]:
                break  # the maxima above do not change either
            tree[i] = merged
            i >>= 1

    def find(self, need: Sequence[int], start: int = 0) -> int | None:
        """The first position >= ``start`` whose free resources hold ``need``."""
        size = self._size
        if start >= size:
            return None
        tree = self._tree
        # ``all(map(ge, entry, need))`` is "entry holds need", written out at each use:
        # this loop runs a few million times per large solve, and a helper function
        # call would cost more than the comparison itself.
        # From the start, descend from the root; otherwise walk right from the leaf.
        i = 1 if start == 0 else start + size
        while True:
            if all(map(ge, tree[i], need)):
                while i < size:
                    left = 2 * i
                    if all(map(ge, tree[left], need)):
                        i = left
                    elif all(map(ge, tree[left + 1], need)):
                        i = left + 1
                    else:
                        break  # the maxima came from different nodes: nothing fits here
                if i >= size:
                    return i - size
            while i & 1:  # climb while we are a right child
                i >>= 1
            if i == 0:
                return None
            i += 1
