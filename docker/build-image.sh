#!/usr/bin/env bash
# Builds docker/Dockerfile (or --dockerfile FILE) with buildah, rootful, where no registry
# can be reached: the Debian base images are made locally first (docker/containers.sh).
#
#   bash docker/build-image.sh [--tag TAG] [--dockerfile FILE]     # compiles the tree (15-30 min on 2 cores)
#   bash docker/build-image.sh --prebuilt BUILD_DIR [--tag TAG]    # BUILD_DIR/bin's binaries (1-2 min)
#
# --prebuilt: BINARIES=prebuilt, from a context made here of the Dockerfile's own files
# and prebuilt/: the product binaries of BUILD_DIR/bin, stripped, and runtime-packages.sh's
# copy of their libraries, taken from this machine, which must be the Debian release the
# image is (bookworm): the binaries were linked against its libraries.
# Default tag: dtrain:0.1.0 (localhost/dtrain:0.1.0). Prints the image's size at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
. docker/containers.sh
TAG=dtrain:0.1.0
DOCKERFILE=docker/Dockerfile
PREBUILT=""
RELEASE=bookworm
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG=$2; shift 2 ;;
    --dockerfile) DOCKERFILE=$2; shift 2 ;;
    --prebuilt) PREBUILT=$2; shift 2 ;;
    *) echo "usage: $0 [--tag TAG] [--dockerfile FILE] [--prebuilt BUILD_DIR]" >&2; exit 2 ;;
  esac
done
containers_preflight buildah podman runc
T0=$(date +%s)
containers_base_images "$RELEASE"

# What docker/Dockerfile's build stage copies to /out/bin: every executable of its build,
# which has no tests (BUILD_DIR/bin also holds the test programs, which the image does not).
PRODUCT_BINARIES="dtrain dtrain-scheduler dtrain-server dtrain-worker dtrain-infer"
CONTEXT=.
LOG=$(mktemp "${TMPDIR:-/tmp}/dtrain-image-build.XXXXXX")
# A stage that another stage starts FROM (binaries: FROM ${BINARIES}) is committed as an
# image of its own, and buildah 1.28 leaves it behind untagged, with the working container
# of the stage that has only that FROM line: both removed here, by the id the log names
# ("FROM <id> AS binaries"), whether the build passed or not.
cleanup() {
  local id
  for id in $(grep -oE '^\[[0-9]+/[0-9]+\] STEP 1/[0-9]+: FROM [0-9a-f]{64} AS' "$LOG" | awk '{ print $5 }' | sort -u); do
    buildah rm "${id:0:12}-working-container" > /dev/null 2>&1 || true
    podman rmi "$id" > /dev/null 2>&1 || true
  done
  rm -f "$LOG"
  [ "$CONTEXT" = . ] || rm -rf "$CONTEXT"
}
trap cleanup EXIT
# Named even where it is the Dockerfile's default: buildah 1.28 reads a stage that starts
# FROM ${ARG} as depending on the stage the argument names only when the argument is
# given; from the ARG's default it skips that stage as unused and then fails ("build:
# image not known").
ARGS=(--build-arg BINARIES=build)
if [ -n "$PREBUILT" ]; then
  . /etc/os-release
  [ "${VERSION_CODENAME:-}" = "$RELEASE" ] ||
    containers_fail "--prebuilt: this machine is ${PRETTY_NAME:-unknown}, not Debian $RELEASE: its binaries would not match the image's libraries"
  CONTEXT=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-image-context.XXXXXX")   # removed by cleanup
  mkdir -p "$CONTEXT/docker" "$CONTEXT/prebuilt/bin"
  cp docker/runtime-packages.sh docker/dtrain-seed-data "$CONTEXT/docker/"
  for b in $PRODUCT_BINARIES; do
    [ -x "$PREBUILT/bin/$b" ] || containers_fail "$PREBUILT/bin/$b is not built (bash deploy/build.sh)"
    strip --strip-unneeded -o "$CONTEXT/prebuilt/bin/$b" "$PREBUILT/bin/$b"
  done
  sh docker/runtime-packages.sh "$CONTEXT/prebuilt/runtime" "$CONTEXT"/prebuilt/bin/*
  ARGS=(--build-arg BINARIES=prebuilt)
fi
# --isolation chroot: RUN steps in a chroot with the host's network, no OCI runtime and
# no network namespace per step. buildah's default (isolation oci) runs them with the
# configured OCI runtime: runc here, where crun is not installed, and that works too; where
# crun is installed (podman recommends it) it is the default and refuses hybrid cgroups.
# --format docker: OCI image configs have no HEALTHCHECK; docker's keep it.
# --pull=never: FROM debian:... is the local image made above, never a registry's.
echo "buildah bud -f $DOCKERFILE ${ARGS[*]} -t $TAG"
# shellcheck disable=SC2046
buildah bud --isolation chroot --format docker --pull=never --layers=false \
  $(containers_run_flags | sed 's/--runtime runc//') \
  -f "$DOCKERFILE" "${ARGS[@]}" -t "$TAG" "$CONTEXT" 2>&1 | tee "$LOG"
echo "built $TAG in $(($(date +%s) - T0))s: $(podman image ls --format '{{.Size}}' "$TAG" | head -1)"
