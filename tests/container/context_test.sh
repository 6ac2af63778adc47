#!/usr/bin/env bash
# The images' build context as .dockerignore leaves it, read by buildah itself: every
# source that docker/Dockerfile* COPY from the context is copied by `buildah bud` into a
# scratch image from the repository root, so a source that .dockerignore (an allow-list)
# leaves out fails here, in seconds, as it would fail the real build. Prints the size of
# what the Dockerfiles copy beside the whole tree's. Removes its image on exit.
#
#   bash tests/container/context_test.sh SRC_DIR     (as root; buildah)
set -euo pipefail
SRC=$(cd "${1:?usage: context_test.sh SRC_DIR}" && pwd)
. "$SRC/docker/containers.sh"
containers_preflight buildah podman
IMAGE=localhost/dtrain-context:$$
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-context.XXXXXX")
trap 'podman rmi -f "$IMAGE" > /dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
cd "$SRC"
echo "FROM scratch" > "$WORK/Containerfile"
n=0
for df in docker/Dockerfile*; do
  # COPY [--chown=..] SRC... DEST, but not COPY --from=STAGE (from a stage, not the context).
  # prebuilt/ is in the context docker/build-image.sh --prebuilt makes, not in the tree's.
  for src in $(awk 'toupper($1) == "COPY" && $0 !~ /--from=/ { for (i = 2; i < NF; i++) if ($i !~ /^--/) print $i }' "$df"); do
    case "$src" in prebuilt/*) continue ;; esac
    echo "COPY $src /context/${src%/}" >> "$WORK/Containerfile"
    n=$((n + 1))
  done
done
[ "$n" -gt 0 ] || containers_fail "no COPY from the context in docker/Dockerfile*: the parse above is wrong"
if ! buildah bud --isolation chroot --pull=never -f "$WORK/Containerfile" -t "$IMAGE" "$SRC" > "$WORK/bud.log" 2>&1; then
  tail -5 "$WORK/bud.log"
  containers_fail "a COPY source of docker/Dockerfile* is not in the build context (.dockerignore leaves it out?)"
fi
tree=$(du -sm --exclude=.git "$SRC" | cut -f1)
echo "ok   every COPY source of docker/Dockerfile* ($n) is in the context buildah reads: $(podman image ls --format '{{.Size}}' "$IMAGE" | head -1) (the tree: $tree MB without .git)"
