#!/bin/sh
# runtime-packages.sh DEST BINARY...: what the runtime image needs of the Debian packages
# that own the binaries' shared libraries: the library files themselves, not the packages.
# It copies every shared library the binaries load into DEST/lib, and writes to DEST/share
# the record of where each came from (runtime-packages.txt: file, package, version, for
# whoever audits the image: dpkg in the image does not know these files) and each
# package's copyright file (doc/PACKAGE/copyright, which the libraries' licences ask to
# travel with them).
#
# "Load" is ldd's closure: the binaries' DT_NEEDED entries and the libraries' own,
# recursively, which is what the dynamic loader maps before main. Nothing else is
# dlopen()ed later: a training job, dtrain-infer and `dtrain predict --render` run under
# LD_DEBUG=files load no library beyond this list (oneDNN looks for libJitPI.so, which no
# Debian package has; docker/Dockerfile says more). Each
# library is written under the name the loader asks for, symlinks and Debian's
# alternatives (libblas.so.3, liblapack.so.3) resolved. The dynamic loader itself is left
# out: the runtime image's own is the one that runs.
#
# Fails if a library is not found or belongs to no package. (Installing the owning
# packages instead, as this script's first version had docker/Dockerfile do, also installs
# what libtorch's dependencies bring and dtrain never opens: OpenCV's, GDAL's, FFmpeg's,
# Qt's and Mesa's data, plugins and tools, LLVM for Mesa.)
set -eu
[ $# -ge 2 ] || { echo "usage: runtime-packages.sh DEST BINARY..." >&2; exit 2; }
dest=$1
shift
mkdir -p "$dest/lib" "$dest/share/doc"
list=$(mktemp) owners=$(mktemp)
trap 'rm -f "$list" "$list.u" "$owners"' EXIT
for bin in "$@"; do
  [ -f "$bin" ] || { echo "runtime-packages.sh: $bin: no such file" >&2; exit 1; }
  out=$(ldd "$bin") || { echo "runtime-packages.sh: ldd $bin failed" >&2; exit 1; }
  if echo "$out" | grep -q "not found"; then
    echo "$out" | grep "not found" >&2
    echo "runtime-packages.sh: $bin needs a library that is not found" >&2
    exit 1
  fi
  # "NAME => /PATH (0x...)"; the loader's own line has no "=>".
  echo "$out" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' >> "$list"
done
sort -u -k1,1 "$list" > "$list.u"
mv "$list.u" "$list"
# Which package owns each library: one dpkg -S for all of them (merged /usr: a library
# found as /lib/... may be registered as /usr/lib/..., or under its real path).
while read -r name path; do
  real=$(realpath "$path")
  printf '%s\n' "$path" "$real" "/usr$path" "${path#/usr}" "/usr$real" "${real#/usr}"
done < "$list" | sort -u | xargs dpkg -S 2> /dev/null | sed 's/^\([^:]*\)[^ ]*: /\1 /' > "$owners" || true
while read -r name path; do
  real=$(realpath "$path")
  pkg=""
  for p in "$path" "$real" "/usr$path" "${path#/usr}" "/usr$real" "${real#/usr}"; do
    pkg=$(awk -v p="$p" '$2 == p { print $1; exit }' "$owners")
    [ -z "$pkg" ] || break
  done
  [ -n "$pkg" ] || { echo "runtime-packages.sh: no package owns $path" >&2; exit 1; }
  cp -L "$path" "$dest/lib/$name"
  echo "$name $pkg $(dpkg-query -W -f '${Version}' "$pkg")" >> "$dest/share/runtime-packages.txt"
  if [ ! -e "$dest/share/doc/$pkg/copyright" ] && [ -f "/usr/share/doc/$pkg/copyright" ]; then
    mkdir -p "$dest/share/doc/$pkg"
    cp -L "/usr/share/doc/$pkg/copyright" "$dest/share/doc/$pkg/copyright"
  fi
done < "$list"
echo "runtime-packages.sh: $(ls "$dest/lib" | wc -l) libraries from" \
  "$(cut -d' ' -f2 "$dest/share/runtime-packages.txt" | sort -u | wc -l) packages," \
  "$(du -sm "$dest/lib" | cut -f1) MB"
