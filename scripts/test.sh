#!/usr/bin/env bash
# The one command that sets up everything and runs every check and test:
# ruff, mypy --strict, the import-linter layer contracts, then pytest (unit tests and the
# e2e tests against the local control plane, which the pytest fixture starts and stops).
# It ends with the time of each phase (scripts/timed.sh records them). Budget: 35 minutes
# on a fresh 2-core machine, cold Go builds included (docs/performance.md#the-test-command).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
began=$EPOCHREALTIME
KARPY_PHASE_TIMES=$(mktemp "${TMPDIR:-/tmp}/karpy-times.XXXXXX")
export KARPY_PHASE_TIMES
builds_log=$(mktemp "${TMPDIR:-/tmp}/karpy-builds.XXXXXX")
builds=

# The time per phase, in the order they ended; the background builds after, each on its
# own line (they overlap the checks and the tests, so they do not add up to the total).
summary() {
  local total
  total=$(awk -v a="$began" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  echo "== time per phase"
  awk -F'\t' -v total="$total" '
    function row(name, seconds, failed) {
      printf "%-40s %8.1f s  %5.1f min%s\n", name, seconds, seconds / 60, failed ? "  (failed)" : ""
    }
    $1 ~ /^build: / { builds[++n] = $0; next }
    { row($1, $2, $3 == "failed") }
    END {
      if (n) print "background builds (alongside the phases above):"
      for (i = 1; i <= n; i++) { split(builds[i], f, "\t"); row("  " substr(f[1], 8), f[2], f[3] == "failed") }
      row("total", total, 0)
    }' "$KARPY_PHASE_TIMES"
}
finish() {
  [ -z "$builds" ] || kill -- -"$builds" 2>/dev/null || true
  summary
  rm -f "$KARPY_PHASE_TIMES" "$builds_log"
}
trap finish EXIT

# The Go builds (a cold one takes about 8 minutes) and the image (about 4, root only) run
# in the background while the venv is set up, ruff, mypy and import-linter run, and the
# tests start: each build is cached and locked, so the fixture that needs one waits for
# it, or builds it itself if this failed. They need nothing from the venv, so they start
# first: on a cold run the cluster tests' start waits for the Go builds (time per phase:
# "waiting for the Go builds"), and the venv's pip install is mostly downloads. The image comes after the
# Go builds, by when setup.sh's own apt-get (tmux) is long done.
# Its own session (setsid), so a check failing early stops the whole build with it.
setsid bash -c '
  set -e
  bash scripts/setup.sh builds
  if [ "$(id -u)" = 0 ]; then
    bash scripts/timed.sh "build: image (scripts/image.sh)" bash scripts/image.sh
  else
    echo "not root: the image is not built and tests/e2e/test_image_e2e.py skips"
  fi' >"$builds_log" 2>&1 &
builds=$!

bash scripts/timed.sh "setup (venv)" bash scripts/setup.sh python
export PATH="$root/.venv/bin:$root/tests/controlplane/bin:$PATH"

echo "== ruff"
bash scripts/timed.sh ruff ruff check karpy providers tests examples
echo "== mypy --strict"
bash scripts/timed.sh "mypy --strict" mypy karpy providers/aws/karpy_aws providers/azure/karpy_azure
echo "== import-linter"
bash scripts/timed.sh import-linter lint-imports
status=0
# -rs: every skip is printed with its reason (tests/testrun/skips.py fails one without);
# the pytest plugin tests/testrun/phases.py records the pure and the cluster tests' times.
# -m "not soak": the long soaks run from scripts/chaos.sh.
if [ "$#" -eq 0 ]; then
  # Two runs, one after the other. The pure tests first, CPU-bound and independent: one
  # pytest-xdist worker per core. Then the cluster tests on two workers with a control
  # plane each (the session's `cluster` fixture): most of their time is spent waiting on
  # the cluster (a consolidation period, a toleration, a Lease), with a third of the
  # machine's CPU busy for one cluster. A test file runs whole on one worker, the files
  # in the order collection sorted them (--no-loadscope-reorder;
  # tests/controlplane/fixtures.py says why the order). Run beside the cluster tests,
  # even at nice 19, the pure tests took 19 minutes instead of 7 and a timing test among
  # them was starved past its one-second deadline. PYTEST_ADDOPTS reaches both runs
  # (e.g. --durations=60).
  echo "== pytest: pure tests (one worker per core)"
  pytest -p no:cacheprovider -rs -m "not soak and not cluster" -n auto || status=$?
  echo "== pytest: cluster tests (two workers, a control plane each)"
  pytest -p no:cacheprovider -rs -m "not soak and cluster" -n 2 --dist loadfile \
    --no-loadscope-reorder || status=$?
else
  # Arguments of your own (paths, -k, a -m that replaces the one here): one run, in
  # order, pure tests first.
  echo "== pytest"
  pytest -p no:cacheprovider -rs -m "not soak" "$@" || status=$?
fi
echo "== builds (control plane, nodeadm's validator, image)"
if wait "$builds"; then
  tail -n 5 "$builds_log"
else
  cat "$builds_log"
  echo "the background builds failed (above)" >&2
  status=1
fi
builds=
exit "$status"
