#!/usr/bin/env bash
# tools/urnic package: urnic_<version>_<arch>.deb from the tree (issue 22).
#
#   tools/urnic package [--build DIR] [--out DIR]
#
# Builds what `meson install` installs in DIR (default build-pkg/, set up with
# --prefix=/usr --buildtype=release when missing; a given DIR must have prefix
# /usr), installs it into a staging tree with the binaries stripped, declares
# the shared libraries urnicd and the shims link as dependencies
# (dpkg-shlibdeps), and writes the .deb into --out (default: the current
# directory). Needs dpkg-dev (dpkg-shlibdeps) and fakeroot-free dpkg-deb
# (--root-owner-group). The package installs nothing over the system's
# libibverbs/librdmacm and enables no service.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-pkg out=$PWD
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$(realpath -m "$2"); shift ;;
    --out) out=$(realpath -m "$2"); shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "urnic package: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
log() { printf 'urnic package: %s\n' "$*" >&2; }
# Libraries resolve as on the machine the package goes to, not through a
# build tree's shims (meson test, urnic env).
unset LD_LIBRARY_PATH LD_PRELOAD

if [[ ! -f $build/build.ninja ]]; then
  # Debian's hardening flags, as dpkg-buildpackage would pass them.
  log "setting up $build (prefix /usr, release, dpkg-buildflags)"
  export DEB_BUILD_MAINT_OPTIONS=hardening=+all  # also bindnow
  CXXFLAGS="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CXXFLAGS)" \
  LDFLAGS="$(dpkg-buildflags --get LDFLAGS)" \
    meson setup "$build" "$root" --prefix=/usr --buildtype=release >/dev/null
fi
info=$(meson introspect "$build" --buildoptions --projectinfo --targets)
read -r prefix version < <(python3 -c '
import json, sys
d = json.load(sys.stdin)
opts = {o["name"]: o["value"] for o in d["buildoptions"]}
print(opts["prefix"], d["projectinfo"]["version"])' <<< "$info")
if [[ $prefix != /usr ]]; then
  log "$build has prefix $prefix; a Debian package needs /usr (meson configure $build -Dprefix=/usr, or another --build)"
  exit 2
fi
# Build only what is installed (the tests and benchmarks are most of the tree).
mapfile -t outputs < <(python3 -c '
import json, os, sys
build = sys.argv[1]
for t in json.load(sys.stdin)["targets"]:
    if t["installed"]:
        for f in t["filename"]:
            print(os.path.relpath(f, build))' "$build" <<< "$info")
ninja -C "$build" "${outputs[@]}" >&2

arch=$(dpkg --print-architecture)
work=$(mktemp -d "${TMPDIR:-/tmp}/urnic-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/debian/urnic  # where dpkg-shlibdeps expects the package being built
meson install -C "$build" --no-rebuild --strip --destdir "$stage" >/dev/null
# The development symlinks (libibverbs.so) serve no one: programs link the
# system's and load urnic's by SONAME at run time.
rm -f "$stage"/usr/lib/*/urnic/lib*.so
chmod 0644 "$stage"/usr/lib/*/urnic/lib*.so.*.*  # shared libraries are not programs (Debian policy 8.1)

doc=$stage/usr/share/doc/urnic
install -d "$doc"
{
  printf 'urnic (%s) unstable; urgency=medium\n\n' "$version"
  printf '  * Built from the urnic tree at %s.\n\n' "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  printf ' -- %s  %s\n' "${URNIC_MAINTAINER:-urnic maintainers <maintainers@users.noreply.a-seed-af537d4f.example>}" \
    "$(date -R -d "@$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)")"
} | gzip -9n > "$doc/changelog.gz"
cat > "$doc/copyright" <<COPY
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: urnic
Comment: The urnic source tree states no license yet; this package is built
 for use inside the project and its CI until it does.

Files: *
Copyright: 2026 urnic contributors
License: UNSTATED
 The source tree carries no license statement.
COPY
gzip -9n "$stage"/usr/share/man/man*/*.[0-9]

install -d "$stage/DEBIAN"
find "$stage/etc" -type f -printf '/etc/%P\n' > "$stage/DEBIAN/conffiles"

# Shared-library dependencies of every ELF file (the shims' own libibverbs
# is in the package; dpkg-shlibdeps resolves it there).
mkdir -p "$work/debian"
printf 'Source: urnic\n\nPackage: urnic\nArchitecture: any\n' > "$work/debian/control"
mapfile -t elves < <(find "$stage" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
strip --remove-section=.comment --remove-section=.note "${elves[@]}"  # as dh_strip does
depends=$(cd "$work" && dpkg-shlibdeps -O -l"$(echo "$stage"/usr/lib/*/urnic)" "${elves[@]}" 2>"$work/shlibdeps.err" |
          sed -n 's/^shlibs:Depends=//p') || true
sed 's/^/urnic package: /' "$work/shlibdeps.err" >&2
[[ -n $depends ]] || { log "dpkg-shlibdeps found no dependencies"; exit 1; }
(cd "$stage" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\0' |
   LC_ALL=C sort -z | xargs -0 md5sum) > "$stage/DEBIAN/md5sums"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: urnic
Version: $version
Architecture: $arch
Maintainer: ${URNIC_MAINTAINER:-urnic maintainers <maintainers@users.noreply.a-seed-af537d4f.example>}
Installed-Size: $size
Depends: $depends
Recommends: ibverbs-utils, rdmacm-utils, perftest
Suggests: python3-pyverbs, librte-net-af-packet23, librte-net-af-xdp23, librte-net-memif23, librte-net-tap23
Section: net
Priority: optional
Description: software RDMA NIC in user space (RoCE v1/v2, iWARP)
 urnic runs unmodified libibverbs and librdmacm programs (perftest,
 ibverbs-utils, rdmacm-utils, UCX, MPI) on machines without RDMA hardware
 or kernel RDMA modules: a daemon, urnicd, is the NIC, and drop-in
 libibverbs.so.1 and librdmacm.so.1 (and libibumad.so.3, for OpenSM and
 infiniband-diags on its InfiniBand ports), installed apart from the
 system's, reach it. "urnic run -- PROGRAM" or eval "\$(urnic env)" makes programs
 use it; the system's libraries are not replaced.
 .
 Devices run over UDP (unprivileged, the default), AF_PACKET or DPDK.
CONTROL
mkdir -p "$out"
deb=$out/urnic_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
log "wrote $deb ($(du -k "$deb" | cut -f1) KiB)"
echo "$deb"
