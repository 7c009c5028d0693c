#!/usr/bin/env bash
# dockerfile (issue 52): the top-level Dockerfile, unmodified, built and run
# with Debian 12's container tools (buildah 1.28, podman 4.3), without a
# container registry. Steps:
#  1. the base images it names, debian:12 and debian:12-slim, made here: a
#     minbase bookworm from Debian's mirror (mmdebstrap, kept as a tar file in
#     BUILD_DIR/docker/ so a later run only imports it), imported as
#     docker.io/library/debian:12; the slim one is the same tree with what
#     Docker's debian:12-slim drops (/usr/share/{doc,man,info,locale,...} but
#     the copyright files, and dpkg's path-exclude file that keeps them out);
#  2. `buildah bud` of the Dockerfile (the build stage installs its packages
#     from the mirror and builds the .deb with tools/package-deb.sh; the final
#     stage installs it into debian:12-slim), never pulling;
#  3. the image run as the Dockerfile's header comment shows, each `docker
#     run --rm urnic ...` line of it taken from the Dockerfile and run with
#     `podman run --rm`, without a network (only lo): `urnic doctor` (the
#     image's CMD), `urnic run -- ibv_devinfo`, the ibv_rc_pingpong pair
#     after eval "$(urnic env)"; each checked by its exit status and output,
#     and that the image runs as the unprivileged user urnic (uid 1000);
#  4. everything removed: containers, images, the storage (a temporary
#     directory), podman's and buildah's configuration (also temporary).
# What works on this project's VM (a Firecracker VM whose root lacks
# CAP_SYS_RESOURCE, cgroups v1 with an empty cgroup2 beside them, "hybrid"):
#  - storage driver overlay (the kernel's; no vfs or fuse-overlayfs needed);
#  - the build: --isolation chroot (no OCI runtime). With the default
#    isolation (oci) a RUN fails: crun refuses hybrid cgroups ("cgroups in
#    hybrid mode not supported, drop all controllers from cgroupv2");
#  - the run: podman with runc, not crun (same error), and explicit, lower
#    --ulimit nofile/nproc: podman's defaults for root (1048576 open files,
#    4194304 processes) are above this VM's hard limits, and raising a hard
#    limit needs CAP_SYS_RESOURCE ("setrlimit `RLIMIT_NOFILE`: Operation not
#    permitted"; runc: "error setting rlimit type 6"). --cgroups=disabled is
#    refused by runc and does not help crun;
#  - networks: the build uses the host's (apt reaches Debian's mirror), the
#    runs none (--network none: only lo, no netavark bridge or firewall
#    rules on the host), which is all the udp link on 127.0.0.1 needs.
# Slow: the build stage compiles urnic (every installed target) with no
# ccache. Its own suite ('docker'), out of the default run: docs/CI.md has
# its time. Skipped (77) without root, podman, buildah, mmdebstrap or the
# mirror.
#
# usage: dockerfile_test.sh SOURCE_ROOT BUILD_DIR
# URNIC_DEBIAN_MIRROR: the mirror (default http://deb.debian.org/debian).
set -uo pipefail
root=$1
build=$2

# shellcheck source=tests/package/chroot_lib.sh
source "$(dirname "$0")/chroot_lib.sh"
chroot_require
for tool in podman buildah runc; do
  command -v "$tool" > /dev/null || skip "needs $tool (apt-get install podman buildah runc mmdebstrap)"
done
cache=$build/docker
mkdir -p "$cache"
rootfs=$cache/rootfs-bookworm.tar
[[ -s $rootfs ]] || mirror_or_skip bookworm

