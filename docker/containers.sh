# shellcheck shell=bash
# Sourced by docker/build-image.sh, docker/check-image.sh and tests/container: how this
# project runs buildah and podman (rootful, Debian bookworm's packages: buildah, podman,
# runc, mmdebstrap), and the local base images the Dockerfiles start FROM.

containers_fail() { echo "FAIL: $*" >&2; exit 1; }

# Every podman run/create: runc, not crun (crun refuses a kernel with hybrid cgroups, v1
# and v2 mounted together); explicit ulimits, because podman's defaults ask for more than
# the hard limits of a sandboxed host and runc then refuses to start the container
# ("error setting rlimit"). nproc is also capped by kernel.pid_max (asking 50000 where
# pid_max is 32768 fails the same way).
containers_run_flags() {
  local nofile nproc pid_max
  nofile=$(ulimit -Hn)
  [ "$nofile" = unlimited ] && nofile=1048576
  [ "$nofile" -gt 65536 ] && nofile=65536
  nproc=$(ulimit -Hu)
  [ "$nproc" = unlimited ] && nproc=1048576
  pid_max=$(cat /proc/sys/kernel/pid_max 2> /dev/null || echo 32768)
  [ "$nproc" -gt $((pid_max / 2)) ] && nproc=$((pid_max / 2))
  echo "--runtime runc --ulimit nofile=$nofile:$nofile --ulimit nproc=$nproc:$nproc"
}

containers_preflight() { # TOOL...: root, and each tool present, saying what to install
  [ "$(id -u)" -eq 0 ] || containers_fail "needs root (rootful podman and buildah)"
  local t
  for t in "$@"; do
    command -v "$t" > /dev/null ||
      containers_fail "'$t' is not installed (apt-get install buildah podman runc mmdebstrap; deploy/install-deps.sh does)"
  done
}

# The Debian base images, made locally: no registry is asked. One minbase root of RELEASE
# (mmdebstrap, from the archive and suites this machine's apt uses: the release, its
# updates and security) imported as both debian:RELEASE and debian:RELEASE-slim, the
# names the Dockerfiles' FROM lines use. Reused when both tags exist already (delete them
# with `podman rmi debian:bookworm debian:bookworm-slim` to make them anew). ~1 minute.
# Configured as Debian's own -slim images are (debuerreotype): dpkg leaves out manuals,
# documentation but the copyright files, and translations, for the packages of the root and
# for those a Dockerfile installs later; apt deletes the .debs and its package caches after
# each install (docker-clean; without it a layer keeps ~110 MB of them).
containers_base_images() { # RELEASE
  local release=$1 sources f
  if podman image exists "localhost/debian:$release" && podman image exists "localhost/debian:$release-slim"; then
    echo "base images debian:$release and debian:$release-slim exist; reused"
    return 0
  fi
  command -v mmdebstrap > /dev/null || containers_fail "mmdebstrap is not installed (apt-get install mmdebstrap)"
  sources=""
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
    if [ -s "$f" ]; then sources=$f; break; fi
  done
  [ -n "$sources" ] || containers_fail "cannot tell which Debian archive apt uses here (no /etc/apt/sources.list*)"
  echo "making base image debian:$release with mmdebstrap --variant=minbase (apt sources: $sources)"
  local clean='"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true";'
  local slim=()
  for f in /usr/share/doc/\* /usr/share/man/\* /usr/share/info/\* /usr/share/locale/\* /usr/share/groff/\* \
    /usr/share/lintian/\* /usr/share/linda/\*; do slim+=(--dpkgopt="path-exclude=$f"); done
  slim+=(--dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-include=/usr/share/locale/locale.alias')
  mmdebstrap --variant=minbase --quiet "${slim[@]}" \
    --customize-hook="printf '%s\n' 'DPkg::Post-Invoke { $clean };' 'APT::Update::Post-Invoke { $clean };' \
      'Dir::Cache::pkgcache \"\";' 'Dir::Cache::srcpkgcache \"\";' > \"\$1/etc/apt/apt.conf.d/docker-clean\" &&
      rm -f \"\$1\"/var/cache/apt/*.bin" \
    "$release" - "$sources" < /dev/null |   # stdin closed: else mmdebstrap reads sources from it
    podman import --quiet - "localhost/debian:$release" > /dev/null ||
    containers_fail "mmdebstrap $release | podman import failed"
  podman tag "localhost/debian:$release" "localhost/debian:$release-slim"
}
