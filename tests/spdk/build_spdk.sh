#!/usr/bin/env bash
# Builds SPDK 26.05 (../shared/spdk: the tag's sources, its pinned
# isa-l_crypto and debian12.patch, as that directory's README.md describes)
# into WORK_DIR/spdk-26.05, for spdk_test.sh (issue 48; docs/MIDDLEWARE.md,
# "NVMe-oF (SPDK)"). Cached: returns at once when the applications the test
# runs exist and the tarball and patch are the ones they were built from.
#
#   build_spdk.sh SRC WORK_DIR
#
# An empty SRC means $URNIC_SPDK_SRC, else the first of ../shared/spdk (next
# to the source tree) and /work/shared/spdk that exists.
#
# Exits 77 when the sources or Debian's packages for them are missing, 1
# when the build fails (the log: WORK_DIR/build.log).
set -uo pipefail
src=${1-}; work=${2:?work}
skip() { printf 'SKIP: %s\n' "$*"; exit 77; }
[[ -n $src ]] || src=${URNIC_SPDK_SRC:-}
if [[ -z $src ]]; then
  for c in "$(dirname "$0")/../../../shared/spdk" /work/shared/spdk; do
    [[ -d $c ]] && { src=$c; break; }
  done
fi
src=${src:-/nonexistent}
tarball=$src/spdk-26.05.tar.gz; crypto=$src/isa-l_crypto-07d0b25.tar.gz; patch=$src/debian12.patch
for f in "$tarball" "$crypto" "$patch"; do
  [[ -f $f ]] || skip "$f not found (SPDK's sources: set 'meson configure -Dspdk_src=DIR' or URNIC_SPDK_SRC=DIR)"
done
missing=()
for p in libdpdk-dev libisal-dev libibverbs-dev librdmacm-dev libaio-dev libkeyutils-dev libssl-dev \
         uuid-dev libnuma-dev libncurses-dev libjson-c-dev libcunit1-dev nasm libtool \
         python3-pyelftools python3-tabulate python3-jsonschema make; do
  dpkg -s "$p" > /dev/null 2>&1 || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] || skip "the packages to build SPDK are missing: ${missing[*]} (apt-get install ${missing[*]})"

S=$work/spdk-26.05
# Debian's python3 (python3-tabulate, python3-jsonschema): configure and
# the generated headers run `env python3`, which a pyenv in PATH would take.
export PATH=/usr/bin:$PATH
stamp=$(cat "$tarball" "$crypto" "$patch" | sha256sum | cut -c1-16)
apps=("$S/build/bin/nvmf_tgt" "$S/build/bin/spdk_nvme_perf" "$S/build/bin/spdk_nvme_identify" "$S/build/examples/bdevperf")
built=1
for a in "${apps[@]}"; do [[ -x $a ]] || built=0; done
if [[ $built == 1 && -f $work/built.$stamp ]]; then exit 0; fi

t0=$SECONDS
log=$work/build.log
if [[ ! -f $work/unpacked.$stamp ]]; then
  rm -rf "$work" && mkdir -p "$work" || exit 2
  tar -xzf "$tarball" -C "$work" && rmdir "$S/isa-l-crypto" && tar -xzf "$crypto" -C "$S" &&
    patch -d "$S" -p1 < "$patch" > "$log" 2>&1 || { echo "build_spdk: unpacking or patching failed"; exit 1; }
  touch "$work/unpacked.$stamp"
fi
jobs=$(nproc)
if [[ ! -f $S/mk/config.mk.done ]]; then
  (cd "$S" && ./configure --with-dpdk --with-isal --without-crypto --with-rdma --without-vhost --without-virtio \
      --without-fio --without-xnvme --without-vfio-user --without-ocf --without-iscsi-initiator \
      --disable-tests --disable-unit-tests --without-shared --without-fsdev --without-nvme-cuse \
      --without-idxd --without-usdt) >> "$log" 2>&1 || { tail -n 30 "$log"; echo "build_spdk: configure failed (log: $log)"; exit 1; }
  # Debian's libdpdk.pc names IPSec_MB; nothing built here needs it. And
  # isa-l_crypto (configure wants its sources even --without-crypto) serves
  # only accel_sw's AES-XTS, which nothing here uses, and is a third of the
  # build (some 380 objects): both off.
  sed -i -e 's/^CONFIG_IPSEC_MB?=y/CONFIG_IPSEC_MB?=n/' -e 's/^CONFIG_ISAL_CRYPTO?=y/CONFIG_ISAL_CRYPTO?=n/' \
    "$S/mk/config.mk"
  touch "$S/mk/config.mk.done"
fi
# Only what the test runs, in the top Makefile's order (its `all` builds
# some 60 more applications and examples). The directories are made one by
# one: the top Makefile hands its goal on to every directory it enters, so
# `make lib` there would ask each of lib's Makefiles for a target `lib`.
make_dirs() {
  make -C "$S" build_dir include/spdk/config.h include/spdk/version.h || return 1
  local d
  # `all` named: include/'s first rule is the headers' (un)install, and
  # module/'s comes from mk/spdk.modules.mk.
  for d in include lib module shared_lib app/nvmf_tgt app/spdk_nvme_perf app/spdk_nvme_identify \
           examples/bdev/bdevperf; do
    make -C "$S/$d" -j "$jobs" all || return 1
  done
}
make_dirs >> "$log" 2>&1 || { tail -n 30 "$log"; echo "build_spdk: make failed (log: $log)"; exit 1; }
for a in "${apps[@]}"; do [[ -x $a ]] || { echo "build_spdk: $a was not built (log: $log)"; exit 1; }; done
touch "$work/built.$stamp"
echo "build_spdk: built SPDK in $((SECONDS - t0)) s"
