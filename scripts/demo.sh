#!/usr/bin/env bash
# The main job on a fresh machine: build everything, start the local cluster and karpy
# with the kwok provider, apply examples/demo (a KWOKNodeClass, a NodePool and the
# "inflate" Deployment), scale inflate up and show NodeClaims and nodes appearing.
#
# usage: scripts/demo.sh [REPLICAS]     (default 10; 1000 and more work: see below)
#        scripts/demo.sh down           stop karpy and the cluster
# examples/demo/nodepool.yaml keeps Karpenter's getting-started limit (cpu: 1000), which
# counts the nodes' CPUs: each inflate pod requests one CPU and each kwok node keeps 100m
# for itself, so about 990 pods fill that limit. For more (from ~940), the demo raises
# the NodePool's limits.cpu for the run and says so. It waits 180 s, plus 0.3 s per pod
# above 400.
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
if ! [[ $replicas =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/demo.sh [REPLICAS|down]  (REPLICAS: a whole number, got '$replicas')" >&2
  exit 2
fi

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
# CPU of nodes the pods need: one per pod, 2% for the nodes' own 100m each and the CPUs
# left over on the last nodes, and a little room (1,000 pods took 1,008 CPUs of nodes).
need=$((replicas + replicas / 50 + 32))
limit=$(kubectl get nodepool default -o jsonpath='{.spec.limits.cpu}')
if [[ $limit =~ ^[0-9]+$ && $need -gt $limit ]]; then
  echo "== $replicas one-CPU pods leave no room under the NodePool's limits.cpu=$limit (it"
  echo "   counts the nodes' CPUs, and each node keeps 100m): raising it to $need for this demo"
  kubectl patch nodepool default --type merge -p "{\"spec\":{\"limits\":{\"cpu\":\"$need\"}}}" >/dev/null
fi
echo "== scaling inflate to $replicas"
start=$(date +%s)
kubectl scale deployment inflate --replicas "$replicas"

wait_s=$((180 + (replicas > 400 ? (replicas - 400) * 3 / 10 : 0)))
deadline=$((start + wait_s))
while :; do
  running=$(kubectl get pods -l app=inflate --field-selector=status.phase=Running -o name | wc -l)
  echo "-- $(( $(date +%s) - start ))s: $running/$replicas inflate pods Running"
  kubectl get nodeclaims 2>/dev/null | sed 's/^/   /'
  [[ $running -ge $replicas ]] && break
  if [[ $(date +%s) -ge $deadline ]]; then
    echo "demo: $((replicas - running)) pods still not Running after ${wait_s}s" >&2
    echo "   why, in karpy's words (the last distinct reasons from $dir/karpy.log):" >&2
    grep -E '"message":"(could not schedule pod|.*exceeds limit.*)"' "$dir/karpy.log" |
      python3 -c '
import json, sys
seen = {}
for line in sys.stdin:
    try:
        rec = json.loads(line)
    except ValueError:
        continue
    why = rec.get("error") or rec.get("message")
    seen.pop(why, None)
    seen[why] = 1
for why in list(seen)[-5:]:
    print("   -", why)
' >&2 || true
    kubectl get nodepool default -o jsonpath='   NodePool default: limits {.spec.limits}, in use {.status.resources}{"\n"}' >&2 || true
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
