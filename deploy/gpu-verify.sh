#!/usr/bin/env bash
# Checks dtrain's GPU parts on a machine with NVIDIA GPUs (docs/gpu.md, "Checking it on a GPU
# machine"). Two steps, because the GPU machine may have no package mirror:
#
#   bash deploy/gpu-verify.sh fetch [DIR]   # where Debian bookworm's mirror is reachable: downloads
#                                           # the .deb files of the build's C++ dependencies to DIR
#   bash deploy/gpu-verify.sh run [DIR]     # on the GPU machine: unpacks them into a prefix, builds
#                                           # with python3's torch (its LibTorch and NCCL) and
#                                           # -DDTRAIN_CUDA=ON, runs the GPU tests and a GPU job
#
# DIR defaults to build-gpu-debs (ignored by git, like every build* folder). The GPU machine
# needs what the .deb files do not bring: g++ (12 or newer: Debian's libraries use its C++
# runtime), cmake >= 3.20, ninja or make, python3 with torch (CUDA build: PyTorch 2.11 with
# CUDA 13 is what this was written for), the CUDA toolkit's nvcc and headers, which LibTorch's
# CMake config looks for (CUDAToolkit_ROOT or /usr/local/cuda), and glibc >= 2.36.
# Each check prints PASS or FAIL with where its log is;
# the exit status is that of the first FAIL.
set -uo pipefail
cd "$(dirname "$0")/.."
STEP="${1:-}"
DIR="${2:-build-gpu-debs}"
BUILD="${GPU_BUILD_DIR:-build-gpu}"
PREFIX="$BUILD/debs-root"
LOGS="$BUILD/verify-logs"
JOBS="${JOBS:-$(nproc)}"

# What the build links or runs from Debian (direct packages; their dependencies are added by
# fetch): gRPC, protobuf, abseil, prometheus-cpp, OpenSSL, zlib, JSON, GoogleTest, cairo for
# `dtrain predict` (part of the dtrain binary), pkg-config, and the Fashion-MNIST data.
TOP_PACKAGES=(
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libabsl-dev
  prometheus-cpp-dev nlohmann-json3-dev libgtest-dev libgmock-dev libssl-dev zlib1g-dev
  libcairo2-dev pkgconf
)
# The training data (30 MB) goes to DIR/data, so that the libraries alone (about 40 MB) fit
# where a transfer is capped at 64 MiB; the launch check uses it when it is there.
DATA_PACKAGES=(dataset-fashion-mnist)
# What the GPU machine has of its own and must keep (its C library and compiler runtime, and
# interpreters and data that only packaging scripts use): never unpacked over the prefix.
EXCLUDE_RE='^(libc6|libc6-dev|libc-dev-bin|linux-libc-dev|libcrypt1|libcrypt-dev|libnsl-dev|libnsl2|libtirpc.*|rpcsvc-proto|libstdc\+\+6|libgcc-s1|gcc-12-base|perl.*|libperl.*|python3.*|libpython3.*|fonts-.*|ttf-.*|x11-common|xfonts-.*|mailcap|media-types|mime-support|install-info|lsb-base|cdebconf|libdebian-installer4|libnewt0.52|libslang2|libtextwrap1|libglib2.0-bin|libglib2.0-data|libglib2.0-dev-bin|debconf|dpkg|tar|coreutils|bash|libselinux1|libacl1|libgdbm.*|libdb5.3|libreadline8|libncursesw6|libtinfo6|libsqlite3-0|libmd0|libbsd0|libuuid1|libblkid1|libmount1|libzstd1|liblzma5|libbz2-1.0|libgmp10|libpcre2-8-0|libsepol2)$'

say() { printf '%s\n' "$*"; }
FIRST_FAIL=0
report() {  # report NAME PASS|FAIL LOG [why]
  say "gpu-verify: $2: $1 (log: $3)${4:+: $4}"
  if [ "$2" = FAIL ] && [ "$FIRST_FAIL" -eq 0 ]; then FIRST_FAIL=1; fi
}

fetch() {
  mkdir -p "$DIR"
  apt-get update -q >/dev/null || { say "gpu-verify: apt-get update failed"; exit 1; }
  local all
  all=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
          --no-replaces --no-enhances "${TOP_PACKAGES[@]}" | grep -E '^[a-z0-9]' | sort -u \
        | grep -Ev "$EXCLUDE_RE")
  # Packages only "Provided" by others (virtual) have no file: apt-cache show tells which are real.
  local real
  real=$(apt-cache show --no-all-versions $all 2>/dev/null | awk -F': ' '/^Package:/{print $2}' | sort -u)
  printf '%s\n' $real > "$DIR/packages.txt"
  (cd "$DIR" && apt-get download $real) || { say "gpu-verify: apt-get download failed"; exit 1; }
  mkdir -p "$DIR/data"
  (cd "$DIR/data" && apt-get download "${DATA_PACKAGES[@]}") || { say "gpu-verify: apt-get download failed"; exit 1; }
  say "gpu-verify: $(ls "$DIR"/*.deb | wc -l) .deb files ($(du -sh --exclude=data "$DIR" | cut -f1)) in $DIR," \
      "the data ($(du -sh "$DIR/data" | cut -f1)) in $DIR/data; list: $DIR/packages.txt"
}

