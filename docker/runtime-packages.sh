#!/bin/sh
# runtime-packages.sh BINARY...: the Debian packages owning the shared libraries that the
# binaries link directly (their DT_NEEDED entries, found where ldd finds them), one per
# line, sorted; those packages' own dependencies bring the rest. Fails if a library is
# missing or owned by no package. docker/Dockerfile uses it to install runtime libraries
# only, so a new dependency of the code cannot be forgotten in the image.
set -eu
out=""
for bin in "$@"; do
  [ -f "$bin" ] || { echo "runtime-packages.sh: $bin: no such file" >&2; exit 1; }
  needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  for name in $needed; do
    path=$(ldd "$bin" | awk -v n="$name" '$1 == n { print $3 }')
    case "$path" in
      /*) ;;
      *) echo "runtime-packages.sh: $bin needs $name, which is not found" >&2; exit 1 ;;
    esac
    # Merged /usr: a library found as /lib/... may be registered as /usr/lib/... or the reverse.
    owner=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(realpath "$path")" 2>/dev/null ||
            dpkg -S "/usr$path" 2>/dev/null || dpkg -S "${path#/usr}" 2>/dev/null || true)
    [ -n "$owner" ] || { echo "runtime-packages.sh: no package owns $path" >&2; exit 1; }
    out="$out${owner%%:*}
"
  done
done
printf "%b" "$out" | sort -u
