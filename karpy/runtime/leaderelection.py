"""Leader election on its own, for code that does not run a :class:`~karpy.runtime.Manager`.

A Manager given ``leader_election=LeaderElectionConfig(...)`` runs a
:class:`LeaderElector` itself; use this one directly only to hold a Lease around other
work. The lease rules (monotonic expiry, release on shutdown) are in its docstring.
"""

from ._leaderelection import LeaderElector

__all__ = ["LeaderElector"]
