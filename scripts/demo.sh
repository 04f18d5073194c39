#!/usr/bin/env bash
# The main job on a fresh machine: build everything, start the local cluster and karpy
# with the kwok provider, apply examples/demo (a KWOKNodeClass, a NodePool and the
# "inflate" Deployment), scale inflate up and show NodeClaims and nodes appearing.
#
# usage: scripts/demo.sh [REPLICAS]     (default 10)
#        scripts/demo.sh down           stop karpy and the cluster
# The cluster lives in .cluster/ and karpy's JSON log in .cluster/karpy.log; both keep
# running after the demo so you can explore (export KUBECONFIG=.cluster/admin.kubeconfig).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export KARPY_CLUSTER_DIR=${KARPY_CLUSTER_DIR:-$root/.cluster}
dir=$KARPY_CLUSTER_DIR

if [[ ${1:-} == down ]]; then
  if pid=$(cat "$dir/karpy.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" && echo "stopped karpy (pid $pid)"
  fi
  bash tests/controlplane/stop.sh "$dir"
  exit 0
fi
replicas=${1:-10}

bash scripts/setup.sh
export PATH="$root/.venv/bin:$root/tests/controlplane/bin:$PATH"

echo "== starting the local cluster in $dir"
kubeconfig=$(bash tests/controlplane/start.sh "$dir")
export KUBECONFIG=$kubeconfig
kubectl apply --server-side -f crds/kwok/ >/dev/null
kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null

echo "== starting karpy (log: $dir/karpy.log)"
if pid=$(cat "$dir/karpy.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; then
  kill -TERM "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
fi
setsid karpy run --cloud-provider kwok --kubeconfig "$kubeconfig" --disable-leader-election \
  --metrics-port 0 --health-probe-port 0 >"$dir/karpy.log" 2>&1 </dev/null &
echo $! >"$dir/karpy.pid"

kubectl apply -f examples/demo/
echo "== scaling inflate to $replicas"
start=$(date +%s)
kubectl scale deployment inflate --replicas "$replicas"

deadline=$((start + 180))
while :; do
  running=$(kubectl get pods -l app=inflate --field-selector=status.phase=Running -o name | wc -l)
  echo "-- $(( $(date +%s) - start ))s: $running/$replicas inflate pods Running"
  kubectl get nodeclaims 2>/dev/null | sed 's/^/   /'
  [[ $running -ge $replicas ]] && break
  if [[ $(date +%s) -ge $deadline ]]; then
    echo "demo: pods still pending after 180s; see $dir/karpy.log" >&2
    exit 1
  fi
  sleep 2
done

echo "== all $replicas pods Running after $(( $(date +%s) - start ))s"
kubectl get nodeclaims -o wide
kubectl get nodes,pods -A -o wide
echo "== karpy's NodeClaim lifecycle log lines"
grep -E '"message":"(found provisionable pod\(s\)|computed new nodeclaim\(s\) to fit pod\(s\)|created nodeclaim|launched nodeclaim|registered nodeclaim|initialized nodeclaim)"' "$dir/karpy.log" | head -n 12 || true
echo
echo "karpy and the cluster keep running. KUBECONFIG=$kubeconfig"
echo "Stop both with: bash scripts/demo.sh down"
