#!/usr/bin/env bash
# Builds the local control plane into tests/controlplane/bin/:
#   controlplane  etcd (embedded), kube-apiserver, kube-controller-manager, kube-scheduler
#                 and kubectl, from the k8s.io/kubernetes module pinned in go.mod
#   kwok          sigs.k8s.io/kwok, the kubelet of fake nodes (cmd/kwok)
#   kubectl       a wrapper for `controlplane kubectl`
# The real Karpenter and helm come from the same module (go.mod's `tool` lines), built by
# build-karpenter.sh and build-helm.sh: one module, one toolchain and one version of each
# dependency, so the four builds share Go's build cache (cold, 19 CPU-minutes for all
# four instead of about 33 built apart: tests/controlplane/README.md#measured).
# Cached: when no Go source, go.mod or go.sum changed since the last build it returns in
# well under a second; otherwise Go's own build cache (~/.cache/go-build) keeps rebuilds
# incremental. Safe to run from several shells at once (a lock serialises builds).
set -euo pipefail
# go.mod's toolchain line (Karpenter v1.15.0 asks for Go >= 1.26.9): the go command
# fetches it through the module proxy once; every build here uses the same one, or the
# build cache would not be shared.
export GOTOOLCHAIN=${KARPY_GOTOOLCHAIN:-go1.26.11}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
bin=$here/bin
mkdir -p "$bin"

if ! command -v go >/dev/null 2>&1; then
  echo "build.sh: Go is not installed; install Go >= 1.26 (https://go.dev/dl/) and run again" >&2
  exit 1
fi

exec 9>"$bin/.build.lock"
flock 9

inputs() {
  find . -path ./bin -prune -o -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print \
    | LC_ALL=C sort | xargs sha256sum
  sha256sum build.sh
  go env GOVERSION GOOS GOARCH
}
hash=$(inputs | sha256sum | cut -d' ' -f1)
stamp=$bin/.build-stamp
if [[ -x $bin/controlplane && -x $bin/kwok && -x $bin/kubectl && -f $stamp && $(<"$stamp") == "$hash" ]]; then
  echo "controlplane: up to date in $bin"
  exit 0
fi

# Stamp the Kubernetes version into the binaries, as Kubernetes' own build does
# (hack/lib/version.sh); otherwise /version reports v0.0.0-master and clients that
# check the server version refuse it.
kube_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' go.mod)
IFS=. read -r major minor _ <<<"${kube_version#v}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean"
done

start=$SECONDS
echo "controlplane: building Kubernetes $kube_version and kwok (a cold build takes several minutes)"
go build -buildvcs=false -ldflags="$ldflags" -o "$bin/.controlplane.new" ./cmd/controlplane
go build -buildvcs=false -ldflags="-s -w" -o "$bin/.kwok.new" ./cmd/kwok
cat >"$bin/.kubectl.new" <<'WRAPPER'
#!/bin/sh
# kubectl from k8s.io/kubectl, the same version as the local control plane.
exec "$(dirname "$0")/controlplane" kubectl "$@"
WRAPPER
chmod +x "$bin/.kubectl.new"
# Renames, so a cluster running the old binaries keeps running them undisturbed.
mv -f "$bin/.controlplane.new" "$bin/controlplane"
mv -f "$bin/.kwok.new" "$bin/kwok"
mv -f "$bin/.kubectl.new" "$bin/kubectl"
echo "$hash" >"$stamp"
echo "controlplane: built in $((SECONDS - start))s into $bin"
