#!/usr/bin/env bash
# Fetches the headers of a CUDA-enabled LibTorch (Debian trixie's contrib libtorch-cuda-dev,
# LibTorch 2.6) into BUILD_DIR/torch-cuda-headers, so that CI, which has Debian bookworm's
# CPU-only LibTorch 1.13 and no GPU, can compile the worker's CUDA LibTorch code
# (the dtrain_cuda_compile_check target; docs/gpu.md, "Compiled in CI").
#
#   bash deploy/fetch-torch-cuda-headers.sh [BUILD_DIR]    # default: build (or $BUILD_DIR)
#
# Only headers are needed, and only unpacked (dpkg -x), never installed: trixie's libraries
# want a newer C library than bookworm's. apt runs with a configuration of its own under
# BUILD_DIR/torch-cuda-apt (sources, lists, cache, an empty dpkg status), so the machine's
# apt state and sources are left as they were. Needs the network once; later runs find the
# unpacked version's stamp and only refresh the package list (offline, they keep what they
# have, with a warning). Exit status 1, saying why, when there are no headers and the fetch
# fails: CI (a clean tree) must not go green without having compiled the GPU code.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-${BUILD_DIR:-build}}"
mkdir -p "$BUILD_DIR"
BUILD_DIR="$(cd "$BUILD_DIR" && pwd)"
APT_ROOT="$BUILD_DIR/torch-cuda-apt"
PREFIX="$BUILD_DIR/torch-cuda-headers"
SUITE="${DTRAIN_TORCH_CUDA_SUITE:-trixie}"
MIRROR="${DTRAIN_TORCH_CUDA_MIRROR:-http://deb.debian.org/debian}"
# libtorch-cuda-dev holds every LibTorch header (ATen, c10 with c10/cuda, torch/csrc/api,
# ATen/cuda). Its Depends (libtorch-cuda-2.6: the 480 MB of libraries; python3-dev and
# libprotobuf-dev: for Python extensions and caffe2 protos) are not included by the C++
# API's headers, so nothing else is fetched: the compile check includes only this prefix,
# the CUDA toolkit's headers and the C++/C library's (a stray include would fail the build).
PACKAGES=(libtorch-cuda-dev)

fail() {
  echo "fetch-torch-cuda-headers: FAILED: $*" >&2
  echo "fetch-torch-cuda-headers: the CUDA LibTorch code cannot be compiled without these headers;" \
       "this step needs $MIRROR (suite $SUITE, contrib) to be reachable" >&2
  exit 1
}

mkdir -p "$APT_ROOT"/{lists/partial,cache/archives/partial,etc/apt.conf.d,etc/preferences.d,etc/sources.list.d,debs}
: > "$APT_ROOT/status"
# The release keys of trixie are in bookworm's debian-archive-keyring (2023.3 and later).
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$KEYRING" ] || fail "$KEYRING not found (package debian-archive-keyring)"
echo "deb [signed-by=$KEYRING] $MIRROR $SUITE main contrib" > "$APT_ROOT/etc/sources.list"
cat > "$APT_ROOT/apt.conf" <<EOF
Dir::State "$APT_ROOT";
Dir::State::Lists "$APT_ROOT/lists";
Dir::State::status "$APT_ROOT/status";
Dir::Cache "$APT_ROOT/cache";
Dir::Etc::SourceList "$APT_ROOT/etc/sources.list";
Dir::Etc::SourceParts "$APT_ROOT/etc/sources.list.d";
Dir::Etc::Parts "$APT_ROOT/etc/apt.conf.d";
Dir::Etc::Preferences "$APT_ROOT/etc/preferences";
Dir::Etc::PreferencesParts "$APT_ROOT/etc/preferences.d";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
Acquire::Languages "none";
Debug::NoLocking "true";
EOF
APT_OPTS=(-c "$APT_ROOT/apt.conf" -q)

# apt-get update exits 0 when a source cannot be fetched (a warning): its log says so.
if ! apt-get "${APT_OPTS[@]}" update > "$APT_ROOT/update.log" 2>&1 ||
   grep -qE '^(W|E): (Failed to fetch|Some index files failed)' "$APT_ROOT/update.log"; then
  why="apt-get update of $SUITE (log: $APT_ROOT/update.log): $(grep -m2 -E '^(W|E):' "$APT_ROOT/update.log" | tr '\n' ' ')"
  # Offline with headers unpacked before (a developer's build tree): they still serve; a
  # clean tree (CI) has none and fails.
  if [ -f "$PREFIX/.stamp" ]; then
    echo "fetch-torch-cuda-headers: WARNING: $why; using $(cat "$PREFIX/.stamp") unpacked before in $PREFIX" >&2
    exit 0
  fi
  fail "$why"
fi
version=$(apt-cache "${APT_OPTS[@]}" show --no-all-versions "${PACKAGES[0]}" 2>/dev/null |
          awk -F': ' '/^Version:/{print $2; exit}') || true
[ -n "$version" ] || fail "no package ${PACKAGES[0]} in $SUITE contrib"
stamp="${PACKAGES[*]} $version"
if [ -f "$PREFIX/.stamp" ] && [ "$(cat "$PREFIX/.stamp")" = "$stamp" ]; then
  echo "fetch-torch-cuda-headers: $stamp already in $PREFIX"
  exit 0
fi

rm -f "$APT_ROOT"/debs/*.deb
# apt's download sandbox user cannot write into a root-owned build tree: download as root.
(cd "$APT_ROOT/debs" && apt-get "${APT_OPTS[@]}" -o APT::Sandbox::User=root download "${PACKAGES[@]}") \
  > "$APT_ROOT/download.log" 2>&1 ||
  fail "apt-get download ${PACKAGES[*]} (log: $APT_ROOT/download.log): $(tail -3 "$APT_ROOT/download.log" | tr '\n' ' ')"

rm -rf "$PREFIX.new"
mkdir -p "$PREFIX.new"
for deb in "$APT_ROOT"/debs/*.deb; do dpkg -x "$deb" "$PREFIX.new"; done
for h in torch/csrc/api/include/torch/torch.h c10/cuda/CUDAStream.h ATen/cuda/CUDAContext.h torch/csrc/api/include/torch/version.h; do
  [ -f "$PREFIX.new/usr/include/$h" ] || fail "the unpacked ${PACKAGES[*]} $version has no usr/include/$h"
done
echo "$stamp" > "$PREFIX.new/.stamp"
rm -rf "$PREFIX"
mv "$PREFIX.new" "$PREFIX"
echo "fetch-torch-cuda-headers: $stamp unpacked into $PREFIX ($(du -sh "$PREFIX" | cut -f1))"
