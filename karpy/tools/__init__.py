"""What karpy shows its users besides running: ``karpy simulate`` (a dry run of
provisioning and consolidation), ``karpy explain`` (why a pod is pending, why a node is
or is not disrupted) and ``karpy top`` (nodes and their cost, live).

Every tool is read-only: it reads a live cluster (or a snapshot file) into the same
cluster model the controllers use and runs the same code the controllers run, but it
never writes to the API server or calls a cloud to create or delete anything.
"""
