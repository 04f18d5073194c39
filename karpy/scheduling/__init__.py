"""The scheduling simulator: pure, synchronous and I/O-free. Requirements algebra,
resources, taints, topology, affinity and the bin-packing that decides which pods go on
existing capacity and which new NodeClaims to create."""
