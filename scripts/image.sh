#!/usr/bin/env bash
# Builds karpy's container image from Debian packages and the project's hashed lock, with
# no base image to pull: mmdebstrap makes a Debian root filesystem holding Debian's
# python3, the locked wheels (pip --require-hashes) and karpy, karpy-aws and karpy-azure
# go into a venv at /opt/karpy, and buildah commits it as an OCI image that runs
# `karpy run` as uid 65532 — the same lock, entry point and user as the Dockerfile
# (tests/image checks that the two agree).
#
#   scripts/image.sh                 builds (or finds cached) and tags $KARPY_IMAGE
#   KARPY_IMAGE=registry.example.com/karpy:0.1.0 scripts/image.sh
#   KARPY_IMAGE_REBUILD=1 scripts/image.sh   builds again although cached (to compare)
#
# Cached: the image is tagged with a digest of everything it is built from, and a run
# whose inputs are unchanged only re-tags it (seconds). Wheels and .debs are kept in
# $KARPY_IMAGE_CACHE between builds. Reproducible: SOURCE_DATE_EPOCH (the last commit
# of the inputs) fixes every timestamp; see docs/install.md for what is bit-for-bit.
# Needs root (mmdebstrap's chroot mode, rootful podman); on a machine without
# mmdebstrap, buildah, podman or runc it installs them with apt-get first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

