#!/usr/bin/env bash
# Checks dtrain's GPU parts on a machine with NVIDIA GPUs (docs/gpu.md, "Checking it on a GPU
# machine"). Two steps, because the GPU machine may have no package mirror:
#
#   bash deploy/gpu-verify.sh fetch [DIR]   # where Debian bookworm's mirror is reachable: downloads
#                                           # the .deb files of the build's C++ dependencies to DIR
#                                           # and packs them, unpacked and without documentation or
#                                           # static libraries, as DIR/prefix.tar.xz (19 MB, not 41)
#   bash deploy/gpu-verify.sh run [DIR]     # on the GPU machine: unpacks them into a prefix, builds
#                                           # with python3's torch (its LibTorch and NCCL) and
#                                           # -DDTRAIN_CUDA=ON, runs the GPU tests, GPU jobs and the
#                                           # throughput comparison with PyTorch
#
# Only DIR/prefix.tar.xz and DIR/data need to travel to the GPU machine (about 50 MB with the
# data). GPU_VERIFY_STAGES picks what `run` does after the build (default: all, in this order):
#   unit    the GPU unit tests (the NCCL aggregator, replicas, the CUDA copies)
#   lenet   LeNet, 2 workers + 2 servers, dist_device_sync --gpus 0 against the same on the CPU
#   resnet  ResNet-20, 2 workers on GPU 0 + 1 server: accuracy against the CPU, equal weights,
#           and a worker SIGKILLed mid-epoch (--max-restarts 1) ending on the same weights
#   bench   1 worker on the GPU, dist_device_sync (+1 server) and device mode, against
#           tests/bench/torch_reference.py --device cuda: ResNet-20, LeNet, the wide mlp
#   tls     no GPU: mutual TLS against plaintext, push+pull and training, where the cores are
#           idle (deploy/gpu-verify-tls.sh says why); INFO lines against the targets
# Every line of the verdict also goes to $BUILD/verify-logs/summary.txt.
#
#   bash deploy/gpu-verify.sh stages        # the stages alone, on an existing build ($GPU_BUILD_DIR)
#
# GPU_VERIFY_ON_CPU=1 runs the resnet and bench stages with one CPU replica (--cpu-replicas 1,
# the same trainer path without CUDA) and a CPU reference: how CI keeps this script working
# between the rare sessions that have a GPU (tests/integration/gpu_verify_script_test.sh).
# GPU_VERIFY_RESNET (the resnet stage's model and examples), GPU_VERIFY_KILL_AT (the batch
# after which a worker is killed) and GPU_VERIFY_BENCH (which bench models) make it small;
# GPU_VERIFY_LOGS puts the logs elsewhere.
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
# Absolute: the prefix's paths end up in CMake's imported targets, which refuse relative ones.
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
PREFIX="$BUILD/debs-root"
LOGS="${GPU_VERIFY_LOGS:-$BUILD/verify-logs}"
JOBS="${JOBS:-$(nproc)}"
PYTHON="${PYTHON:-python3}"
# What the stages train on.
if [ -n "${GPU_VERIFY_ON_CPU:-}" ]; then
  DEVICE=(--cpu-replicas 1) WHERE="on the CPU (--cpu-replicas 1)" REF_DEVICE=cpu
else
  DEVICE=(--gpus 0) WHERE="on GPU 0," REF_DEVICE=cuda
fi
RESNET=(${GPU_VERIFY_RESNET:---network resnet --num-layers 20 --num-examples 10000})
KILL_AT="${GPU_VERIFY_KILL_AT:-30}"
PYTHON_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
data=()

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
# launched_worker P RANK: the pid of `dtrain launch`'s worker of that rank under process P.
source tests/bench/launched_worker.sh
FIRST_FAIL=0
report() {  # report NAME PASS|FAIL|INFO LOG [why]
  say "gpu-verify: $2: $1 (log: $3)${4:+: $4}"
  [ -d "$LOGS" ] && say "$2: $1${4:+: $4}" >> "$LOGS/summary.txt"
  if [ "$2" = FAIL ] && [ "$FIRST_FAIL" -eq 0 ]; then FIRST_FAIL=1; fi
}
source deploy/gpu-verify-tls.sh  # stage_tls

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
  pack
  say "gpu-verify: $(ls "$DIR"/*.deb | wc -l) .deb files ($(du -sh --exclude=data "$DIR" | cut -f1)) in $DIR," \
      "the data ($(du -sh "$DIR/data" | cut -f1)) in $DIR/data; list: $DIR/packages.txt"
}

