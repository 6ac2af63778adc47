#!/usr/bin/env bash
# Fails when a file of the repository refers to the directory kept beside its checkout
# on the development machines: whoever clones dtrain has only the repository, so every
# script, benchmark reference and test input must live in it. Documentation may say
# where a figure came from, but no command it shows may need such a path either.
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root"
# The repository's own files: git's list where there is one (a clean clone in CI), else
# every file but build outputs.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -d '' files < <(git ls-files -z --cached --others --exclude-standard)
else
  mapfile -d '' files < <(find . -type f -not -path './build*' -not -path './.git/*' -printf '%P\0')
fi
# The directory's name is put together here so that this file does not itself name it.
beside="sha""red"
pattern="(\\.\\./${beside}/|/work/${beside})"
bad=0
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  if grep -nE "$pattern" "$f" >/dev/null 2>&1; then
    grep -nE "$pattern" "$f" | sed "s#^#$f:#"
    bad=$((bad + 1))
  fi
done
if [ "$bad" -gt 0 ]; then
  echo "self-contained: $bad file(s) above refer to a directory outside the repository; put what they need in it"
  exit 1
fi
echo "self-contained: ${#files[@]} files, none refers outside the repository"
