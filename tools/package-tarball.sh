#!/usr/bin/env bash
# tools/urnic package --tarball: a relocatable release tarball (issue 52),
# urnic-<version>-x86_64-linux.tar.gz, that runs on any x86_64 Linux with
# glibc >= 2.31 (Debian 11 and later, Ubuntu 20.04 and later), unpacked
# anywhere, without installation and without root:
#
#   tools/urnic package --tarball [--out DIR] [--work DIR] [--sysroot DIR]
#
# What it holds: bin/urnic (the installed command, which finds everything
# relative to itself), sbin/urnicd, lib/urnic/{libibverbs,librdmacm}.so.1 (the
# drop-in libraries), libexec/urnic/{urnic-cli,urnic-sysfs,urnic-conform,
# urnic-conform-agent}, libexec/urnic/view/rdma (sysfs-run's `rdma link
# show`), the man pages, and lib/: every shared library those
# need that is not glibc (fmt, ISA-L, libpcap and libdbus, libnl), found
# through RUNPATH $ORIGIN/... C++'s runtime (libstdc++, libgcc) is linked
# statically into each binary and into the drop-in libraries (whose version
# scripts keep it local). urnicd has no dpdk link (DPDK would be most of the
# tarball and the host's DPDK must match it: use the Debian package or a build
# from source for dpdk links).
#
# libfmt.so.7, carried, needs libstdc++.so.6: the sysroot's (GCC 10's) is
# carried with it, used by nothing else (our binaries and the drop-in
# libraries have their own, statically).
#
# Why a sysroot: a build on Debian 12 takes glibc 2.34-2.36 symbol versions
# (pthread_*@GLIBC_2.34, __libc_start_main@GLIBC_2.34, and GCC 12's libstdc++
# and libgcc_eh need arc4random@GLIBC_2.36 and _dl_find_object@GLIBC_2.35,
# statically linked or not). Debian 11's g++ 10 lacks C++20 parts the tree
# uses (`using enum`), so the build machine's clang compiles against a Debian 11
# (bullseye) root file system made with mmdebstrap (glibc 2.31, GCC 10's
# libstdc++ headers and static library, the libraries of
# tools/tarball/sysroot-packages.txt), with the build machine's rdma-core 44
# headers (the ABI the drop-in libraries implement) and CLI11 (not packaged in
# Debian 11) put into it. The result is checked: no GLIBC_ version above 2.31,
# no GLIBCXX_/CXXABI_ reference, nothing unresolved in the tarball's lib/.
#
# --work DIR (default build-tarball/): the sysroot (made once, about 2 minutes
# and 60 MB from the mirror) and the build. --sysroot DIR: use that sysroot
# instead (the same packages). URNIC_DEBIAN_MIRROR: the mirror. Needs clang,
# mmdebstrap (root, or unprivileged user namespaces) and patchelf.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/build-tarball out=$PWD sysroot=
mirror=${URNIC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) out=$(realpath -m "$2"); shift ;;
    --work) work=$(realpath -m "$2"); shift ;;
    --sysroot) sysroot=$(realpath -m "$2"); shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "urnic package --tarball: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
