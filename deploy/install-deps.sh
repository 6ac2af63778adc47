#!/usr/bin/env bash
# Installs what dtrain needs from Debian's packages.
#   install-deps.sh          everything: build, train, serve, and every test (deploy/test.sh)
#   install-deps.sh --run    what the main job needs: build the binaries, train, serve and
#                            predict (deploy/quickstart.sh); the tests' tools stay out
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
case "${1:-}" in
  "") only_run=0 ;;
  --run) only_run=1 ;;
  *) echo "install-deps: unknown argument '$1' (use no argument, or --run)" >&2; exit 2 ;;
esac
RUN_PKGS=(
  build-essential cmake ninja-build ccache pkg-config
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libabsl-dev
  libtorch-dev prometheus-cpp-dev nlohmann-json3-dev zlib1g-dev
  # Debian's libtorch multiplies matrices through libblas.so.3, the reference (netlib) BLAS
  # unless an optimised one takes over the alternative: OpenBLAS makes LeNet's steps about
  # 3x faster (the PyTorch reference's too: same library). The OpenMP build: it takes its
  # thread count from OpenMP, which LibTorch sets (--threads), and concurrent calls from
  # several threads (dtrain-infer's forwards) are safe; the serial build gave differing
  # answers under concurrent forwards, and the pthread build starts its pool before main.
  libopenblas0-openmp
  dataset-fashion-mnist
  libssl-dev openssl   # TLS: certificates (dtrain certs, launch --tls) and deploy/make-certs.sh
  libcairo2-dev fonts-dejavu-core   # `dtrain predict`: PNG in/out, the grid picture and its captions
)
TEST_PKGS=(
  libgtest-dev
  clang-format   # tests/layout: the C++ files as .clang-format says (Debian bookworm: 14)
  python3-torch   # the reference for benchmarks (/usr/bin/python3)
  clang libclang-rt-14-dev   # tests/fuzz: libFuzzer and the sanitizers (a clang build of its own)
  prometheus gnuplot-nox   # tests/integration/metrics (a real Prometheus), `dtrain plot`
  # tests/k8s: the chart renderer (Go, GOPATH mode), the schema validation (node; npm comes
  # with it on this machine kind, else: apt-get install npm), the netns test, the image test
  golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev
  golang-github-xeipuuv-gojsonschema-dev nodejs iproute2 util-linux
  # tests/container, docker/build-image.sh: the image built by buildah from a base image
  # made locally (mmdebstrap), its containers run by podman with runc (docs/containers.md)
  buildah podman runc mmdebstrap
)
# The OpenMP build as libblas.so.3/liblapack.so.3 even where another OpenBLAS build, of
# higher priority, is installed too (see above).
prefer_openmp_blas() {
  local arch; arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
  local lib
  for lib in libblas.so.3 liblapack.so.3; do
    local want="/usr/lib/$arch/openblas-openmp/$lib"
    [ -e "$want" ] || continue
    if [ "$(readlink -f "/usr/lib/$arch/$lib")" != "$(readlink -f "$want")" ]; then
      $SUDO update-alternatives --set "$lib-$arch" "$want"
    fi
  done
}
PKGS=("${RUN_PKGS[@]}")
[ "$only_run" -eq 1 ] || PKGS+=("${TEST_PKGS[@]}")
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  prefer_openmp_blas
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
prefer_openmp_blas
