#!/usr/bin/env bash
# Runs docker/Dockerfile's steps without a Docker engine: each stage in a clean Debian root
# made by debootstrap (from Debian's packages, the archive this machine's apt uses), its
# instructions (FROM, ARG, ENV, WORKDIR, COPY [--from], RUN, USER; the rest is metadata)
# executed as Docker would, then checks the final image: it holds every binary, they find
# their libraries, it has no compiler or -dev package, runs as a non-root user, trains
# one small epoch on the bundled Fashion-MNIST, serves the checkpoint with dtrain-infer and
# draws `dtrain predict`'s captioned grid (all three opening no library they do not link),
# and that its HEALTHCHECK answers as it should.
# The build context is the tree as .dockerignore leaves it (copied to DIR/context), so a
# COPY of something .dockerignore leaves out fails here as it would under Docker.
#
#   bash docker/test-dockerfile.sh [--build-dir DIR] [--dockerfile FILE] [--keep]
#   bash docker/test-dockerfile.sh --context-only [--build-dir DIR]
#
# --context-only (seconds, no root): makes the context, prints its size beside the whole
# tree's (what `docker build .` sent without .dockerignore), checks that every COPY source
# of docker/Dockerfile*, is in it, and stops.
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
CONTEXT_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --dockerfile) DOCKERFILE=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --context-only) CONTEXT_ONLY=1; shift ;;
    *) echo "usage: $0 [--build-dir DIR] [--dockerfile FILE] [--keep] | --context-only [--build-dir DIR]" >&2; exit 2 ;;
  esac
done
fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- the build context, as .dockerignore leaves it --------------------------------------
# Docker's rules (moby patternmatcher): patterns in order, relative to the context root,
# `*` and `?` within one path element, `**` across any number of them, `!` re-includes; a
# pattern that matches a directory matches everything under it; the last match decides.
make_context() { # SRC DEST: copies what .dockerignore lets through
  python3 - "$1" "$2" << 'PY'
import os, re, shutil, sys
src, dest = sys.argv[1], sys.argv[2]
pats = []
ignore = os.path.join(src, ".dockerignore")
if os.path.exists(ignore):
    for line in open(ignore):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        p = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        rx = ""
        i = 0
        while i < len(p):
            if p.startswith("**", i):
                rx += ".*"
                i += 2
                if p.startswith("/", i):  # "**/": any number of directories, none included
                    rx = rx[:-2] + "(.*/)?"
                    i += 1
            elif p[i] == "*":
                rx += "[^/]*"; i += 1
            elif p[i] == "?":
                rx += "[^/]"; i += 1
            else:
                rx += re.escape(p[i]); i += 1
        pats.append((re.compile("^" + rx + "$"), neg))
def excluded(rel):
    parts = rel.split("/")
    out = False
    for rx, neg in pats:
        if any(rx.match("/".join(parts[:k])) for k in range(1, len(parts) + 1)):
            out = not neg
    return out
shutil.rmtree(dest, ignore_errors=True)
os.makedirs(dest)
for root, dirs, files in os.walk(src):
    rel_root = os.path.relpath(root, src)
    for f in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
        rel = os.path.normpath(os.path.join(rel_root, f))
        if excluded(rel):
            continue
        os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(os.path.join(src, rel), os.path.join(dest, rel), follow_symlinks=False)
PY
}
mkdir -p "$BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
make_context "$CONTEXT" "$BUILD_DIR/context" || fail "making the build context failed"
# Informational only: a tree being used meanwhile (another test's image root with /proc
# mounted, test files coming and going) makes tar exit non-zero; the count still stands.
size_of() { { tar -C "$1" --exclude="./${BUILD_DIR#"$CONTEXT"/}" -cf - . 2> /dev/null || true; } | wc -c; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
ctx_bytes=$(size_of "$BUILD_DIR/context") tree_bytes=$(size_of "$CONTEXT")
echo "build context: $(find "$BUILD_DIR/context" -type f | wc -l) files, $(mb "$ctx_bytes") (tar); without .dockerignore: $(find "$CONTEXT" -type f 2> /dev/null | wc -l) files, $(mb "$tree_bytes")"
# Every COPY from the context, in every Dockerfile, finds its source there.
for df in docker/Dockerfile*; do
  # COPY [--chown=..] SRC... DEST, but not COPY --from=STAGE (from an image, not the context).
  for src in $(awk 'toupper($1) == "COPY" && $0 !~ /--from=/ { for (i = 2; i < NF; i++) if ($i !~ /^--/) print $i }' "$df"); do
    [ -e "$BUILD_DIR/context/$src" ] || fail "$df: COPY $src, which .dockerignore leaves out of the context"
  done
done
echo "ok   every COPY source of docker/Dockerfile* is in the context"
if [ "$CONTEXT_ONLY" = 1 ]; then exit 0; fi
CONTEXT="$BUILD_DIR/context"
[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, chroot, mounts)"
command -v debootstrap > /dev/null || fail "debootstrap is not installed (apt-get install debootstrap)"
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
        debian:*@sha256:*)
          # A digest pins the registry's image; here the root comes from debootstrap of the
          # archive apt uses, whatever the digest: it is not checked.
          release=${image#debian:}; release=${release%%@*}; release=${release%-slim}
          step "FROM $image: the digest is not checked (debootstrap $release)" ;;
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
    HEALTHCHECK) HEALTHCHECK=$rest ;;
    ENTRYPOINT | CMD | LABEL | EXPOSE | VOLUME | STOPSIGNAL | SHELL | ONBUILD) ;;
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
# The image carries the libraries the binaries load (ldd's closure), not their packages:
# these run under LD_DEBUG=files, and a library opened at run time (dlopen) fails the check
# below. (LeNet: its convolutions are oneDNN's, which looks for libJitPI.so, VTune's
# profiling hook; no Debian package has it, so it is not found with the packages either.)
check "trains one small epoch on the bundled data and checkpoints" \
  'LD_DEBUG=files LD_DEBUG_OUTPUT=/tmp/ld-files dtrain-worker --kv-store local --network lenet --num-epochs 1 \
     --num-examples 600 --threads 1 --data-dir /tmp/data/fashion-mnist --model-prefix /tmp/model/lenet &&
   test -f /tmp/model/lenet-0001.params'
