"""The in-memory cluster model fed by informers: nodes joined to NodeClaims, pods bound
per node, in-flight capacity and nominations."""