log() { printf 'urnic package --tarball: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
unset LD_LIBRARY_PATH LD_PRELOAD
for tool in clang++ patchelf objdump readelf; do
  command -v "$tool" > /dev/null || die "needs $tool (apt-get install clang patchelf binutils)"
done
readonly glibc_max=2.31  # Debian 11, Ubuntu 20.04
mkdir -p "$work"

# The sysroot: Debian 11 with the build machine's rdma-core and CLI11 headers.
if [[ -z $sysroot ]]; then
  sysroot=$work/sysroot-bullseye
  if [[ ! -f $sysroot/.urnic-sysroot ]]; then
    command -v mmdebstrap > /dev/null || die "needs mmdebstrap to make the Debian 11 sysroot (apt-get install mmdebstrap), or --sysroot DIR"
    packages=$(sed 's/#.*//' "$root/tools/tarball/sysroot-packages.txt" | xargs | tr ' ' ',')
    log "making the Debian 11 sysroot $sysroot (mmdebstrap, $mirror)"
    rm -rf "$sysroot"
    mmdebstrap --variant=minbase --mode=auto --quiet --include="$packages" \
      bullseye "$sysroot" "$mirror" >&2 || die "mmdebstrap bullseye failed"
  fi
fi
[[ -f $sysroot/usr/include/c++/10/vector ]] || die "$sysroot is not a Debian 11 sysroot with libstdc++-10-dev"
if [[ ! -f $sysroot/.urnic-sysroot ]]; then
  # rdma-core's headers as the build machine has them (44 on Debian 12): the
  # ABI the drop-in libraries implement, not Debian 11's 33. The kernel's
  # UAPI headers too (6.1 on Debian 12, not 5.10: the drop-in library uses
  # UFFD_FEATURE_WP_HUGETLBFS_SHMEM, and checks at run time what the kernel
  # has). CLI11 is header-only and not in Debian 11.
  for pkg in libibverbs-dev librdmacm-dev linux-libc-dev libcli11-dev; do
    dpkg -L "$pkg" > /dev/null 2>&1 || die "needs $pkg on the build machine"
    dpkg -L "$pkg" | while read -r f; do
      if [[ -f $f && ( $f == /usr/include/* || $f == */pkgconfig/CLI11.pc ) ]]; then
        install -D -p -m 0644 "$f" "$sysroot$f"  # -p: the package's times, not now
      fi
    done
  done
  # Absolute links (/lib64/ld-linux-x86-64.so.2 -> /lib/...) would name the
  # build machine's files: make them relative, inside the sysroot.
  find "$sysroot/lib" "$sysroot/lib64" "$sysroot/usr/lib" -type l -lname '/*' 2>/dev/null | while read -r l; do
    ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$sysroot$(readlink "$l")")" "$l"
  done
  dpkg-query -W -f='${Version}\n' libibverbs-dev > "$sysroot/.urnic-sysroot"
fi

# The build: clang against the sysroot, as a cross build (meson's sys_root
# and pkg-config paths point into the sysroot; its programs run here).
build=$work/build
multiarch=x86_64-linux-gnu
cross=$work/bullseye-sysroot.ini
cat > "$cross.new" <<CROSS
# Generated by tools/package-tarball.sh: clang against the Debian 11 sysroot.
[binaries]
c = 'clang'
cpp = 'clang++'
ar = 'ar'
strip = 'strip'
pkgconfig = 'pkg-config'  # meson 1.0's name of the key

[properties]
sys_root = '$sysroot'
pkg_config_libdir = ['$sysroot/usr/lib/$multiarch/pkgconfig', '$sysroot/usr/lib/pkgconfig', '$sysroot/usr/share/pkgconfig']
# Boost is found without pkg-config: never the build machine's /usr/include.
boost_includedir = '$sysroot/usr/include'
boost_librarydir = '$sysroot/usr/lib/$multiarch'
needs_exe_wrapper = false

[built-in options]
c_args = ['--sysroot=$sysroot']
cpp_args = ['--sysroot=$sysroot']
c_link_args = ['--sysroot=$sysroot', '-static-libgcc']
cpp_link_args = ['--sysroot=$sysroot', '-static-libstdc++', '-static-libgcc']

[host_machine]
system = 'linux'
cpu_family = 'x86_64'
cpu = 'x86_64'
endian = 'little'
CROSS
if ! cmp -s "$cross.new" "$cross"; then mv "$cross.new" "$cross"; rm -rf "$build"; else rm "$cross.new"; fi
if [[ ! -f $build/build.ninja ]]; then
  log "setting up $build"
  # The prefix is a placeholder: everything installed finds the rest relative to itself.
  meson setup "$build" "$root" --cross-file "$cross" --prefix=/opt/urnic --libdir=lib \
    --buildtype=release -Ddpdk=disabled > "$work/setup.log" || { tail -20 "$work/setup.log" >&2; die "meson setup failed"; }
fi
info=$(meson introspect "$build" --targets --projectinfo)
version=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["projectinfo"]["version"])' <<< "$info")
mapfile -t outputs < <(python3 -c '
import json, os, sys
for t in json.load(sys.stdin)["targets"]:
    if t["installed"]:
        for f in t["filename"]:
            print(os.path.relpath(f, sys.argv[1]))' "$build" <<< "$info")
# The build runs urnicd once (urnicd(8)'s keys: --print-config-schema): it
# finds the sysroot's libraries that the build machine has no version of at
# all (libfmt.so.7) through links in host-run-libs/; nothing the build
# machine has (its glibc, libstdc++, what ninja and python load) is shadowed.
hostrun=$work/host-run-libs
rm -rf "$hostrun" && mkdir -p "$hostrun"
host_libs=$(ldconfig -p | awk '{print $1}')
for f in "$sysroot/usr/lib/$multiarch"/lib*.so.[0-9]*; do
  n=$(basename "$f")
  [[ $n =~ ^lib.*\.so\.[0-9]+$ ]] || continue  # SONAMEs only
  grep -qxF "$n" <<< "$host_libs" || ln -s "$f" "$hostrun/$n"
done
LD_LIBRARY_PATH=$hostrun ninja -C "$build" "${outputs[@]}" >&2

name=urnic-$version
stage=$work/stage
rm -rf "$stage"
meson install -C "$build" --no-rebuild --strip --destdir "$stage" > /dev/null
tree=$stage/$name
mv "$stage/opt/urnic" "$tree"
rmdir "$stage/opt"
# What names the placeholder prefix or serves only an installation: the
# systemd units (absolute paths), pkg-config, the development links.
rm -rf "$tree/lib/systemd" "$tree/lib/pkgconfig" "$tree/share/bash-completion"
rm -f "$tree"/lib/urnic/lib*.so

# Carry every shared library that is not glibc in lib/, each found through
# RUNPATH: $ORIGIN/../lib from sbin/, $ORIGIN/../../lib from libexec/urnic/,
# $ORIGIN among themselves (RUNPATH does not reach a library's own needs).
is_glibc() {
  case $1 in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|libutil.so.*|libanl.so.*|ld-linux-x86-64.so.*) return 0 ;;
  esac
  return 1
}
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
find_in_sysroot() {
  local d
  for d in "lib/$multiarch" "usr/lib/$multiarch" lib usr/lib; do
    [[ -e $sysroot/$d/$1 ]] && { realpath "$sysroot/$d/$1"; return 0; }
  done
  return 1
}
mapfile -t elves < <(find "$tree" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
queue=("${elves[@]}")
while [[ ${#queue[@]} -gt 0 ]]; do
  f=${queue[0]}; queue=("${queue[@]:1}")
  for lib in $(needed "$f"); do
    is_glibc "$lib" && continue
    [[ -e $tree/lib/$lib || -e $tree/lib/urnic/$lib ]] && continue
    [[ $lib == libibverbs.so.1 || $lib == librdmacm.so.1 ]] && continue  # urnic's own, or the host's (the agent)
    src=$(find_in_sysroot "$lib") || die "$(basename "$f") needs $lib, which the sysroot lacks"
    install -m 0644 "$src" "$tree/lib/$lib"
    strip --strip-unneeded "$tree/lib/$lib"
    patchelf --set-rpath '$ORIGIN' "$tree/lib/$lib"
    queue+=("$tree/lib/$lib")
  done
done
for f in "$tree"/sbin/* "$tree"/libexec/urnic/*; do
  [[ $(basename "$f") == urnic-conform-agent ]] && continue
  if ! { [[ -f $f ]] && head -c4 "$f" | grep -q ELF; }; then continue; fi  # libexec/urnic/view/: scripts
  rel=$(realpath --relative-to="$(dirname "$f")" "$tree/lib")
  old=$(patchelf --print-rpath "$f")
  new='$ORIGIN/'$rel
  # urnic-sysfs keeps its way to urnic's libibverbs.so.1 (lib/urnic).
  [[ -n $old ]] && new=$old:$new
  patchelf --set-rpath "$new" "$f"
done

# The promise, checked: glibc <= 2.31, no C++ runtime needed from the host,
# every NEEDED found in the tarball or glibc.
bad=0
for f in $(find "$tree" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;); do
  top=$(objdump -T "$f" | grep -oE 'GLIBC_2\.[0-9]+' | sort -t. -k2,2n -u | tail -1)
  if [[ -n $top ]] && [[ $(printf '%s\n%s\n' "${top#GLIBC_}" "$glibc_max" | sort -V | tail -1) != "$glibc_max" ]]; then
    log "${f#"$tree"/} needs $top (> $glibc_max): $(objdump -T "$f" | grep -E "GLIBC_${top#GLIBC_}\b" | awk '{print $NF}' | xargs)"
    bad=1
  fi
  # Our own binaries link it statically; a carried library (libfmt.so.7)
  # may need it, and then it is carried too (the sysroot's, GCC 10's).
  if objdump -T "$f" | grep -qE 'GLIBCXX_|CXXABI_' && [[ ! -e $tree/lib/libstdc++.so.6 ]]; then
    log "${f#"$tree"/} needs the host's libstdc++"; bad=1
  fi
  for lib in $(needed "$f"); do
    is_glibc "$lib" || [[ -e $tree/lib/$lib || -e $tree/lib/urnic/$lib ]] ||
      [[ $(basename "$f") == urnic-conform-agent ]] || { log "${f#"$tree"/} needs $lib, not carried"; bad=1; }
  done
done
((bad == 0)) || die "the tarball would not run on glibc $glibc_max"

mkdir -p "$out"
tarball=$out/$name-x86_64-linux.tar.gz
tar -C "$stage" --owner=0 --group=0 --numeric-owner --sort=name \
  --mtime="@$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)" -cf - "$name" | gzip -9n > "$tarball"
log "wrote $tarball ($(du -k "$tarball" | cut -f1) KiB; $(du -sk "$tree" | cut -f1) KiB unpacked)"
echo "$tarball"
