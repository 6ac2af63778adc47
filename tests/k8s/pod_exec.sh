#!/usr/bin/env bash
# Runs one container of an emulated pod, as the kubelet would, from the pod plan written by
# k8s-render --plan. Called by netns_test.sh inside the pod's network namespace
# (`ip netns exec`, which also gives this process its own mount namespace and the pod's
# /etc/hosts) and a new UTS namespace:
#
#   pod_exec.sh PLAN POD CONTAINER VOLUMES ROOTS IMAGE_PATH [PROBE]
#
# With PROBE (readiness, liveness): the container's exec probe instead, as the kubelet runs
# it: its command (probe-PROBE.argv), with the container's user, environment and mounts.
#
# The container sees: a root filesystem made of read-only binds of this machine's
# top-level directories (the "image"; read-only when readOnlyRootFilesystem), its volumes
# at their mountPaths (claims shared by all pods, emptyDirs per pod), the pod's hostname,
# exactly the environment and argv the chart gives it, and runAsUser/runAsGroup/fsGroup,
# no new privileges and no capabilities, as the securityContext says.
set -euo pipefail
plan=$1 pod=$2 container=$3 volumes=$4 roots=$5 image_path=$6 probe=${7:-}
c="$plan/pod/$pod/c/$container"
sec() { awk -v k="$1" '$1 == k { print $2 }' "$c/security"; }

hostname "$(awk -v p="$pod" '$1 == p { print $5 }' "$plan/pods")"

root="$roots/$pod-$container${probe:+-probe-$$}"
mkdir -p "$root"
mount -t tmpfs -o mode=0755 "rootfs-$pod" "$root"
ro=$([ "$(sec rorootfs)" = true ] && echo 1 || echo 0)
# Top-level directories holding a deeper mount path (/etc/dtrain/tls) are an overlay on
# this machine's (writes go to a tmpfs), so the path's missing directories are made there
# and not on this machine; the mounts below it in this namespace (the pod's /etc/hosts and
# resolv.conf from `ip netns exec`), which an overlay does not show, are bound on top.
shadow=" $(awk '{ n = split($1, p, "/"); if (n > 2) print p[2] }' "$c/mounts" | sort -u | xargs) "
shadow_dir() { # NAME: the overlay of /NAME at $root/NAME
  local name=$1 upper="$root.shadow-$1" sub
  mkdir -p "$upper" "$root/$name"
  mount -t tmpfs -o mode=0755 "shadow-$name" "$upper"
  mkdir "$upper/u" "$upper/w"
  mount -t overlay "shadow-$name" -o "lowerdir=/$name,upperdir=$upper/u,workdir=$upper/w" "$root/$name" ||
    { echo "pod_exec: cannot overlay /$name (mountPaths below it need overlayfs)" >&2; exit 1; }
  findmnt -rn -o TARGET | grep "^/$name/" | while read -r sub; do
    if [ -d "$sub" ]; then mkdir -p "$root$sub"; else mkdir -p "$(dirname "$root$sub")" && touch "$root$sub"; fi
    mount --bind "$sub" "$root$sub"
    if [ "$ro" = 1 ]; then mount -o remount,bind,ro "$root$sub"; fi
  done
}
for entry in /*; do
  name=${entry#/}
  case "$name" in proc | sys | dev | tmp | lost+found) continue ;; esac
  if [[ "$shadow" == *" $name "* ]] && [ -d "$entry" ] && [ ! -L "$entry" ]; then
    shadow_dir "$name"
    continue
  fi
  if [ -L "$entry" ]; then
    cp -P "$entry" "$root/$name"  # merged /usr: bin -> usr/bin
  elif [ -d "$entry" ]; then
    mkdir "$root/$name"
    mount --rbind "$entry" "$root/$name"
    if [ "$ro" = 1 ]; then mount -o remount,bind,ro "$root/$name"; fi
  fi
done
for d in proc sys dev; do
  mkdir "$root/$d"
  mount --rbind "/$d" "$root/$d"
done

# Volumes at their mount paths. Only top-level paths (/data, /tmp...) can be made on the
# emulated root without touching this machine's directories.
while read -r path kind source mode _rest; do
  [ -n "$path" ] || continue
  if [ "$(dirname "$path")" != / ]; then
    # Under a shadowed directory (above); the directories below it must not be this machine's.
    parent=$(dirname "$path")
    [ ! -e "$parent" ] || [ "$(dirname "$parent")" = / ] ||
      { echo "pod_exec: mountPath $path: $parent exists on this machine; not emulated" >&2; exit 1; }
  fi
  case "$kind" in
    pvc) src="$volumes/pvc/$source" ;;
    emptyDir | secret) src="$volumes/pod/$pod/$source" ;;
  esac
  [ -d "$src" ] || { echo "pod_exec: volume $kind $source: $src missing" >&2; exit 1; }
  mkdir -p "$root$path"
  mount --bind "$src" "$root$path"
  if [ "$mode" = ro ]; then mount -o remount,bind,ro "$root$path"; fi
done < "$c/mounts"

# The test's source and build trees hold the "image's" binaries; keep them visible if they
# live under a directory the pod does not see (/tmp).
IFS=: read -r -a keep_visible <<< "${DTRAIN_K8S_KEEP_VISIBLE:-}"
for keep in "${keep_visible[@]}"; do
  [ -n "$keep" ] || continue
  case "$keep" in
    /tmp | /tmp/*) ;;                      # hidden under the pod's own /tmp: always bind
    *) if [ -e "$root$keep" ]; then continue; fi ;;
  esac
  mkdir -p "$root$keep"
  mount --rbind "$keep" "$root$keep"
done
if [ "$ro" = 1 ]; then
  mount -o remount,ro "$root"
  for name in $shadow; do if mountpoint -q "$root/$name"; then mount -o remount,ro "$root/$name"; fi; done
fi

mapfile -d '' env < "$c/env"
if [ -n "$probe" ]; then
  mapfile -d '' argv < "$c/probe-$probe.argv"
else
  mapfile -d '' argv < "$c/argv"
fi
uid=$(sec uid) gid=$(sec gid) fsgroup=$(sec fsgroup)
priv=()
if [ "$uid" != - ]; then
  groups=${gid/-/$uid}
  if [ "$fsgroup" != - ]; then groups="$groups,$fsgroup"; fi
  priv+=(--reuid="$uid" --regid="${gid/-/$uid}" --groups="$groups")
fi
if [ "$(sec nonewprivs)" = false ]; then priv+=(--no-new-privs); fi
if [ "$(sec dropall)" = true ]; then priv+=(--inh-caps=-all --bounding-set=-all); fi
# The image's PATH and HOME, then the pod's env (which wins), then the argv.
exec chroot "$root" /usr/bin/setpriv "${priv[@]}" \
  /usr/bin/env -i PATH="$image_path" HOME=/ "${env[@]}" "${argv[@]}"