tmp=$(mktemp -d /tmp/urnic-dockerfile.XXXXXX)
# Podman's and buildah's state and configuration, all in $tmp: nothing in
# /var/lib/containers or /run/containers, no registry to search.
cat > "$tmp/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$tmp/storage"
runroot = "$tmp/run"
EOF
cat > "$tmp/containers.conf" <<EOF
[engine]
runtime = "runc"
tmp_dir = "$tmp/libpod"
events_logger = "none"
[network]
network_config_dir = "$tmp/networks"
EOF
cat > "$tmp/registries.conf" <<EOF
unqualified-search-registries = []
short-name-mode = "disabled"
EOF
export CONTAINERS_STORAGE_CONF=$tmp/storage.conf CONTAINERS_CONF=$tmp/containers.conf
export CONTAINERS_REGISTRIES_CONF=$tmp/registries.conf BUILDAH_ISOLATION=chroot
unset LD_LIBRARY_PATH LD_PRELOAD URNIC_DAEMON
# Two directories podman 4.3 and buildah 1.28 make whatever the configuration
# says (the blob-info cache; netavark's run directory, even with no network):
# removed at the end if this run made them.
made=()
for d in /var/lib/containers /run/containers; do [[ -e $d ]] || made+=("$d"); done
cleanup() {
  podman rm --all --force > /dev/null 2>&1
  buildah rm --all > /dev/null 2>&1
  podman rmi --all --force > /dev/null 2>&1
  ((${#made[@]} > 0)) && rm -rf "${made[@]}"
  # What is still mounted below (overlay layers of a container that did
  # not stop), then the storage.
  findmnt -rn -o TARGET | grep "^$tmp/" | sort -r | while read -r m; do umount -l "$m"; done
  rm -rf "$tmp"
}
trap cleanup EXIT
t0=$SECONDS

# 1. The base images.
t1=$SECONDS
if [[ ! -s $rootfs ]]; then
  mmdebstrap --variant=minbase --mode=root --format=tar --quiet bookworm "$rootfs.part" "$mirror" \
    > "$tmp/mmdebstrap.log" 2>&1 && mv "$rootfs.part" "$rootfs"
fi
if [[ ! -s $rootfs ]]; then
  fail "mmdebstrap bookworm: $(grep -iE 'error|^E:' "$tmp/mmdebstrap.log" | head -3 | tr '\n' ' ')"
  finish
  exit 1
fi
slim=$tmp/slim
mkdir -p "$slim"
tar -C "$slim" -xf "$rootfs"
# As Docker's debian:12-slim (debuerreotype --slimify): no documentation
# but the copyright files, and dpkg told to keep it out.
cat > "$slim/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
EOF
find "$slim/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$slim/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$slim"/usr/share/{man,groff,info,locale,lintian,linda}/*
tar -C "$slim" -cf "$tmp/slim.tar" . && rm -rf "$slim"
if podman import --change 'CMD ["bash"]' "$rootfs" docker.io/library/debian:12 > "$tmp/import.log" 2>&1 &&
   podman import --change 'CMD ["bash"]' "$tmp/slim.tar" docker.io/library/debian:12-slim >> "$tmp/import.log" 2>&1; then
  pass "base images debian:12 and debian:12-slim from a minbase bookworm: $(podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | tr '\n' ' ')($((SECONDS - t1)) s)"
else
  fail "podman import: $(tail -3 "$tmp/import.log" | tr '\n' ' ')"
fi
rm -f "$tmp/slim.tar"

# 2. The build, from the source tree as the context (.dockerignore leaves out
# build trees and .git).
t1=$SECONDS
image=localhost/urnic-dockerfile-test:latest
timeout 5400 buildah bud --pull=never --isolation chroot --network host --layers=false \
  -f "$root/Dockerfile" -t "$image" "$root" > "$tmp/build.log" 2>&1
brc=$?
build_s=$((SECONDS - t1))
if [[ $brc -eq 0 ]]; then
  pass "buildah bud (isolation chroot, storage overlay): $(podman images --format '{{.Size}}' "$image"), ${build_s} s"
else
  fail "buildah bud (exit $brc, ${build_s} s): $(grep -E 'error|Error|^E:' "$tmp/build.log" | head -3 | tr '\n' ' ')"
  echo "--- build log (tail)"; tail -30 "$tmp/build.log"
  finish
  exit 1
fi
grep -E 'urnic package: wrote' "$tmp/build.log" | sed 's/^/     /'

# 3. The header's `docker run --rm urnic ...` lines, each with podman.
prun() {  # prun NAME REGEX ARGS...: podman run --rm IMAGE ARGS..., exit 0 and a line matching
  local name=$1 re=$2; shift 2
  local t=$SECONDS out rc
  out=$(timeout 300 podman run --rm --network none --ulimit "nofile=$nofile:$nofile" --ulimit nproc=8192:8192 \
          "$image" "$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" | sed 's/^/     | /' | head -60
  if [[ $rc -eq 0 ]] && grep -qE "$re" <<< "$out"; then
    pass "$name: exit 0, $(grep -E "$re" <<< "$out" | head -1 | tr -s ' \t' ' ' | cut -c1-100) ($((SECONDS - t)) s)"
  else
    fail "$name: exit $rc, $(if grep -qE "$re" <<< "$out"; then echo "matches"; else echo "no line matching /$re/"; fi)"
  fi
}
nofile=$(ulimit -Hn)
((nofile > 65536)) && nofile=65536
# shellcheck disable=SC2016  # expanded in the container
prun "the image's user" '^urnic 1000$' sh -c 'echo "$(id -un) $(id -u)"'
mapfile -t runs < <(sed -n 's/^#   docker run --rm urnic\( \|$\)//p' "$root/Dockerfile" | sed 's/[[:space:]]*#.*$//')
[[ ${#runs[@]} -ge 3 ]] || fail "the Dockerfile's header has ${#runs[@]} 'docker run --rm urnic' lines, not 3"
for r in "${runs[@]}"; do
  eval "set -- $r"
  case "$*" in
    '') prun "docker run --rm urnic (CMD: urnic doctor)" '^urnic doctor: ready' ;;
    *ibv_rc_pingpong*) prun "docker run --rm urnic $r" '[0-9]+ iters in' "$@" ;;
    *ibv_devinfo*) prun "docker run --rm urnic $r" 'hca_id:[[:space:]]+urnic0' "$@" ;;
    *) prun "docker run --rm urnic $r" '.' "$@" ;;
  esac
done

echo "whole test: $((SECONDS - t0)) s (build ${build_s} s)"
if ((fails > 0)); then
  echo "--- build log (tail)"; tail -15 "$tmp/build.log"
fi
finish
