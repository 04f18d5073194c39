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
echo "== pytest"
pytest -p no:cacheprovider "$@"
