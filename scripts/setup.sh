#!/usr/bin/env bash
# Installs everything karpy needs on a fresh machine into ./.venv and builds the local
# control plane (tests/controlplane), Karpenter's kwok controller (the takeover tests) and
# nodeadm's validator (tests/providers/aws/nodeadm).
# Safe to run again: each step is skipped or cached when nothing changed.
#
#   bash scripts/setup.sh          everything
#   bash scripts/setup.sh python   only ./.venv
#   bash scripts/setup.sh builds   only the Go builds (scripts/test.sh runs these in the
#                                  background while the checks and the pure tests run)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
what=${1:-all}
case $what in
  all|python|builds) ;;
  *) echo "setup.sh: unknown step '$what' (all, python or builds)" >&2; exit 2 ;;
esac

if [ "$what" != builds ]; then
py=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
stamp=.venv/.karpy-installed
deps="pyproject.toml providers/aws/pyproject.toml providers/azure/pyproject.toml"
if [ ! -f "$stamp" ] || [ -n "$(find $deps -newer "$stamp" 2>/dev/null)" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[dev]" -e "providers/aws[test]" -e providers/azure -e examples/provider-plugin 2>/dev/null \
    || .venv/bin/python -m pip install -q -e ".[dev]" -e "providers/aws[test]" -e providers/azure
  touch "$stamp"
fi
fi

if [ "$what" != python ]; then
  # nodeadm's own NodeConfig validation, which the AWS provider's user-data tests run
  # (first: those are pure tests, run before the cluster's)
  bash tests/providers/aws/nodeadm/build.sh >/dev/null
  bash tests/controlplane/build.sh
  # the real Karpenter (kwok provider) for the takeover e2e: a toolchain of its own, so
  # a separate cache stamp
  bash tests/controlplane/build-karpenter.sh
fi
