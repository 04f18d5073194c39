#!/usr/bin/env bash
# Builds the real Karpenter — its kwok provider's controller, the `kwok` main package of
# the Go module sigs.k8s.io/karpenter (a `tool` of this directory's go.mod, beside the
# control plane it shares its dependencies with) — into tests/controlplane/bin/karpenter-kwok,
# for the takeover and side-by-side tests.
#
# Karpenter v1.15.0's go.mod asks for Go >= 1.26.9, newer than the machine's toolchain:
# GOTOOLCHAIN makes the go command fetch that toolchain through the module proxy (once;
# it stays in the module cache); build.sh and build-helm.sh use the same one. Cached like
# build.sh: when go.mod, go.sum, this script and the toolchain are unchanged it returns at
# once; otherwise Go's build cache keeps a rebuild incremental (after build.sh, most of
# Karpenter's packages are already compiled). Safe to run from several shells at once (a
# lock serialises).
set -euo pipefail
export GOTOOLCHAIN=${KARPY_GOTOOLCHAIN:-go1.26.11}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$here/bin
mkdir -p "$bin"

if ! command -v go >/dev/null 2>&1; then
  echo "build-karpenter.sh: Go is not installed; install Go >= 1.26 (https://go.dev/dl/) and run again" >&2
  exit 1
fi

exec 7>"$bin/.karpenter.lock"
flock 7

cd "$here"
want=$( (sha256sum go.mod go.sum "$here/build-karpenter.sh"; echo "$GOTOOLCHAIN"; go env GOOS GOARCH) \
  | sha256sum | cut -d' ' -f1)
stamp=$bin/.karpenter-stamp
version=$(awk '$1 == "sigs.k8s.io/karpenter" { print $2; exit }' go.mod)
if [[ -x $bin/karpenter-kwok && -f $stamp && $(<"$stamp") == "$want" ]]; then
  echo "karpenter: $version up to date in $bin"
  exit 0
fi

start=$SECONDS
echo "karpenter: building $version's kwok controller with $GOTOOLCHAIN (a cold build takes several minutes)"
# The operator's version variable is what Karpenter logs and reports in its user agent
# (karpenter/<version>); its release build stamps it the same way.
go build -buildvcs=false \
  -ldflags "-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=$version" \
  -o "$bin/.karpenter-kwok.new" sigs.k8s.io/karpenter/kwok
# A rename, so a Karpenter running the old binary keeps running it undisturbed.
mv -f "$bin/.karpenter-kwok.new" "$bin/karpenter-kwok"
echo "$want" >"$stamp"
echo "karpenter: built $version in $((SECONDS - start))s into $bin"
