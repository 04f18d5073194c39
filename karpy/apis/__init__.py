"""Pydantic models of Karpenter's v1 API (NodePool, NodeClaim) and the well-known labels,
annotations, taints and finalizer that karpy shares with Karpenter."""
