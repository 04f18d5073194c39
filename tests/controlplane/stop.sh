#!/usr/bin/env bash
# Stops the local control plane in DIR (SIGTERM to its supervisor, which stops the
# components and etcd in order). The directory and its data stay; start.sh resumes it.
# usage: stop.sh [DIR]    DIR default: $KARPY_CLUSTER_DIR, else <repo>/.cluster
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${1:-${KARPY_CLUSTER_DIR:-$root/.cluster}}
# Running = the pid file names a live `controlplane up` (not a recycled pid or a zombie).
running() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | grep -q "controlplane up"; }
pid=$(cat "$dir/controlplane.pid" 2>/dev/null || true)
if [[ -z $pid ]] || ! running "$pid"; then
  echo "stop.sh: no control plane running in $dir"
  exit 0
fi
kill -TERM "$pid"
for _ in $(seq 300); do
  running "$pid" || { echo "stop.sh: stopped $dir"; exit 0; }
  sleep 0.1
done
echo "stop.sh: pid $pid still running after 30s; killing it" >&2
kill -KILL "$pid"
