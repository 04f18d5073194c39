#!/usr/bin/env bash
# Installs everything karpy needs on a fresh machine into ./.venv and builds the local
# control plane (tests/controlplane), helm for the chart tests (tests/controlplane/
# build-helm.sh), Karpenter's kwok controller (the takeover tests) and nodeadm's validator
# (tests/providers/aws/nodeadm).
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
deps="pyproject.toml providers/aws/pyproject.toml providers/azure/pyproject.toml
      examples/provider-plugin/pyproject.toml"
if [ ! -f "$stamp" ] || [ -n "$(find $deps -newer "$stamp" 2>/dev/null)" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # The example provider plugin too: its tests (examples/provider-plugin/tests) and the
  # plugin-discovery tests need it installed, so a failure here fails the setup.
  .venv/bin/python -m pip install -q -e ".[dev]" -e "providers/aws[test]" -e providers/azure \
    -e examples/provider-plugin
  touch "$stamp"
fi

# Programs the tests drive besides Python's: tmux (tests/e2e/test_top_e2e.py runs
# `karpy top` in a real terminal) and Prometheus (the scale-down e2e in
# tests/e2e/test_disruption.py evaluates every dashboard panel through it). Installed with
# apt-get when root, as scripts/image.sh does for its tools; otherwise said here, and the
# tests' skips say it again.
missing=()
command -v tmux >/dev/null || missing+=(tmux)
command -v prometheus >/dev/null || missing+=(prometheus)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup.sh: installing ${missing[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null
    apt-get -q -y -o DPkg::Lock::Timeout=600 install --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup.sh: ${missing[*]} missing (install it; not root, so not installed here):" \
      "tests/e2e/test_top_e2e.py (tmux) and the dashboards' part of tests/e2e/test_disruption.py" \
      "(prometheus) will skip" >&2
  fi
fi
fi

if [ "$what" != python ]; then
  # In the order the tests need them (scripts/timed.sh: the test command prints each
  # build's time at its end): nodeadm's own NodeConfig validation, which the AWS
  # provider's user-data tests run (pure tests, midway through); helm, for the chart tests
  # (pure, run last of the pure tests); the control plane, for the cluster tests; the real
  # Karpenter (kwok provider) for the takeover e2e, the first of the cluster tests. The last
  # three are one Go module (tests/controlplane/go.mod), so each after the first finds
  # most of its packages compiled; each keeps its own cache stamp.
  bash scripts/timed.sh "build: nodeadm's validator" bash tests/providers/aws/nodeadm/build.sh >/dev/null
  bash scripts/timed.sh "build: helm" bash tests/controlplane/build-helm.sh >/dev/null
  bash scripts/timed.sh "build: control plane" bash tests/controlplane/build.sh
  bash scripts/timed.sh "build: Karpenter (kwok)" bash tests/controlplane/build-karpenter.sh
fi