# The .deb files unpacked, less what a build and a run never read (documentation, manual
# pages, translations, static libraries other than GoogleTest's, which Debian ships only
# static), as one archive: it is what travels to a GPU machine whose transfers are capped.
pack() {
  local tmp f
  tmp=$(mktemp -d)
  for f in "$DIR"/*.deb; do dpkg -x "$f" "$tmp" || { say "gpu-verify: dpkg -x $f failed"; exit 1; }; done
  rm -rf "$tmp/usr/share/doc" "$tmp/usr/share/man" "$tmp/usr/share/locale" "$tmp/usr/share/info"
  find "$tmp" -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' -delete
  tar -C "$tmp" -cf - . | xz -T0 -6 > "$DIR/prefix.tar.xz.tmp" && mv "$DIR/prefix.tar.xz.tmp" "$DIR/prefix.tar.xz"
  rm -rf "$tmp"
  say "gpu-verify: packed $DIR/prefix.tar.xz ($(du -sh "$DIR/prefix.tar.xz" | cut -f1))"
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
  rm -rf "$LOGS" && mkdir -p "$LOGS"
  if [ ! -f "$DIR/prefix.tar.xz" ] && ! ls "$DIR"/*.deb >/dev/null 2>&1; then
    say "gpu-verify: neither $DIR/prefix.tar.xz nor .deb files in $DIR: run 'fetch' first"; exit 1
  fi
  local t0=$SECONDS
  # The machine.
  { nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; uname -a
    g++ --version | head -1; cmake --version | head -1; nproc; } > "$LOGS/machine.log" 2>&1
  python3 -c '
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      "devices", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else None,
      "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
print("cmake_prefix_path", torch.utils.cmake_prefix_path)' > "$LOGS/torch.log" 2>&1
  if [ -z "${GPU_VERIFY_NO_GPU:-}" ]; then
    if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
      report "python3's torch sees a GPU" FAIL "$LOGS/torch.log"; return
    fi
    report "python3's torch sees a GPU" PASS "$LOGS/torch.log" "$(head -1 "$LOGS/torch.log")"
  fi
  local missing="" tool
  for tool in g++ cmake; do command -v "$tool" >/dev/null || missing="$missing $tool"; done
  command -v nvcc >/dev/null || [ -x "${CUDAToolkit_ROOT:-/usr/local/cuda}/bin/nvcc" ] || missing="$missing nvcc"
  if [ -n "$missing" ]; then report "build tools" FAIL "-" "missing:$missing"; return; fi

  # Debian's libraries into a prefix; .pc files there name /usr, hence the sysroot.
  rm -rf "$PREFIX" && mkdir -p "$PREFIX"
  if [ -f "$DIR/prefix.tar.xz" ]; then
    tar -xJf "$DIR/prefix.tar.xz" -C "$PREFIX" 2> "$LOGS/unpack.log" \
      || python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
           "$DIR/prefix.tar.xz" "$PREFIX" 2>> "$LOGS/unpack.log" \
      || { report "unpack $DIR/prefix.tar.xz" FAIL "$LOGS/unpack.log"; return; }
  fi
  local f
  for f in "$DIR"/*.deb "$DIR"/data/*.deb; do
    [ -f "$f" ] || continue
    # With the packed prefix, the library .deb files (if any came too) are already in it.
    [ -f "$DIR/prefix.tar.xz" ] && [ "$f" = "${f#"$DIR"/data/}" ] && continue
    unpack "$f" || { report "unpack $f" FAIL "-"; return; }
  done
  local libdir="$PREFIX/usr/lib/x86_64-linux-gnu"
  # python3 (the PyTorch reference) keeps the machine's own libraries: PYTHON_LD_LIBRARY_PATH.
  export LD_LIBRARY_PATH="$libdir:$PREFIX/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_SYSROOT_DIR="$PREFIX"
  export PKG_CONFIG_LIBDIR="$libdir/pkgconfig:$PREFIX/usr/share/pkgconfig"
  export PATH="$PREFIX/usr/bin:$PATH"

  # LibTorch and NCCL from python3's torch: one libnccl.so.2 for the worker and libtorch_cuda.
  # The prefix's multiarch headers (OpenSSL's opensslconf.h) are where a compiler looks only
  # under /usr: named as system headers in the configure below.
  local torch_prefix site nccl_h nccl_root
  torch_prefix=${TORCH_CMAKE_PREFIX:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')}
  site=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
  nccl_h=$(find "$site/nvidia" -name nccl.h 2>/dev/null | head -1)
  nccl_root=${NCCL_ROOT:-${nccl_h:+$(dirname "$(dirname "$nccl_h")")}}
  say "gpu-verify: LibTorch $torch_prefix, NCCL ${nccl_root:-(beside the CUDA toolkit)}"
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  if ! cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DDTRAIN_CUDA=ON -DDTRAIN_FUZZ=OFF \
         -DCMAKE_PREFIX_PATH="$torch_prefix;$PREFIX/usr" ${nccl_root:+-DNCCL_ROOT="$nccl_root"} \
         -DCMAKE_C_FLAGS="-isystem $PREFIX/usr/include/x86_64-linux-gnu" \
         -DCMAKE_CXX_FLAGS="-isystem $PREFIX/usr/include/x86_64-linux-gnu" \
         -DProtobuf_PROTOC_EXECUTABLE="$PREFIX/usr/bin/protoc" > "$LOGS/configure.log" 2>&1; then
    report "configure with -DDTRAIN_CUDA=ON" FAIL "$LOGS/configure.log" \
      "$(grep -m3 -A4 'CMake Error' "$LOGS/configure.log" | tr '\n' ' ' | cut -c1-900)"
    return
  fi
  if grep -q "LibTorch with CUDA ON" "$LOGS/configure.log"; then
    report "configure with -DDTRAIN_CUDA=ON" PASS "$LOGS/configure.log" "$(grep 'dtrain: DTRAIN_CUDA' "$LOGS/configure.log")"
  elif [ -z "${GPU_VERIFY_NO_GPU:-}" ]; then
    report "configure: LibTorch seen as built with CUDA" FAIL "$LOGS/configure.log"; return
  fi
  # GPU_VERIFY_TARGETS (a space-separated list) builds less, to try the script without a GPU.
  local targets=(${GPU_VERIFY_TARGETS:-dtrain dtrain-scheduler dtrain-server dtrain-worker nccl_aggregator_test
                 gpu_devices_test local_aggregator_test device_replicas_test device_copies_test flat_parameters_test
                 tls_bench})
  if ! cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" > "$LOGS/build.log" 2>&1; then
    report "build" FAIL "$LOGS/build.log" "$(grep -m4 -A5 'error' "$LOGS/build.log" | cut -c1-300 | head -24 | tr '\n' ' ')"
    return
  fi
  report "build" PASS "$LOGS/build.log" "$((SECONDS - t0)) s since the start"

  [ -d "$PREFIX/usr/share/datasets/fashion-mnist" ] && data=(--data-dir "$PREFIX/usr/share/datasets/fashion-mnist")
  run_stages "$t0"
}

# run_stages T0: the stages of GPU_VERIFY_STAGES on the build in $BUILD.
run_stages() {
  local stage
  for stage in ${GPU_VERIFY_STAGES-unit lenet resnet bench tls}; do
    "stage_$stage"
    say "gpu-verify: stage $stage done, $((SECONDS - $1)) s since the start"
  done
}

# The first lines of a log that say what went wrong, on one line.
why() {
  { grep -m4 -E ' E |rror|FAILED|Failure|cannot|Check failed' "$1" || tail -2 "$1"; } | cut -c1-300 | tr '\n' ' '
}
# The last value of NAME=VALUE in a log (Validation-accuracy, weights-fnv64).
last_value() { grep -o "$2=[0-9a-f.]*" "$1" | tail -1 | cut -d= -f2; }
distinct_hashes() { grep -o 'weights-fnv64=[0-9a-f]*' "$1" | sort -u | wc -l; }
# within A B D: |A - B| < D, both set.
within() { awk -v a="$1" -v c="$2" -v d="$3" 'BEGIN { x = a - c; exit !(a != "" && c != "" && x < d && x > -d) }'; }
gtest_counts() { echo "$(grep -c '^\[       OK \]' "$1") passed, $(grep -c '^\[  SKIPPED \]' "$1") skipped"; }

stage_unit() {
  # The aggregator on the GPUs: the Reduce/Broadcast test must run, not skip.
  if ! "$BUILD/bin/nccl_aggregator_test" > "$LOGS/nccl_aggregator_test.log" 2>&1; then
    report nccl_aggregator_test FAIL "$LOGS/nccl_aggregator_test.log" "$(why "$LOGS/nccl_aggregator_test.log")"
  elif grep -q "SKIPPED ] NcclAggregatorTest.ReduceSumsEveryGpuIntoTheFirstAndBroadcastCopiesItBack" \
         "$LOGS/nccl_aggregator_test.log"; then
    report nccl_aggregator_test FAIL "$LOGS/nccl_aggregator_test.log" "the device tests skipped on a GPU machine"
  else
    report nccl_aggregator_test PASS "$LOGS/nccl_aggregator_test.log" \
      "$(gtest_counts "$LOGS/nccl_aggregator_test.log") (a second GPU is needed for the skipped)"
  fi
  local t
  for t in gpu_devices_test local_aggregator_test device_replicas_test flat_parameters_test; do
    if "$BUILD/bin/$t" > "$LOGS/$t.log" 2>&1; then
      report "$t" PASS "$LOGS/$t.log" "$(gtest_counts "$LOGS/$t.log")"
    else
      report "$t" FAIL "$LOGS/$t.log" "$(why "$LOGS/$t.log")"
    fi
  done
  # The CUDA copies (device_copies_cuda.cc): their test must run, not skip, on a GPU.
  if ! "$BUILD/bin/device_copies_test" > "$LOGS/device_copies_test.log" 2>&1; then
    report device_copies_test FAIL "$LOGS/device_copies_test.log" "$(why "$LOGS/device_copies_test.log")"
  elif grep -q "SKIPPED ] DeviceCopiesTest.GpusCopy" "$LOGS/device_copies_test.log"; then
    report device_copies_test FAIL "$LOGS/device_copies_test.log" "the GPU test skipped on a GPU machine"
  else
    report device_copies_test PASS "$LOGS/device_copies_test.log" "$(gtest_counts "$LOGS/device_copies_test.log")"
  fi
}

stage_lenet() {
  # Jobs on the GPUs: each worker trains a replica on each listed GPU (DeviceReplicas) and
  # must end as dist_device_sync promises, with the same weights as the other worker, and
  # learn about as well as the same job on the CPU (to float rounding: 0.02 of accuracy).
  job=(--network lenet --num-epochs 1 --num-examples 4000 --seed 7 "${data[@]}")
  timeout 300 "$BUILD/bin/dtrain" launch -n 2 -s 2 --kv-store dist_device_sync -- "${job[@]}" \
    > "$LOGS/launch-cpu.log" 2>&1
  local cpu_acc
  cpu_acc=$(last_value "$LOGS/launch-cpu.log" Validation-accuracy)
  launch_on_gpus 0 "$cpu_acc"
  if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then launch_on_gpus 0,1 "$cpu_acc"; fi
}

# launch_on_gpus LIST CPU_ACCURACY: a 2-worker dist_device_sync LeNet job with --gpus LIST.
launch_on_gpus() {
  local gpus=$1 cpu_acc=$2 log="$LOGS/launch-gpus-$1.log"
  local name="LeNet: dtrain launch -n 2 -s 2 --kv-store dist_device_sync -- --gpus $1"
  timeout 300 "$BUILD/bin/dtrain" launch -n 2 -s 2 --kv-store dist_device_sync -- --gpus "$gpus" "${job[@]}" \
    > "$log" 2>&1
  local rc=$? acc
  acc=$(last_value "$log" Validation-accuracy)
  if [ $rc -ne 0 ]; then
    report "$name" FAIL "$log" "exit $rc: $(why "$log")"
  elif ! grep -q "on GPUs\? $gpus," "$log" || [ "$(distinct_hashes "$log")" -ne 1 ]; then
    report "$name" FAIL "$log" "no replicas on GPU(s) $gpus in the log, or the workers' weights differ ($(distinct_hashes "$log") distinct weights-fnv64)"
  elif ! within "$acc" "$cpu_acc" 0.02; then
    report "$name" FAIL "$log" "Validation-accuracy $acc, the CPU's $cpu_acc"
  else
    report "$name" PASS "$log" "Validation-accuracy $acc (the CPU's $cpu_acc); weights-fnv64=$(last_value "$log" weights-fnv64)"
  fi
}

stage_resnet() {
  # ResNet-20 (batch norm and 21 convolutions: where cuDNN's choices matter), both workers on
  # GPU 0, one server; 10000 examples keep the CPU run short.
  local job=("${RESNET[@]}" --num-epochs 1 --seed 7 --disp-batches 10 "${data[@]}")
  local gpu_log="$LOGS/resnet-gpu.log" cpu_log="$LOGS/resnet-cpu.log" kill_log="$LOGS/resnet-gpu-killed.log"
  local name="${RESNET[*]}: dtrain launch -n 2 -s 1 --kv-store dist_device_sync -- ${DEVICE[*]}"
  timeout 300 "$BUILD/bin/dtrain" launch -n 2 -s 1 --kv-store dist_device_sync -- "${DEVICE[@]}" "${job[@]}" > "$gpu_log" 2>&1
  local rc=$? gpu_acc gpu_hash cpu_acc
  gpu_acc=$(last_value "$gpu_log" Validation-accuracy)
  gpu_hash=$(last_value "$gpu_log" weights-fnv64)
  if [ -n "${RESNET_CPU_ACCURACY:-}" ]; then
    cpu_acc=$RESNET_CPU_ACCURACY
    echo "the CPU's accuracy given: RESNET_CPU_ACCURACY=$cpu_acc" > "$cpu_log"
  else
    timeout 300 "$BUILD/bin/dtrain" launch -n 2 -s 1 --kv-store dist_device_sync -- "${job[@]}" > "$cpu_log" 2>&1
    cpu_acc=$(last_value "$cpu_log" Validation-accuracy)
  fi
  if [ $rc -ne 0 ]; then
    report "$name" FAIL "$gpu_log" "exit $rc: $(why "$gpu_log")"
  elif [ "$(distinct_hashes "$gpu_log")" -ne 1 ] || ! grep -qF "$WHERE" "$gpu_log"; then
    report "$name" FAIL "$gpu_log" "not $WHERE or the workers' weights differ ($(distinct_hashes "$gpu_log") distinct weights-fnv64)"
  elif ! within "$gpu_acc" "$cpu_acc" 0.03; then
    report "$name" FAIL "$gpu_log" "Validation-accuracy $gpu_acc, the CPU's ${cpu_acc:-unknown} ($cpu_log)"
  else
    report "$name" PASS "$gpu_log" "Validation-accuracy $gpu_acc (the CPU's $cpu_acc); both workers weights-fnv64=$gpu_hash; $(grep -m1 'per step' "$gpu_log" | sed 's/.* I //')"
  fi
  # The same job, worker 1 SIGKILLed mid-epoch: its replacement redoes its step on the GPU
  # and the job must end on the uninterrupted run's weights, bit for bit.
  timeout 300 "$BUILD/bin/dtrain" launch -n 2 -s 1 --max-restarts 1 --restart-backoff 0.1 \
    --kv-store dist_device_sync -- "${DEVICE[@]}" "${job[@]}" > "$kill_log" 2>&1 &
  local launcher=$! victim="" waited=0
  while [ $waited -lt 1200 ] && kill -0 $launcher 2>/dev/null; do
    if grep -q "^\[worker 1\].*Epoch\[0\] Batch \[$KILL_AT\]" "$kill_log"; then
      victim=$(launched_worker $launcher 1) && break
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  [ -n "$victim" ] && kill -KILL "$victim"
  wait $launcher
  rc=$?
  name="${RESNET[*]} ${DEVICE[*]}, worker 1 SIGKILLed after batch $KILL_AT (--max-restarts 1)"
  local hashes
  hashes=$(grep -o 'weights-fnv64=[0-9a-f]*' "$kill_log" | cut -d= -f2 | sort | uniq -c | tr '\n' ' ')
  if [ -z "$victim" ]; then
    report "$name" FAIL "$kill_log" "worker 1 never reached batch $KILL_AT, or was not found"
  elif [ $rc -ne 0 ]; then
    report "$name" FAIL "$kill_log" "exit $rc: $(why "$kill_log")"
  elif [ "$(distinct_hashes "$kill_log")" -ne 1 ] || [ "$(last_value "$kill_log" weights-fnv64)" != "$gpu_hash" ]; then
    report "$name" FAIL "$kill_log" "weights $hashes, the uninterrupted run's $gpu_hash"
  else
    report "$name" PASS "$kill_log" "both workers end on $gpu_hash, the uninterrupted run's; $(grep -m1 'caught up' "$kill_log" | sed 's/.* I //' | cut -c1-160)"
  fi
}

# bench_one NAME GOAL_SYNC GOAL_DEVICE REF_FLAGS DTRAIN_FLAGS: the second epoch's speed (the
# first includes CUDA's and cuDNN's start) of tests/bench/torch_reference.py --device cuda
# against dtrain's, one worker on GPU 0, in dist_device_sync with one server on loopback and
# in device mode; a goal of - reports the ratio only. dtrain's time per phase comes along.
bench_one() {
  local name=$1 goal_sync=$2 goal_device=$3 ref_flags=$4 flags=$5 ref_log="$LOGS/bench-$1-torch.log"
  local dir=/usr/share/datasets/fashion-mnist
  [ ${#data[@]} -eq 2 ] && dir=${data[1]}
  # shellcheck disable=SC2086
  LD_LIBRARY_PATH=$PYTHON_LD_LIBRARY_PATH timeout 300 "$PYTHON" tests/bench/torch_reference.py --device "$REF_DEVICE" \
    --epochs 2 --threads 4 --data "$dir" $ref_flags \
    > "$ref_log" 2>&1
  local ref
  ref=$("$PYTHON" -c 'import json, sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["epoch_samples_per_s"][-1])' \
          "$ref_log" 2>/dev/null)
  if [ -z "$ref" ]; then report "bench $name: PyTorch reference" FAIL "$ref_log" "$(tail -3 "$ref_log" | tr '\n' ' ')"; return; fi
  local mode log speed goal ratio verdict servers
  for mode in dist_device_sync device; do
    log="$LOGS/bench-$name-$mode.log"
    servers=(-s 1)
    goal=$goal_sync
    [ "$mode" = device ] && servers=() && goal=$goal_device
    # shellcheck disable=SC2086
    timeout 300 "$BUILD/bin/dtrain" launch -n 1 "${servers[@]}" --kv-store $mode -- "${DEVICE[@]}" --num-epochs 2 \
      --threads 4 --seed 7 --disp-batches 1000 --num-test-examples 1000 "${data[@]}" $flags > "$log" 2>&1
    speed=$(grep -o 'Epoch\[1\] Job: .*Speed: [0-9.]*' "$log" | grep -o '[0-9.]*$' | tail -1)
    if [ -z "$speed" ]; then
      report "bench $name $mode" FAIL "$log" "no Epoch[1] speed: $(why "$log")"
      continue
    fi
    ratio=$(awk -v a="$speed" -v b="$ref" 'BEGIN { printf "%.3f", a / b }')
    verdict=INFO
    [ "$goal" != - ] && verdict=$(awk -v r="$ratio" -v g="$goal" 'BEGIN { print (r >= g) ? "PASS" : "FAIL" }')
    report "bench $name $mode" "$verdict" "$log" \
      "${ratio}x PyTorch (dtrain $speed samples/s, PyTorch $ref)$([ "$goal" != - ] && echo ", goal ${goal}x"); $(grep 'per step' "$log" | tail -1 | sed 's/.* I //')"
  done
}

stage_bench() {
  local b
  for b in ${GPU_VERIFY_BENCH:-resnet lenet mlp}; do "bench_$b"; done
}
bench_resnet() {
  bench_one resnet20-b128 0.9 0.95 "--network resnet --num-layers 20 --batch 128" \
    "--network resnet --num-layers 20 --batch-size 128"
}
bench_lenet() {
  bench_one lenet-b256 - - "--network lenet --lenet-layout dtrain --batch 256 ${GPU_VERIFY_BENCH_EXAMPLES:+--num-examples $GPU_VERIFY_BENCH_EXAMPLES}" \
    "--network lenet --batch-size 256 ${GPU_VERIFY_BENCH_EXAMPLES:+--num-examples $GPU_VERIFY_BENCH_EXAMPLES}"
}
bench_mlp() {
  bench_one mlp2048-b128 - - "--network mlp --hidden 2048,2048 --batch 128 --num-examples 20000" \
    "--network mlp --hidden 2048,2048 --batch-size 128 --num-examples 20000"
}

case "$STEP" in
  fetch) fetch ;;
  stages)
    rm -rf "$LOGS" && mkdir -p "$LOGS"
    [ -x "$BUILD/bin/dtrain" ] || { say "gpu-verify: no $BUILD/bin/dtrain: build first, or set GPU_BUILD_DIR"; exit 1; }
    run_stages "$SECONDS"
    exit "$FIRST_FAIL"
    ;;
  run) run; exit "$FIRST_FAIL" ;;
  *) say "usage: bash deploy/gpu-verify.sh fetch|run|stages [DIR]"; exit 2 ;;
esac
