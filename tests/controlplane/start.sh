#!/usr/bin/env bash
# Builds (cached) and starts the local control plane in the background, then waits until
# it is ready: /readyz ok, the default ServiceAccount exists, kube-controller-manager,
# kube-scheduler and kwok healthy.
#
# usage: start.sh [--fresh] [--port N] [DIR]
#   DIR      cluster directory; default $KARPY_CLUSTER_DIR, else <repo>/.cluster.
#            A directory holding a stopped cluster is started again with its data.
#   --fresh  delete DIR first (a brand-new, empty cluster)
#   --port   API server port on 127.0.0.1 (default: free, or the port DIR used before)
# Prints the admin kubeconfig path on success. Stop it with stop.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${KARPY_CLUSTER_DIR:-$root/.cluster}
fresh=0
up_args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --fresh) fresh=1 ;;
    --port) up_args+=(--port "$2"); shift ;;
    --port=*) up_args+=("$1") ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "start.sh: unknown option $1" >&2; exit 2 ;;
    *) dir=$1 ;;
  esac
  shift
done

bash "$here/build.sh" >&2
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
bin=$here/bin

# Running = the pid file names a live `controlplane up` (not a recycled pid or a zombie).
running() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | grep -q "controlplane up"; }
if pid=$(cat "$dir/controlplane.pid" 2>/dev/null) && running "$pid"; then
  echo "start.sh: already running (pid $pid) in $dir" >&2
  "$bin/controlplane" wait --dir "$dir" --timeout 90s >&2
  echo "$dir/admin.kubeconfig"
  exit 0
fi
if [[ $fresh == 1 ]]; then
  rm -rf "$dir"
  mkdir -p "$dir"
fi

# setsid: the cluster outlives this shell and ignores its Ctrl-C; stop.sh ends it.
setsid "$bin/controlplane" up --dir "$dir" "${up_args[@]}" >>"$dir/controlplane.log" 2>&1 </dev/null &
"$bin/controlplane" wait --dir "$dir" --pid $! --timeout 90s >&2
echo "$dir/admin.kubeconfig"
