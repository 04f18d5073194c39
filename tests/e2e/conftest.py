"""End-to-end tests: karpy with the kwok provider against the local control plane.

Each test starts karpy itself (tests/e2e/harness.py) so it can choose settings and
provider faults; all share the session's cluster and clean up what they create.
"""
