"""The read-only containers that cached objects are made of.

Objects read from the cache are :class:`FrozenDict` / :class:`FrozenList` trees, shared
between every reader, so writing to one raises; ``karpy.runtime.thaw(obj)`` gives a
mutable copy and ``karpy.runtime.freeze(obj)`` the reverse.
"""

from ._objects import FrozenDict, FrozenList

__all__ = ["FrozenDict", "FrozenList"]
