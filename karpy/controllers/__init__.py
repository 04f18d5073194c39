"""The autoscaler's controllers, built on :mod:`karpy.runtime`: provisioning, NodeClaim
lifecycle, disruption, termination, NodePool bookkeeping and metrics."""
