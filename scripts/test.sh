#!/usr/bin/env bash
# The one command that sets up everything and runs every check and test:
# ruff, mypy --strict, the import-linter layer contracts, then pytest (unit tests and the
# e2e tests against the local control plane, which the pytest fixture starts and stops).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup.sh python
export PATH="$root/.venv/bin:$root/tests/controlplane/bin:$PATH"

# The Go builds (a cold one takes about 8 minutes) and the image (about 4, root only) run
# in the background while ruff, mypy, import-linter and the pure tests run: pytest runs
# the cluster tests last (tests/controlplane/fixtures.py), and each build is cached and
# locked, so the fixture that needs one waits for it, or builds it itself if this failed.
# Its own session (setsid), so a check failing early stops the whole build with it.
builds_log=$(mktemp "${TMPDIR:-/tmp}/karpy-builds.XXXXXX")
setsid bash -c '
  set -e
  bash scripts/setup.sh builds
  if [ "$(id -u)" = 0 ]; then
    bash scripts/image.sh
  else
    echo "not root: the image is not built and tests/e2e/test_image_e2e.py skips"
  fi' >"$builds_log" 2>&1 &
builds=$!
trap 'kill -- -"$builds" 2>/dev/null || true' EXIT

echo "== ruff"
ruff check karpy providers tests examples
echo "== mypy --strict"
mypy karpy providers/aws/karpy_aws providers/azure/karpy_azure
echo "== import-linter"
lint-imports
echo "== pytest"
status=0
pytest -p no:cacheprovider "$@" || status=$?
echo "== builds (control plane, nodeadm's validator, image)"
if wait "$builds"; then
  tail -n 5 "$builds_log"
else
  cat "$builds_log"
  echo "the background builds failed (above)" >&2
  status=1
fi
trap - EXIT
rm -f "$builds_log"
exit "$status"