image=${KARPY_IMAGE:-localhost/karpy:dev}
repository=localhost/karpy-build
suite=${KARPY_DEBIAN_SUITE:-bookworm}
mirror=${KARPY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${KARPY_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpy-image}
# Debian bookworm's python3; the lock is universal for 3.11+, the Dockerfile's
# PYTHON_VERSION default names the same minor version (tests/image checks it).
python_version=3.11
lock="image-requirements.lock"
# The image's process: the same exec-form entry point, user and PATH as the Dockerfile.
entrypoint='["karpy", "run"]'
user=65532:65532
venv=/opt/karpy
# Podman on these machines: crun refuses the hybrid cgroup layout (the image is only
# inspected and tagged here, never run, so no rlimit flags are needed).
podman=(podman --runtime runc --cgroup-manager cgroupfs)

log() { printf '== image: %s\n' "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
  echo "scripts/image.sh needs root (mmdebstrap chroot mode, rootful podman): sudo $0" >&2
  exit 2
fi

# -- tools: the script is the only setup a clean Debian machine needs
missing=()
for tool in mmdebstrap:mmdebstrap buildah:buildah podman:podman runc:runc; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
# pip on this machine fetches the wheels and builds karpy's own
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null
  apt-get -q -y -o DPkg::Lock::Timeout=600 install --no-install-recommends "${missing[@]}" >/dev/null
fi

# One build at a time per cache (the test command and an e2e fixture may both call it).
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

# -- the cache key: every file the image is built from, in a stable order
inputs=(image-requirements.lock pyproject.toml README.md LICENSE scripts/image.sh
        karpy providers/aws providers/azure)
key=$(find "${inputs[@]}" -type f ! -path '*/__pycache__/*' ! -path '*.egg-info/*' \
        ! -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum \
      | { cat; echo "$suite $mirror $python_version"; } | sha256sum | cut -c1-16)
built="$repository:$key"
report() {
  local size
  size=$("${podman[@]}" image inspect --format '{{.Size}}' "$built")
  "${podman[@]}" tag "$built" "$image"
  log "$image ($built): $((size / 1000000)) MB"
  echo "$image"
}
if [ -z "${KARPY_IMAGE_REBUILD:-}" ] && "${podman[@]}" image exists "$built"; then
  log "inputs unchanged: cached"
  report
  exit 0
fi

# The last commit of the inputs (any tree with the same inputs gets the same time);
# outside git, the newest input's mtime.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct -- "${inputs[@]}" 2>/dev/null || true)
  if [ -z "$SOURCE_DATE_EPOCH" ] || [ -n "$(git status --porcelain -- "${inputs[@]}" 2>/dev/null)" ]; then
    SOURCE_DATE_EPOCH=$(find "${inputs[@]}" -type f ! -path '*/__pycache__/*' \
      ! -path '*.egg-info/*' ! -name '*.pyc' -printf '%T@\n' | sort -n | tail -1 | cut -d. -f1)
  fi
fi
export SOURCE_DATE_EPOCH
log "building $built (SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH, Debian $suite from $mirror)"

mkdir -p "$cache/debs" "$cache/wheels"
work=$(mktemp -d "${TMPDIR:-/tmp}/karpy-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/wheels"

# -- wheels, fetched on this machine (its proxy and CA settings apply) and checked
# against the lock's hashes; binary only, for the image's Python and glibc, so nothing
# is compiled and no compiler is needed.
arch=$(uname -m)
platforms=(--platform any --platform manylinux2014_"$arch" --platform manylinux2010_"$arch"
           --platform manylinux1_"$arch")
for glibc in $(seq 5 36); do platforms+=(--platform "manylinux_2_${glibc}_$arch"); done
python3 -m pip download -q --disable-pip-version-check --no-deps --require-hashes \
  --only-binary=:all: --implementation cp --python-version "$python_version" \
  --abi "cp${python_version/./}" --abi abi3 --abi none \
  "${platforms[@]}" \
  -d "$cache/wheels" -r "$lock"
python3 - "$lock" "$cache/wheels" "$work/wheels" <<'EOF'
# Only the wheels the lock names (the cache may hold older ones).
import re, shutil, sys
from pathlib import Path
def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
# a universal lock may pin one project twice, under different markers
pins = {(norm(m[1]), m[2]) for m in re.finditer(
    r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", Path(sys.argv[1]).read_text(), re.M)}
for wheel in Path(sys.argv[2]).glob("*.whl"):
    name, version = wheel.name.split("-")[:2]
    if (norm(name), version) in pins:
        shutil.copy2(wheel, sys.argv[3])
EOF
cp "$lock" "$work/wheels/"
# karpy and the providers as wheels (pure Python; their dependencies come from the lock)
python3 -m pip wheel -q --disable-pip-version-check --no-deps -w "$work/wheels/own" \
  . ./providers/aws ./providers/azure

# -- the root filesystem: Debian's python3 and what is essential, nothing else (no apt,
# no compiler); documentation dropped but the copyright files kept.
cat > "$work/passwd" <<EOF
nonroot:x:${user%%:*}:${user##*:}:nonroot:/home/nonroot:/usr/sbin/nologin
EOF
cat > "$work/group" <<EOF
nonroot:x:${user##*:}:
EOF
# What must import in the image: the compiled wheels need libraries from Debian
# (numpy's and scipy's need libstdc++6), which pip check does not see.
smoke="import uvloop, numpy, scipy.optimize, aiohttp, cryptography, karpy.cli, karpy_aws, karpy_azure"
# Commands in the chroot see none of this machine's environment (PIP_* settings above all).
clean_env="env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1"
mmdebstrap --quiet --variant=essential --mode=root --format=tar \
  --include=python3,python3-venv,ca-certificates,libstdc++6 \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --skip=essential/unlink \
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
  --setup-hook="sync-in $cache/debs /var/cache/apt/archives" \
  --essential-hook="sync-out /var/cache/apt/archives $cache/debs" \
  --customize-hook="sync-out /var/cache/apt/archives $cache/debs" \
  --customize-hook="copy-in $work/wheels /tmp" \
  --customize-hook="chroot \"\$1\" python3 -c 'import sys; assert sys.version.startswith(\"$python_version.\"), sys.version'" \
  --customize-hook="chroot \"\$1\" $clean_env python3 -m venv $venv" \
  --customize-hook="chroot \"\$1\" $clean_env $venv/bin/pip install -q --no-index --find-links /tmp/wheels --require-hashes --no-deps -r /tmp/wheels/$lock" \
  --customize-hook="chroot \"\$1\" sh -c '$clean_env $venv/bin/pip install -q --no-index --no-deps /tmp/wheels/own/*.whl'" \
  --customize-hook="chroot \"\$1\" $clean_env $venv/bin/pip check" \
  --customize-hook="chroot \"\$1\" $clean_env PYTHONDONTWRITEBYTECODE=1 $venv/bin/python -c '$smoke'" \
  --customize-hook="chroot \"\$1\" $clean_env $venv/bin/python -m pip uninstall -q -y pip setuptools" \
  --customize-hook="chroot \"\$1\" $clean_env dpkg --purge python3-venv python3-pip-whl python3-setuptools-whl python3.11-venv >/dev/null" \
  --customize-hook='rm -rf "$1"/tmp/wheels "$1"/var/cache/apt/archives/*.deb "$1"/var/cache/apt/archives/partial "$1"/var/log/*.log' \
  --customize-hook='find "$1"/opt -name direct_url.json -delete' \
  --customize-hook='rm -f "$1"/etc/resolv.conf "$1"/etc/hostname' \
  --customize-hook="upload $work/passwd /etc/passwd.karpy" \
  --customize-hook='cat "$1"/etc/passwd.karpy >> "$1"/etc/passwd; rm "$1"/etc/passwd.karpy' \
  --customize-hook="upload $work/group /etc/group.karpy" \
  --customize-hook='cat "$1"/etc/group.karpy >> "$1"/etc/group; rm "$1"/etc/group.karpy' \
  --customize-hook='mkdir -p "$1"/home/nonroot && chown '"$user"' "$1"/home/nonroot' \
  --customize-hook="sh -c 'for c in cc gcc g++ c++ clang ld as make; do if chroot \"\$1\" sh -c \"command -v \$c\" >/dev/null; then echo \"compiler \$c in the image\" >&2; exit 1; fi; done' -- \"\$1\"" \
  "$suite" "$work/rootfs.tar" "deb $mirror $suite main"
log "rootfs: $(sha256sum "$work/rootfs.tar" | cut -c1-64) ($(($(stat -c %s "$work/rootfs.tar") / 1000000)) MB)"

# -- the OCI image: one layer, the settings of the Dockerfile's run stage, created at
# SOURCE_DATE_EPOCH so the same root filesystem gives the same image id.
ctr=$(buildah from --quiet scratch)
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
buildah add --quiet "$ctr" "$work/rootfs.tar" / >/dev/null
buildah config \
  --env "PATH=$venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --env PYTHONDONTWRITEBYTECODE=1 --env PYTHONUNBUFFERED=1 \
  --user "$user" --entrypoint "$entrypoint" --cmd '' --port 8080 --port 8081 \
  --label org.opencontainers.image.title=karpy \
  --label "org.opencontainers.image.description=A Kubernetes node autoscaler that speaks Karpenter's v1 API" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label "org.karpy.debian=$suite $mirror" \
  --created-by "scripts/image.sh" "$ctr"
buildah commit --quiet --timestamp "$SOURCE_DATE_EPOCH" --rm "$ctr" "$built" >/dev/null
trap 'rm -rf "$work"' EXIT
# Earlier builds (about 600 MB each) go; one still tagged otherwise (e.g. a release
# tag) is only untagged from the build repository.
for old in $("${podman[@]}" images --format '{{.Repository}}:{{.Tag}}' "$repository"); do
  [ "$old" = "$built" ] || "${podman[@]}" rmi "$old" >/dev/null 2>&1 || true
done
log "image id $("${podman[@]}" image inspect --format '{{.Id}}' "$built")"
report
