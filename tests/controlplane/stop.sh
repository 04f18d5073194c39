#!/usr/bin/env bash
# Stops the local control plane in DIR (SIGTERM to its supervisor, which stops the
# components and etcd in order). The directory and its data stay; start.sh resumes it.
# usage: stop.sh [DIR]    DIR default: $KARPY_CLUSTER_DIR, else <repo>/.cluster
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${1:-${KARPY_CLUSTER_DIR:-$root/.cluster}}
pid=$(cat "$dir/controlplane.pid" 2>/dev/null || true)
if [[ -z $pid ]] || ! kill -0 "$pid" 2>/dev/null; then
  echo "stop.sh: no control plane running in $dir"
  exit 0
fi
# Guard against a recycled pid: it must be our supervisor.
if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "controlplane up"; then
  echo "stop.sh: pid $pid in $dir/controlplane.pid is not a control plane; not stopping it" >&2
  exit 1
fi
kill -TERM "$pid"
for _ in $(seq 300); do
  kill -0 "$pid" 2>/dev/null || { echo "stop.sh: stopped $dir"; exit 0; }
  sleep 0.1
done
echo "stop.sh: pid $pid still running after 30s; killing it" >&2
kill -KILL "$pid"
