"""The ``nodeclaim.lifecycle`` controller and its steps, one module each: ``launch``
(CloudProvider.create), ``registration`` (adopt the Node), ``initialization`` (the Node is
ready for pods) and ``liveness`` (give up on NodeClaims that never launch or register).
``controller`` runs them in order and writes the NodeClaim back once."""

from karpy.controllers.nodeclaim.lifecycle.controller import LifecycleController

__all__ = ["LifecycleController"]