# dpkg -x, or ar + tar where the machine has no dpkg (its data.tar may be xz, zst or gz).
unpack() {
  if command -v dpkg >/dev/null; then dpkg -x "$1" "$PREFIX"; return; fi
  local member
  member=$(ar t "$1" | grep '^data\.tar') || return 1
  case "$member" in
    *.xz) ar p "$1" "$member" | tar -xJ -C "$PREFIX" ;;
    *.zst) ar p "$1" "$member" | zstd -dc | tar -x -C "$PREFIX" ;;
    *.gz) ar p "$1" "$member" | tar -xz -C "$PREFIX" ;;
    *) ar p "$1" "$member" | tar -x -C "$PREFIX" ;;
  esac
}

run() {
  mkdir -p "$LOGS"
  ls "$DIR"/*.deb >/dev/null 2>&1 || { say "gpu-verify: no .deb files in $DIR: run 'fetch' first"; exit 1; }
  # The machine.
  { nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > "$LOGS/machine.log" 2>&1
  python3 - > "$LOGS/torch.log" 2>&1 <<'EOF'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      "devices", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else None)
print("cmake_prefix_path", torch.utils.cmake_prefix_path)
EOF
  if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    report "python3's torch sees a GPU" FAIL "$LOGS/torch.log"; return
  fi
  report "python3's torch sees a GPU" PASS "$LOGS/torch.log" "$(head -1 "$LOGS/torch.log")"
  local missing=""
  for tool in g++ cmake; do command -v "$tool" >/dev/null || missing="$missing $tool"; done
  command -v nvcc >/dev/null || [ -x "${CUDAToolkit_ROOT:-/usr/local/cuda}/bin/nvcc" ] || missing="$missing nvcc"
  if [ -n "$missing" ]; then report "build tools" FAIL "-" "missing:$missing"; return; fi

  # Debian's libraries into a prefix; .pc files there name /usr, hence the sysroot.
  rm -rf "$PREFIX" && mkdir -p "$PREFIX"
  local f
  for f in "$DIR"/*.deb "$DIR"/data/*.deb; do
    [ -f "$f" ] || continue
    unpack "$f" || { report "unpack $f" FAIL "-"; return; }
  done
  local libdir="$PREFIX/usr/lib/x86_64-linux-gnu"
  export LD_LIBRARY_PATH="$libdir:$PREFIX/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_SYSROOT_DIR="$PREFIX"
  export PKG_CONFIG_LIBDIR="$libdir/pkgconfig:$PREFIX/usr/share/pkgconfig"
  export PATH="$PREFIX/usr/bin:$PATH"

  # LibTorch and NCCL from python3's torch: one libnccl.so.2 for the worker and libtorch_cuda.
  local torch_prefix site nccl_h nccl_root
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  site=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
  nccl_h=$(find "$site/nvidia" -name nccl.h 2>/dev/null | head -1)
  nccl_root=${NCCL_ROOT:-${nccl_h:+$(dirname "$(dirname "$nccl_h")")}}
  say "gpu-verify: LibTorch $torch_prefix, NCCL ${nccl_root:-(beside the CUDA toolkit)}"
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  if ! cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTRAIN_CUDA=ON \
         -DCMAKE_PREFIX_PATH="$torch_prefix;$PREFIX/usr" ${nccl_root:+-DNCCL_ROOT="$nccl_root"} \
         -DProtobuf_PROTOC_EXECUTABLE="$PREFIX/usr/bin/protoc" > "$LOGS/configure.log" 2>&1; then
    report "configure with -DDTRAIN_CUDA=ON" FAIL "$LOGS/configure.log"; return
  fi
  if grep -q "LibTorch with CUDA ON" "$LOGS/configure.log"; then
    report "configure with -DDTRAIN_CUDA=ON" PASS "$LOGS/configure.log" "$(grep 'dtrain: DTRAIN_CUDA' "$LOGS/configure.log")"
  else
    report "configure: LibTorch seen as built with CUDA" FAIL "$LOGS/configure.log"; return
  fi
  if ! cmake --build "$BUILD" -j "$JOBS" --target dtrain dtrain-scheduler dtrain-server dtrain-worker \
         nccl_aggregator_test gpu_devices_test local_aggregator_test device_replicas_test device_copies_test \
         > "$LOGS/build.log" 2>&1; then
    report "build" FAIL "$LOGS/build.log"; return
  fi
  report "build" PASS "$LOGS/build.log"

  # The aggregator on the GPUs: the Reduce/Broadcast test must run, not skip.
  "$BUILD/bin/nccl_aggregator_test" > "$LOGS/nccl_aggregator_test.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    report "nccl_aggregator_test" FAIL "$LOGS/nccl_aggregator_test.log"
  elif grep -q "SKIPPED ] NcclAggregatorTest.ReduceSumsEveryGpuIntoTheFirstAndBroadcastCopiesItBack" \
         "$LOGS/nccl_aggregator_test.log"; then
    report "nccl_aggregator_test" FAIL "$LOGS/nccl_aggregator_test.log" "the device tests skipped on a GPU machine"
  else
    report "nccl_aggregator_test" PASS "$LOGS/nccl_aggregator_test.log" \
      "$(grep -c '^\[  SKIPPED \] NcclAggregatorTest' "$LOGS/nccl_aggregator_test.log") skipped (two GPUs needed for one)"
  fi
  for t in gpu_devices_test local_aggregator_test device_replicas_test; do
    if "$BUILD/bin/$t" > "$LOGS/$t.log" 2>&1; then report "$t" PASS "$LOGS/$t.log"; else report "$t" FAIL "$LOGS/$t.log"; fi
  done
  # The CUDA copies (device_copies_cuda.cc): their test must run, not skip, on a GPU.
  if ! "$BUILD/bin/device_copies_test" > "$LOGS/device_copies_test.log" 2>&1; then
    report device_copies_test FAIL "$LOGS/device_copies_test.log"
  elif grep -q "SKIPPED ] DeviceCopiesTest.GpusCopy" "$LOGS/device_copies_test.log"; then
    report device_copies_test FAIL "$LOGS/device_copies_test.log" "the GPU test skipped on a GPU machine"
  else
    report device_copies_test PASS "$LOGS/device_copies_test.log"
  fi

  # Jobs on the GPUs: each worker trains a replica on each listed GPU (DeviceReplicas) and
  # must end as dist_device_sync promises, with the same weights as the other worker, and
  # learn about as well as the same job on the CPU (to float rounding: 0.02 of accuracy).
  local data=()
  [ -d "$PREFIX/usr/share/datasets/fashion-mnist" ] && data=(--data-dir "$PREFIX/usr/share/datasets/fashion-mnist")
  local job=(--network lenet --num-epochs 1 --num-examples 4000 --seed 7 "${data[@]}")
  timeout 900 "$BUILD/bin/dtrain" launch -n 2 -s 2 --kv-store dist_device_sync -- "${job[@]}" \
    > "$LOGS/launch-cpu.log" 2>&1
  local cpu_acc
  cpu_acc=$(grep -o 'Validation-accuracy=[0-9.]*' "$LOGS/launch-cpu.log" | tail -1 | cut -d= -f2)
  launch_on_gpus 0 "$cpu_acc"
  if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then launch_on_gpus 0,1 "$cpu_acc"; fi
}

# launch_on_gpus LIST CPU_ACCURACY: a 2-worker dist_device_sync LeNet job with --gpus LIST.
launch_on_gpus() {
  local gpus=$1 cpu_acc=$2 log="$LOGS/launch-gpus-$1.log" name="dtrain launch --kv-store dist_device_sync -- --gpus $1"
  timeout 900 "$BUILD/bin/dtrain" launch -n 2 -s 2 --kv-store dist_device_sync -- --gpus "$gpus" "${job[@]}" \
    > "$log" 2>&1
  local rc=$? hashes acc
  hashes=$(grep -o 'weights-fnv64=[0-9a-f]*' "$log" | sort -u | wc -l)
  acc=$(grep -o 'Validation-accuracy=[0-9.]*' "$log" | tail -1 | cut -d= -f2)
  if [ $rc -ne 0 ]; then
    report "$name" FAIL "$log" "exit $rc"
  elif ! grep -q "on GPUs\? $gpus," "$log" || [ "$hashes" -ne 1 ]; then
    report "$name" FAIL "$log" "no replicas on GPU(s) $gpus in the log, or the workers' weights differ ($hashes distinct weights-fnv64)"
  elif [ -n "$cpu_acc" ] && ! awk -v a="$acc" -v c="$cpu_acc" 'BEGIN { d = a - c; exit !(d < 0.02 && d > -0.02) }'; then
    report "$name" FAIL "$log" "Validation-accuracy $acc, the CPU's $cpu_acc"
  else
    report "$name" PASS "$log" "Validation-accuracy $acc (the CPU's ${cpu_acc:-unknown}); $(grep -m1 'Speed:' "$log" | grep -o 'Speed: [0-9.]* samples/sec')"
  fi
}

case "$STEP" in
  fetch) fetch ;;
  run) run; exit "$FIRST_FAIL" ;;
  *) say "usage: bash deploy/gpu-verify.sh fetch|run [DIR]"; exit 2 ;;
esac