check "dtrain-infer serves it; dtrain predict scores t10k images and draws the grid with captions" \
  'LD_DEBUG=files LD_DEBUG_OUTPUT=/tmp/ld-files dtrain-infer --model-prefix /tmp/model/lenet --epoch 1 \
     --host 127.0.0.1 --port-file /tmp/infer.port > /tmp/infer.log 2>&1 & p=$!;
   for i in $(seq 100); do [ -s /tmp/infer.port ] && break; sleep 0.2; done; d=/tmp/data/fashion-mnist;
   LD_DEBUG=files LD_DEBUG_OUTPUT=/tmp/ld-files dtrain predict --server 127.0.0.1:$(cat /tmp/infer.port) \
     --images $d/t10k-images-idx3-ubyte.gz --labels $d/t10k-labels-idx1-ubyte.gz --limit 20 \
     --render /tmp/grid.png > /tmp/predict.log 2>&1; rc=$?; kill $p; cat /tmp/predict.log;
   [ $rc = 0 ] && grep -q "of 20 right" /tmp/predict.log && ! grep -q "Fontconfig error" /tmp/predict.log &&
   test -s /tmp/grid.png'
check "they open no library at run time beyond what they link (no dlopen under LD_DEBUG=files)" \
  'ls /tmp/ld-files.* > /dev/null || exit 1; opened=$(grep -h "dynamically loaded" /tmp/ld-files.* |
     sed "s/.*file=\([^ ]*\) .*/\1/" | sort -u | grep -vx libJitPI.so);
   [ -z "$opened" ] || { echo "dlopen()ed at run time:" $opened; exit 1; }'
# HEALTHCHECK [OPTIONS] CMD ["exe", "arg", ...] (exec form), run in the image as Docker would.
if [ -n "${HEALTHCHECK:-}" ]; then
  hc_json=${HEALTHCHECK#*CMD }
  [[ "$hc_json" == \[* ]] || fail "HEALTHCHECK: only the exec form CMD [...] is emulated"
  hc=$(python3 -c 'import json, shlex, sys; print(" ".join(shlex.quote(a) for a in json.loads(sys.argv[1])))' "$hc_json") ||
    fail "HEALTHCHECK: CMD is not a JSON array"
  check "HEALTHCHECK: healthy where there is no port to ask (a worker)" "unset DTRAIN_PORT; $hc"
  check "HEALTHCHECK: unhealthy when nothing answers on DTRAIN_PORT" "! DTRAIN_PORT=9 $hc"
  check "HEALTHCHECK: healthy when the scheduler serves on DTRAIN_PORT" \
    'DTRAIN_PORT=19091 DTRAIN_NUM_WORKERS=1 DTRAIN_NUM_SERVERS=1 dtrain-scheduler --port 19091 > /tmp/sched.log 2>&1 & p=$!; ok=1;
     for i in $(seq 50); do if DTRAIN_PORT=19091 '"$hc"'; then ok=0; break; fi; sleep 0.2; done; kill $p; exit $ok'
fi
# Without what the checks wrote (tmp) and apt's caches (the .debs and pkgcache.bin, about
# 110 MB), which Debian's images delete after each install (docker-clean) and debootstrap's
# roots keep.
step "image size: $(du -sh --exclude=proc --exclude=sys --exclude=dev --exclude=tmp --exclude=var/cache/apt "$root" |
  cut -f1) (uncompressed root), of it $(du -sh "$root/opt/dtrain/lib" 2> /dev/null | cut -f1) copied libraries"
echo "image test passed in $(($(date +%s) - T0))s"
