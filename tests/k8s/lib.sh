# Shared by the tests in tests/k8s (sourced, not run).
#   k8s_init SRC_DIR BUILD_DIR   sets SRC, BUILD, WORK (a temp dir removed on exit), RENDER
#   k8s_build_renderer           builds k8s-render (Go, GOPATH mode, Debian's packages)
#   k8s_chart_copy               the chart as Helm would load it, in $WORK; sets CHART
#   k8s_node_modules             `npm ci` from the lock file into $BUILD (once); sets VALIDATE
set -euo pipefail

k8s_fail() {
  echo "FAIL: $*" >&2
  exit 1
}

k8s_init() {
  SRC=$(cd "$1" && pwd)
  BUILD=$(mkdir -p "$2" && cd "$2" && pwd)
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-k8s.XXXXXX")
  K8S_CLEANUPS=("rm -rf '$WORK'")
  trap 'k8s_run_cleanups' EXIT
  trap 'exit 143' TERM INT
  RENDER="$BUILD/k8s/k8s-render"
}

# Cleanups run in reverse order of registration, each even if an earlier one fails.
k8s_on_exit() { K8S_CLEANUPS=("$1" "${K8S_CLEANUPS[@]}"); }
k8s_run_cleanups() {
  local rc=$? c
  for c in "${K8S_CLEANUPS[@]}"; do eval "$c" || true; done
  return $rc
}

k8s_build_renderer() {
  command -v go >/dev/null || k8s_fail "go is not installed (apt-get install golang-go; see deploy/install-deps.sh)"
  local gopath=/usr/share/gocode
  for p in github.com/Masterminds/sprig sigs.k8s.io/yaml github.com/xeipuuv/gojsonschema; do
    [ -d "$gopath/src/$p" ] || k8s_fail "$gopath/src/$p missing (Debian packages golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev golang-github-xeipuuv-gojsonschema-dev)"
  done
  mkdir -p "$BUILD/k8s"
  # GOPATH mode: Debian installs Go libraries as source under /usr/share/gocode; no module
  # proxy is needed or asked.
  (cd "$SRC/tests/k8s/render" &&
    GO111MODULE=off GOPATH="$gopath" GOFLAGS= GOCACHE="$BUILD/k8s/go-cache" go build -o "$RENDER" .) ||
    k8s_fail "building tests/k8s/render failed"
}

# Helm follows the chart's symbolic link files/dtrain-dashboard.json to
# deploy/grafana/dtrain-dashboard.json. Copy both into $WORK so that the link resolves
# there; while the dashboard has not landed, a placeholder stands in for it (only here).
k8s_chart_copy() {
  mkdir -p "$WORK/repo/helm" "$WORK/repo/deploy/grafana"
  cp -a "$SRC/helm/dtrain" "$WORK/repo/helm/"
  if [ -f "$SRC/deploy/grafana/dtrain-dashboard.json" ]; then
    cp "$SRC/deploy/grafana/dtrain-dashboard.json" "$WORK/repo/deploy/grafana/"
  else
    echo "note: deploy/grafana/dtrain-dashboard.json is not in the tree yet; using a placeholder"
    echo '{"title": "dtrain (placeholder)", "panels": []}' > "$WORK/repo/deploy/grafana/dtrain-dashboard.json"
  fi
  CHART="$WORK/repo/helm/dtrain"
}

k8s_node_modules() {
  command -v node >/dev/null && command -v npm >/dev/null || k8s_fail "node and npm are needed (apt-get install nodejs npm)"
  local dir="$BUILD/k8s/validate"
  mkdir -p "$dir"
  cp "$SRC/tests/k8s/validate/package.json" "$SRC/tests/k8s/validate/package-lock.json" \
    "$SRC/tests/k8s/validate/"*.mjs "$dir/"
  # npm ci again only when the lock file changed; from npm's cache when it has the packages.
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.dtrain-lock" 2>/dev/null; then
    (cd "$dir" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error) ||
      k8s_fail "npm ci in $dir failed"
    cp "$dir/package-lock.json" "$dir/node_modules/.dtrain-lock"
  fi
  VALIDATE="$dir/validate.mjs"
}
