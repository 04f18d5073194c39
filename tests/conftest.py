"""Test configuration shared by every test package.

Tests that need the local control plane take the ``cluster`` fixture (see
tests/controlplane/); they carry the ``cluster`` marker so ``pytest -m "not cluster"``
runs only the fast, pure tests.
"""

# The local control plane's fixtures (cluster, api_client, namespace) live beside the Go
# program that builds it. tests/ has no __init__.py, so pytest puts this directory on
# sys.path and tests/controlplane is importable as the namespace package `controlplane`.
pytest_plugins = ["controlplane.fixtures"]
