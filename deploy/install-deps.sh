#!/usr/bin/env bash
# Installs everything dtrain needs to build, test and train, from Debian's packages.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PKGS=(
  build-essential cmake ninja-build ccache pkg-config
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libabsl-dev
  libtorch-dev prometheus-cpp-dev libgtest-dev nlohmann-json3-dev zlib1g-dev
  dataset-fashion-mnist
  python3-torch   # the reference for benchmarks (/usr/bin/python3)
  libssl-dev openssl   # TLS: certificates (dtrain certs, launch --tls) and deploy/make-certs.sh
  libcairo2-dev fonts-dejavu-core   # `dtrain predict`: PNG in/out, the grid picture and its captions
  clang libclang-rt-14-dev   # tests/fuzz: libFuzzer and the sanitizers (a clang build of its own)
  prometheus gnuplot-nox   # tests/integration/metrics (a real Prometheus), `dtrain plot`
  # tests/k8s: the chart renderer (Go, GOPATH mode), the schema validation (node; npm comes
  # with it on this machine kind, else: apt-get install npm), the netns test, the image test
  golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev
  golang-github-xeipuuv-gojsonschema-dev nodejs iproute2 util-linux debootstrap
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
