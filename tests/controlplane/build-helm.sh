#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3, the version pinned below) from the Go module proxy into
# tests/controlplane/bin/helm, for the chart tests (tests/charts). Cached like build.sh:
# when the pinned version and Go toolchain are unchanged it returns at once; Go's build
# cache keeps a rebuild incremental. Safe to run from several shells (a lock serialises).
set -euo pipefail
HELM_VERSION=v3.22.0
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$here/bin
mkdir -p "$bin"

if ! command -v go >/dev/null 2>&1; then
  echo "build-helm.sh: Go is not installed; install Go >= 1.26 (https://go.dev/dl/) and run again" >&2
  exit 1
fi

exec 8>"$bin/.helm.lock"
flock 8

want="$HELM_VERSION $(go env GOVERSION GOOS GOARCH | tr '\n' ' ')"
stamp=$bin/.helm-stamp
if [[ -x $bin/helm && -f $stamp && $(<"$stamp") == "$want" ]]; then
  echo "helm: $HELM_VERSION up to date in $bin"
  exit 0
fi

start=$SECONDS
echo "helm: building $HELM_VERSION from the Go module proxy"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Helm stamps its version through ldflags (its Makefile); without it `helm version` says
# v3.x-dev and charts with a kubeVersion constraint would see a wrong client.
GOBIN=$tmp GOFLAGS=-buildvcs=false go install \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
mv -f "$tmp/helm" "$bin/helm"
echo "$want" >"$stamp"
echo "helm: built $HELM_VERSION in $((SECONDS - start))s into $bin"
