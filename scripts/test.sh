#!/usr/bin/env bash
# The one command that sets up everything and runs every check and test:
# ruff, mypy --strict, the import-linter layer contracts, then pytest (unit tests and the
# e2e tests against the local control plane, which the pytest fixture starts and stops).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup.sh
export PATH="$root/.venv/bin:$root/tests/controlplane/bin:$PATH"

echo "== ruff"
ruff check karpy providers tests examples
echo "== mypy --strict"
mypy karpy providers/aws/karpy_aws providers/azure/karpy_azure
echo "== import-linter"
lint-imports
echo "== image"
# The image tests/e2e/test_image_e2e.py runs (cached: a no-op when its inputs are
# unchanged; a cold build takes minutes). It needs root; without it the e2e skips.
if [ "$(id -u)" = 0 ]; then
  bash scripts/image.sh
else
  echo "not root: the image is not built and tests/e2e/test_image_e2e.py skips"
fi
echo "== pytest"
pytest -p no:cacheprovider "$@"
