#!/usr/bin/env bash
# Builds bin/karpy-nodeadm-validate: the EKS node agent's (nodeadm's) own parsing and
# ValidateNodeConfig, from the nodeadm Go module at the version Karpenter AWS pins,
# driven by karpy's small main (cmd/main.go; see its doc comment).
#
# ValidateNodeConfig lives in nodeadm's internal/api package, which only code inside the
# module may import, so the module is copied from Go's module cache into bin/.src, our
# main and a small hook (configprovider/karpy_userdata.go) are added to that copy, and
# it is built there. Nothing fetched is kept in the repository.
#
# Cached: when neither these inputs nor the Go toolchain changed since the last build it
# returns at once; Go's build cache keeps a rebuild incremental. Safe to run from several
# shells at once (a lock serialises builds). Prints the binary's path on stdout.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
module=github.com/awslabs/amazon-eks-ami/nodeadm
# the version karpenter-provider-aws's go.mod requires
version=v0.0.0-20240229193347-cfab22a10647
bin=$here/bin
out=$bin/karpy-nodeadm-validate
mkdir -p "$bin"

if ! command -v go >/dev/null 2>&1; then
  echo "nodeadm/build.sh: Go is not installed; install Go >= 1.21 and run again" >&2
  exit 1
fi

exec 9>"$bin/.build.lock"
flock 9

hash=$( (sha256sum build.sh cmd/main.go configprovider/karpy_userdata.go
  echo "$module@$version"
  go env GOVERSION GOOS GOARCH) | sha256sum | cut -d' ' -f1)
stamp=$bin/.build-stamp
if [[ -x $out && -f $stamp && $(<"$stamp") == "$hash" ]]; then
  echo "$out"
  exit 0
fi

start=$SECONDS
dir=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
if [[ -z $dir || ! -d $dir ]]; then
  echo "nodeadm/build.sh: go mod download $module@$version gave no directory" >&2
  exit 1
fi
src=$bin/.src
rm -rf "$src"
cp -R "$dir" "$src"
chmod -R u+w "$src"
# a module zip keeps vendor/modules.txt but not the vendored code: build from the proxy
rm -rf "$src/vendor"
cp configprovider/karpy_userdata.go "$src/internal/configprovider/"
mkdir -p "$src/cmd/karpy-nodeadm-validate"
cp cmd/main.go "$src/cmd/karpy-nodeadm-validate/"
(cd "$src" && go build -mod=mod -buildvcs=false -trimpath -ldflags="-s -w" \
  -o "$bin/.karpy-nodeadm-validate.new" ./cmd/karpy-nodeadm-validate)
mv -f "$bin/.karpy-nodeadm-validate.new" "$out"
rm -rf "$src"
echo "$hash" >"$stamp"
echo "nodeadm/build.sh: built in $((SECONDS - start))s" >&2
echo "$out"
