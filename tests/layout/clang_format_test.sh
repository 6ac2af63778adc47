#!/usr/bin/env bash
# Fails when a C++ file of the repository is not formatted as .clang-format says (Google
# style at 120 columns): `clang-format -i FILE` fixes one, and the list below names them.
# Debian bookworm's clang-format (14) is the reference; another version may format some
# constructs differently, so the check runs only with 14 and says so otherwise.
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root"
if ! command -v clang-format >/dev/null; then
  echo "clang-format is not installed (deploy/install-deps.sh installs it)"
  exit 1
fi
version=$(clang-format --version | grep -o 'version [0-9]*' | cut -d' ' -f2)
if [ "$version" != 14 ]; then
  echo "clang-format $version here; the tree is formatted with 14 (Debian bookworm's): not checked"
  exit 0
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cc' '*.h' |
    grep -E '^(common|services|tests|proto)/')
else
  mapfile -t files < <(find common services tests proto -name '*.cc' -o -name '*.h' | sort)
fi
bad=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ ${#bad[@]} -gt 0 ]; then
  printf '%s\n' "${bad[@]}"
  echo "clang-format: ${#bad[@]} of ${#files[@]} files above are not formatted (clang-format -i them)"
  exit 1
fi
echo "clang-format: ${#files[@]} files formatted"
