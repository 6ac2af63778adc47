#!/usr/bin/env bash
# Runs docker/Dockerfile's steps without a Docker engine: each stage in a clean Debian root
# made by debootstrap (from Debian's packages, the archive this machine's apt uses), its
# instructions (FROM, ARG, ENV, WORKDIR, COPY [--from], RUN, USER; the rest is metadata)
# executed as Docker would, then checks the final image: it holds every binary, they find
# their libraries, it has no compiler or -dev package, runs as a non-root user, and trains
# one small epoch on the bundled Fashion-MNIST.
#
#   bash docker/test-dockerfile.sh [--build-dir DIR] [--dockerfile FILE] [--keep]
#
# Needs root and debootstrap (apt-get install debootstrap). The debootstrapped base is
# cached in DIR (default build/image-test) and reused; the stages are made anew each run.
# Takes ~10+ minutes on 2 cores (the apt installs and a full build from scratch).
set -euo pipefail
cd "$(dirname "$0")/.."
CONTEXT=$(pwd)
BUILD_DIR=build/image-test
DOCKERFILE=docker/Dockerfile
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --dockerfile) DOCKERFILE=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) echo "usage: $0 [--build-dir DIR] [--dockerfile FILE] [--keep]" >&2; exit 2 ;;
  esac
done
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, chroot, mounts)"
command -v debootstrap > /dev/null || fail "debootstrap is not installed (apt-get install debootstrap)"
mkdir -p "$BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
T0=$(date +%s)
step() { echo "[$(($(date +%s) - T0))s] $*" >&2; }

MOUNTS=()
cleanup() {
  local i
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount -l "${MOUNTS[$i]}" 2> /dev/null || true; done
  if [ "$KEEP" = 0 ]; then rm -rf "$BUILD_DIR/stages"; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# The archive this machine's apt uses (the first deb.sources URI or sources.list line).
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2> /dev/null | grep -v security | head -1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $0 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2> /dev/null)
[ -n "$mirror" ] || fail "cannot tell which Debian archive apt uses here"

base_root() { # RELEASE -> path of a cached tarball of a minbase root
  local release=$1 tarball="$BUILD_DIR/base-$1.tar"
  if [ ! -s "$tarball" ]; then
    step "debootstrap --variant=minbase $release (cached in $tarball)"
    local tmp="$BUILD_DIR/debootstrap-$release"
    rm -rf "$tmp"
    debootstrap --variant=minbase "$release" "$tmp" "$mirror" > "$BUILD_DIR/debootstrap.log" 2>&1 ||
      { tail -20 "$BUILD_DIR/debootstrap.log"; fail "debootstrap failed"; }
    # The same apt sources as the official image (and this machine): updates, security.
    rm -f "$tmp/etc/apt/sources.list"
    cp -a /etc/apt/sources.list.d/. "$tmp/etc/apt/sources.list.d/" 2> /dev/null || true
    [ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$tmp/etc/apt/"
    rm -rf "$tmp/var/cache/apt/archives/"*.deb "$tmp/var/lib/apt/lists/"*
    tar -C "$tmp" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$tmp"
  fi
  echo "$tarball"
}

declare -A ARGS STAGE_ROOT
stage="" root="" workdir=/ user=""
declare -a ENVS=()
stage_index=0

subst() { # expand ${VAR} / $VAR from ARG and ENV values
  local s=$1 k
  for k in "${!ARGS[@]}"; do s=${s//\$\{$k\}/${ARGS[$k]}}; s=${s//\$$k/${ARGS[$k]}}; done
  echo "$s"
}

mount_into() {
  local r=$1
  mount -t proc proc "$r/proc" && MOUNTS+=("$r/proc")
  mount --rbind /dev "$r/dev" && MOUNTS+=("$r/dev")
  mount --rbind /sys "$r/sys" && MOUNTS+=("$r/sys")
  cp /etc/resolv.conf "$r/etc/resolv.conf"
}

in_root() { # run a shell command in the current stage as Docker's RUN would
  local cmd=$1 path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  local e envs=()
  for e in "${!ARGS[@]}"; do envs+=("$e=${ARGS[$e]}"); done
  for e in "${ENVS[@]}"; do
    case "$e" in PATH=*) path=${e#PATH=} ;; *) envs+=("$e") ;; esac
  done
  local priv=()
  if [ -n "$user" ] && [ "$user" != root ] && [ "$user" != 0 ]; then
    priv=(/usr/bin/setpriv --reuid="${user%%:*}" --regid="${user##*:}" --clear-groups)
  fi
  chroot "$root" "${priv[@]}" /usr/bin/env -i HOME=/root PATH="$path" "${envs[@]}" \
    /bin/sh -c "mkdir -p '$workdir' 2>/dev/null; cd '$workdir' && $cmd"
}

do_copy() {
  local from="" a srcs=() dest
  for a in "$@"; do
    case "$a" in
      --from=*) from=${a#--from=} ;;
      --chown=* | --chmod=* | --link) ;;
      *) srcs+=("$a") ;;
    esac
  done
  dest=${srcs[-1]}
  unset 'srcs[-1]'
  case "$dest" in /*) ;; *) dest="$workdir/$dest" ;; esac
  local base="$CONTEXT"
  if [ -n "$from" ]; then base=${STAGE_ROOT[$from]:-}; [ -n "$base" ] || fail "COPY --from=$from: no such stage"; fi
  local s
  for s in "${srcs[@]}"; do
    local src="$base/${s#/}"
    [ -e "$src" ] || fail "COPY $s: not found in ${from:-the build context}"
    if [ -d "$src" ]; then
      mkdir -p "$root$dest"
      cp -a "$src"/. "$root$dest"/
    elif [[ "$dest" == */ ]] || [ "${#srcs[@]}" -gt 1 ] || [ -d "$root$dest" ]; then
      mkdir -p "$root$dest"
      cp -a "$src" "$root$dest"/
    else
      mkdir -p "$(dirname "$root$dest")"
      cp -a "$src" "$root$dest"
    fi
  done
}

