#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3, a `tool` of this directory's go.mod, so it shares its
# Kubernetes libraries' compiled packages with the control plane and Karpenter) into
# tests/controlplane/bin/helm, for the chart tests (tests/charts). Cached like build.sh:
# when go.mod, go.sum, this script and the Go toolchain are unchanged it returns at once;
# Go's build cache keeps a rebuild incremental. Safe to run from several shells (a lock
# serialises).
set -euo pipefail
export GOTOOLCHAIN=${KARPY_GOTOOLCHAIN:-go1.26.11}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$here/bin
mkdir -p "$bin"

if ! command -v go >/dev/null 2>&1; then
  echo "build-helm.sh: Go is not installed; install Go >= 1.26 (https://go.dev/dl/) and run again" >&2
  exit 1
fi

exec 8>"$bin/.helm.lock"
flock 8

cd "$here"
HELM_VERSION=$(awk '$1 == "helm.sh/helm/v3" { print $2; exit }' go.mod)
want=$( (sha256sum go.mod go.sum "$here/build-helm.sh"; go env GOVERSION GOOS GOARCH) \
  | sha256sum | cut -d' ' -f1)
stamp=$bin/.helm-stamp
if [[ -x $bin/helm && -f $stamp && $(<"$stamp") == "$want" ]]; then
  echo "helm: $HELM_VERSION up to date in $bin"
  exit 0
fi

start=$SECONDS
echo "helm: building $HELM_VERSION"
# Helm stamps its version through ldflags (its Makefile); without it `helm version` says
# v3.x-dev and charts with a kubeVersion constraint would see a wrong client.
go build -buildvcs=false \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
  -o "$bin/.helm.new" helm.sh/helm/v3/cmd/helm
# A rename, so a test running the old binary keeps running it undisturbed.
mv -f "$bin/.helm.new" "$bin/helm"
echo "$want" >"$stamp"
echo "helm: built $HELM_VERSION in $((SECONDS - start))s into $bin"
