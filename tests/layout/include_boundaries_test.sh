#!/usr/bin/env bash
# Fails when a file under services/X/ includes a header under services/Y/ (X != Y): a
# service uses another's internals only through common/. The `dtrain` front end
# (services/launcher) may include the one public header of each subcommand it hosts.
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
# service/header pairs the launcher may use: `dtrain predict`.
allowed=("launcher:services/predict/predict_job.h")

bad=0
checked=0
while IFS= read -r -d '' file; do
  checked=$((checked + 1))
  rel="${file#"$root"/}"
  own="$(cut -d/ -f2 <<<"$rel")"
  while IFS= read -r line; do
    header="$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$line")"
    other="$(cut -d/ -f2 <<<"$header")"
    [ "$other" = "$own" ] && continue
    ok=0
    for a in "${allowed[@]}"; do
      [ "$a" = "$own:$header" ] && ok=1
    done
    if [ "$ok" -eq 0 ]; then
      echo "$rel includes $header: services/$own must not use services/$other's internals (move what both need to common/)"
      bad=$((bad + 1))
    fi
  done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"services/' "$file" || true)
done < <(find "$root/services" -type f \( -name '*.h' -o -name '*.cc' \) -print0)

if [ "$checked" -eq 0 ]; then
  echo "no sources found under $root/services"
  exit 1
fi
if [ "$bad" -ne 0 ]; then
  echo "$bad include(s) across service boundaries"
  exit 1
fi
echo "include boundaries: $checked files under services/, none includes another service's headers"