# Instructions, with continuation lines joined and comments dropped.
mapfile -t INSTR < <(sed -e 's/^[[:space:]]*#.*$//' "$DOCKERFILE" | awk '
  /\\$/ { sub(/\\$/, ""); buf = buf $0 " "; next }
  { buf = buf $0; if (buf ~ /[^[:space:]]/) print buf; buf = "" }')

for line in "${INSTR[@]}"; do
  read -r op rest <<< "$line"
  case "${op^^}" in
    ARG)
      name=${rest%%=*}
      if [[ "$rest" == *=* ]]; then ARGS[$name]=$(subst "${rest#*=}"); else ARGS[$name]=${ARGS[$name]:-}; fi
      ;;
    FROM)
      read -r image _as name <<< "$(subst "$rest")"
      stage_index=$((stage_index + 1))
      stage=${name:-$stage_index}
      case "$image" in
        debian:*) release=${image#debian:}; release=${release%-slim} ;;
        *) fail "FROM $image: only debian:RELEASE[-slim] images are emulated" ;;
      esac
      tarball=$(base_root "$release")
      root="$BUILD_DIR/stages/$stage"
      rm -rf "$root"
      mkdir -p "$root"
      tar -C "$root" -xf "$tarball"
      mount_into "$root"
      STAGE_ROOT[$stage]=$root
      workdir=/ user="" ENVS=()
      step "FROM $image AS $stage"
      ;;
    ENV)
      kv=$(subst "$rest")
      ENVS+=("${kv%%=*}=${kv#*=}")
      [[ "$kv" == *=* ]] || fail "ENV $rest: only ENV KEY=VALUE is emulated"
      ;;
    WORKDIR) workdir=$(subst "$rest"); mkdir -p "$root$workdir" ;;
    USER) user=$(subst "$rest") ;;
    COPY)
      step "COPY $rest"
      # shellcheck disable=SC2046
      do_copy $(subst "$rest")
      ;;
    RUN)
      step "RUN ${rest:0:100}..."
      in_root "$rest" > "$BUILD_DIR/run-$stage.log" 2>&1 ||
        { tail -40 "$BUILD_DIR/run-$stage.log"; fail "RUN failed in stage $stage: ${rest:0:200}"; }
      tail -3 "$BUILD_DIR/run-$stage.log" | sed 's/^/    /'
      ;;
    ENTRYPOINT | CMD | LABEL | EXPOSE | VOLUME | STOPSIGNAL | HEALTHCHECK | SHELL | ONBUILD) ;;
    *) fail "unknown instruction $op" ;;
  esac
done

# ---- the image, as a container would run it --------------------------------------------
step "checking the final stage ($stage) as its USER ($user)"
[ -n "$user" ] && [ "${user%%:*}" != 0 ] || fail "the image must not run as root (USER)"
check() { # DESCRIPTION COMMAND
  if out=$(in_root "$2" 2>&1); then
    echo "ok   $1"
  else
    echo "$out" | tail -20 | sed 's/^/  | /'
    fail "$1"
  fi
}
check "every binary is there" 'for b in dtrain dtrain-scheduler dtrain-server dtrain-worker dtrain-seed-data; do command -v $b; done'
check "every binary finds its libraries" '! ldd /opt/dtrain/bin/* 2>/dev/null | grep "not found"'
check "no compiler, no -dev packages (runtime libraries only)" \
  '! command -v c++ && ! command -v cmake && ! dpkg-query -W -f "\${Package}\n" | grep -- "-dev$"'
check "runs as uid 10001" 'test "$(id -u)" = 10001'
check "dtrain run execs the role's binary" 'DTRAIN_ROLE=worker dtrain run --help | grep -q -- --kv-store'
check "bundled Fashion-MNIST seeds a data directory" \
  'DTRAIN_DATA_DIR=/tmp/data/fashion-mnist dtrain-seed-data && test "$(ls /tmp/data/fashion-mnist | wc -l)" = 4'
check "trains one small epoch on the bundled data and checkpoints" \
  'dtrain-worker --kv-store local --network mlp --num-epochs 1 --num-examples 600 --threads 1 \
     --data-dir /tmp/data/fashion-mnist --model-prefix /tmp/model/mlp && test -f /tmp/model/mlp-0001.params'
step "image size: $(du -sh --exclude=proc --exclude=sys --exclude=dev "$root" | cut -f1) (uncompressed root)"
echo "image test passed in $(($(date +%s) - T0))s"
