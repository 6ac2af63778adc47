#!/usr/bin/env bash
# The boundary check must catch a planted cross-service include (so that its pass on
# the real tree means something).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/services/server" "$tmp/services/worker"
printf '#pragma once\n' > "$tmp/services/worker/trainer.h"
printf '#include "services/server/ps_service.h"\n#include "services/worker/trainer.h"\n' > "$tmp/services/server/ps_service.cc"
printf '#pragma once\n' > "$tmp/services/server/ps_service.h"
if out="$(bash "$here/include_boundaries_test.sh" "$tmp")"; then
  echo "the check passed a tree where services/server includes services/worker: $out"
  exit 1
fi
grep -q "services/server/ps_service.cc includes services/worker/trainer.h" <<<"$out" || {
  echo "the check failed without naming the include: $out"
  exit 1
}
echo "the check refuses a planted cross-service include"
