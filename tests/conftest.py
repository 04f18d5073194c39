"""Test configuration shared by every test package.

Tests that need the local control plane take the ``cluster`` fixture (see
tests/controlplane/); they carry the ``cluster`` marker so ``pytest -m "not cluster"``
runs only the fast, pure tests.
"""
