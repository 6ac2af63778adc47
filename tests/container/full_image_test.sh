#!/usr/bin/env bash
# The long container test (CTest container_image_full, label slow, registered with
# -DDTRAIN_CONTAINER_FULL_TEST=ON; not in CI): docker/Dockerfile built as a user builds it, the tree compiled in its build stage
# (BINARIES=build), then the same checks as CI's image (docker/check-image.sh) and the
# cluster test (tests/container/cluster_test.sh) on that image. The image is removed on
# exit; the base images (debian:bookworm, -slim) are kept for the next run.
#
#   bash tests/container/full_image_test.sh SRC_DIR BUILD_DIR     (as root; 15-30 min on 2 cores)
#
# BUILD_DIR: only for the host's `dtrain` (the cluster test's `dtrain predict`).
set -euo pipefail
SRC=$(cd "${1:?usage: full_image_test.sh SRC_DIR BUILD_DIR}" && pwd)
BUILD=$(cd "${2:?usage: full_image_test.sh SRC_DIR BUILD_DIR}" && pwd)
IMAGE=localhost/dtrain:full$$
T0=$(date +%s)
trap 'podman rmi -f "$IMAGE" > /dev/null 2>&1 || true' EXIT
trap 'exit 143' TERM INT
bash "$SRC/docker/build-image.sh" --tag "$IMAGE"
echo "[$(($(date +%s) - T0))s] built"
bash "$SRC/docker/check-image.sh" "$IMAGE"
bash "$SRC/tests/container/cluster_test.sh" "$SRC" "$BUILD" "$IMAGE"
echo "full image test passed in $(($(date +%s) - T0))s"
