#!/usr/bin/env bash
# Waits until the local control plane in DIR is ready (see start.sh for what "ready" means).
# usage: wait.sh [DIR] [--timeout 60s]    DIR default: $KARPY_CLUSTER_DIR, else <repo>/.cluster
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${KARPY_CLUSTER_DIR:-$root/.cluster}
if [[ $# -gt 0 && $1 != -* ]]; then dir=$1; shift; fi
exec "$here/bin/controlplane" wait --dir "$dir" "$@"
