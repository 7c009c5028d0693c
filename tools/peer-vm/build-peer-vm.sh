#!/bin/bash
# build-peer-vm.sh - build a tiny Linux VM image (kernel + initramfs) that runs the
# Linux kernel's own Soft-RoCE (rdma_rxe) and soft-iWARP (siw) drivers, for use as an
# interoperability peer.  Debian 12 (bookworm) host, x86_64, root, apt access only.
#
# Usage: build-peer-vm.sh [-f] WORKDIR
#   WORKDIR  everything is created under this folder (downloads, extracted kernel,
#            siw build, initramfs tree, final images in WORKDIR/out/)
#   -f       force rebuild of the initramfs (downloads/extractions are always reused)
# Env:  KPKG=linux-image-6.1.0-56-amd64   pin the kernel package (default: what
#                                          linux-image-amd64 depends on)
#       NO_APT_INSTALL=1                   do not apt-get install missing host tools
#
# Output: WORKDIR/out/vmlinuz, WORKDIR/out/initramfs.cpio.gz, WORKDIR/out/build-info.txt
# Idempotent: every step is skipped when its result already exists.
set -euo pipefail
# The VM's userspace is copied from the host's own packages, following ldd:
# never through a caller's LD_LIBRARY_PATH (meson test sets it to urnic's
# verbs shim), which would copy urnic's libibverbs.so.1 instead of rdma-core's
# and leave the VM's programs unable to load theirs.
unset LD_LIBRARY_PATH LD_PRELOAD

FORCE=0; SELF=$(readlink -f "$0")
if [ "${1:-}" = "-f" ]; then FORCE=1; shift; fi
if [ $# -ne 1 ]; then sed -n '2,15p' "$SELF" | sed 's/^# \{0,1\}//'; exit 2; fi
mkdir -p "$1"; W=$(cd "$1" && pwd)
[ "$(id -u)" = 0 ] || { echo "must run as root" >&2; exit 1; }
T0=$(date +%s.%N)
ts() { printf '[%6.1fs] %s\n' "$(echo "$(date +%s.%N) - $T0" | bc)" "$*"; }
mkdir -p "$W/dl" "$W/out" "$W/tools"
TIMES="$W/out/build-times.txt"; : > "$TIMES"
lap() { echo "$1 $(echo "$(date +%s.%N) - $LAP" | bc)" >> "$TIMES"; LAP=$(date +%s.%N); }
LAP=$(date +%s.%N)

# ---------------------------------------------------------------- 0. host tools
# userspace that goes into the VM is taken from the host's own installed packages
HOSTPKGS="busybox-static cpio gzip xz-utils bc qemu-system-x86 rdma-core ibverbs-utils
  ibverbs-providers rdmacm-utils perftest iproute2 gcc-12 make libelf1 libssl3 tshark python3-scapy"
missing=""
for p in $HOSTPKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  if [ "${NO_APT_INSTALL:-0}" = 1 ]; then echo "missing host packages:$missing" >&2; exit 1; fi
  ts "apt-get install$missing"
  apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
fi
lap host-packages

# ---------------------------------------------------------------- 1. download
if [ -z "${KPKG:-}" ]; then
  KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  if [ -z "$KPKG" ]; then apt-get update -qq; KPKG=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}'); fi
fi
KVER=${KPKG#linux-image-}                          # e.g. 6.1.0-56-amd64
KABI=${KVER%-amd64}                                # e.g. 6.1.0-56
KSER=$(echo "$KVER" | cut -d. -f1,2)               # e.g. 6.1
PKGVER=$(apt-cache policy "$KPKG" | awk '/Candidate:/{print $2}')
ts "kernel package $KPKG version $PKGVER (KVER=$KVER)"
cd "$W/dl"
dl() { # dl PKG [VERSION]  -> apt-get download unless a matching .deb is already here
  local p=$1 v=${2:-}
  compgen -G "${p}_${v:-*}_*.deb" >/dev/null && return 0
  apt-get download "$p${v:+=$v}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
  if ! compgen -G "${p}_${v:-*}_*.deb" >/dev/null; then     # stale lists? refresh once, retry
    apt-get update -qq; apt-get download "$p${v:+=$v}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
  fi
  compgen -G "${p}_${v:-*}_*.deb" >/dev/null || { echo "download of $p${v:+=$v} failed" >&2; exit 1; }
}
dl "$KPKG" "$PKGVER"
dl "linux-headers-$KVER" "$PKGVER"
dl "linux-headers-$KABI-common" "$PKGVER"
dl "linux-kbuild-$KSER"            # any version >= image version is fine
# siw source: prefer the exact matching source version, else the candidate
if ! ls linux-source-"$KSER"_*.deb >/dev/null 2>&1; then
  apt-get download "linux-source-$KSER=$PKGVER" 2>/dev/null || apt-get download "linux-source-$KSER"
fi
dl kmod
ls -la "$W/dl"
lap download

# ---------------------------------------------------------------- 2. extract
KROOT="$W/kernel"; HDR="$W/hdr"
if [ ! -f "$KROOT/boot/vmlinuz-$KVER" ]; then
  ts "extract kernel image"; rm -rf "$KROOT"; mkdir -p "$KROOT"
  dpkg-deb -x "$W"/dl/"${KPKG}"_*.deb "$KROOT"
fi
if [ ! -f "$HDR/.done" ]; then
  ts "extract headers/kbuild/kmod"; rm -rf "$HDR"; mkdir -p "$HDR"
  for d in "$W"/dl/linux-headers-"$KVER"_*.deb "$W"/dl/linux-headers-"$KABI"-common_*.deb \
           "$W"/dl/linux-kbuild-"$KSER"_*.deb "$W"/dl/kmod_*.deb; do dpkg-deb -x "$d" "$HDR"; done
  # the arch Makefile includes the common Makefile by absolute path - point it at our copy
  sed -i "s#^include /usr/src/linux-headers-$KABI-common/Makefile#include $HDR/usr/src/linux-headers-$KABI-common/Makefile#" \
    "$HDR/usr/src/linux-headers-$KVER/Makefile"
  touch "$HDR/.done"
fi
for c in depmod modprobe modinfo; do ln -sf "$HDR/bin/kmod" "$W/tools/$c"; done
DEPMOD="$W/tools/depmod"; MODPROBE="$W/tools/modprobe"
lap extract

# ---------------------------------------------------------------- 3. siw.ko
# Debian's 6.1 kernel has CONFIG_RDMA_SIW unset; build it out of tree from the
# matching linux-source against the matching headers.
MODDIR="$KROOT/lib/modules/$KVER"
if ! "$W/tools/modinfo" -F parm "$MODDIR/extra/siw.ko" 2>/dev/null | grep -q mpa_crc_required; then
  SRCTAR="$W/src/usr/src/linux-source-$KSER.tar.xz"
  if [ ! -f "$SRCTAR" ]; then
    mkdir -p "$W/src"
    dpkg-deb --fsys-tarfile "$W"/dl/linux-source-"$KSER"_*.deb | tar -x -C "$W/src" "./usr/src/linux-source-$KSER.tar.xz"
  fi
  ts "extract siw/rxe sources"
  rm -rf "$W/siw-build" "$W/src/linux-source-$KSER"
  tar -xJf "$SRCTAR" -C "$W/src" "linux-source-$KSER/drivers/infiniband/sw/siw" "linux-source-$KSER/drivers/infiniband/sw/rxe"
  cp -r "$W/src/linux-source-$KSER/drivers/infiniband/sw/siw" "$W/siw-build"
  # rxevm patch: in 6.1 the MPA knobs are compile-time constants; expose them as module
  # parameters (defaults unchanged) so CRC-on / MPA rev1 / P2P traffic can be produced.
  (cd "$W/siw-build"
   for v in mpa_crc_required mpa_crc_strict peer_to_peer try_gso; do
     sed -i "s/^const bool $v;/bool $v;\nmodule_param($v, bool, 0644);/" siw_main.c
     sed -i "s/^extern const bool $v;/extern bool $v;/" siw.h
   done
   sed -i 's/^u_char mpa_version = MPA_REVISION_2;/u_char mpa_version = MPA_REVISION_2;\nmodule_param(mpa_version, byte, 0644);/' siw_main.c
   grep -c '^module_param' siw_main.c | grep -qx 5 || { echo "siw patch did not apply" >&2; exit 1; })
  ts "build siw.ko"
  make -C "$HDR/usr/src/linux-headers-$KVER" M="$W/siw-build" CONFIG_RDMA_SIW=m modules -j"$(nproc)" > "$W/siw-build/build.log" 2>&1 \
    || { tail -30 "$W/siw-build/build.log"; exit 1; }
  mkdir -p "$MODDIR/extra"
  strip --strip-debug "$W/siw-build/siw.ko" -o "$MODDIR/extra/siw.ko"
  rm -f "$SRCTAR"     # 130 MB, no longer needed (the .deb stays in dl/)
fi
"$DEPMOD" -b "$KROOT" "$KVER"
lap siw-build

# ---------------------------------------------------------------- 4. initramfs
IRD="$W/out/initramfs.cpio.gz"
if [ "$FORCE" = 1 ] || [ ! -f "$IRD" ] || [ "$SELF" -nt "$IRD" ] || [ "$MODDIR/extra/siw.ko" -nt "$IRD" ]; then
  ts "assemble initramfs tree"
  R="$W/initramfs"; rm -rf "$R"
  mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,run,root,var/log,lib/modules/$KVER}
  ln -s lib "$R/lib64" 2>/dev/null || true
  cp /bin/busybox "$R/bin/busybox"
  for a in $(/bin/busybox --list-full); do [ -e "$R/$a" ] || ln -s /bin/busybox "$R/$a"; done
  # real binaries (override busybox applets of the same name)
  # tc + sch_netem: urnic's interop run (tools/interop.sh) injects loss on rxe's
  # side, and CE marks on its RoCE frames alone (sch_prio, cls_u32); sch_htb +
  # sch_red: its incast-red group routes urnic's RoCE through the VM into a
  # rate-limited queue that marks ECN (this host's kernel has no sch_red)
  BINS="/usr/bin/rdma /sbin/ip /sbin/bridge /bin/ss /sbin/tc"
  for p in ibverbs-utils rdmacm-utils perftest; do
    BINS="$BINS $(dpkg -L $p | grep -E '^/usr/bin/[^/]+$' | grep -v run_perftest)"
  done
  PROV="/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so /usr/lib/x86_64-linux-gnu/libibverbs/libsiw-rdmav34.so"
  for b in $BINS; do
    [ -f "$b" ] || continue
    dst="$R/usr/bin/$(basename "$b")"; case "$b" in /sbin/*|/usr/sbin/*) dst="$R/sbin/$(basename "$b")";; esac
    rm -f "$dst"; cp -L "$b" "$dst"
  done
  for f in $BINS $PROV; do
    [ -f "$f" ] || continue
    ldd "$f" 2>/dev/null | grep -oE '/[^ ]+\.so[^ ]*' || true
  done | sort -u | while read -r lib; do mkdir -p "$R$(dirname "$lib")"; cp -L "$lib" "$R$lib"; done
  for p in $PROV; do mkdir -p "$R$(dirname "$p")"; cp -L "$p" "$R$p"; done
  # dlopen()ed by glibc for pthread_exit/cancel (rping, perftest threads) - not in ldd output
  for l in /lib/x86_64-linux-gnu/libgcc_s.so.1; do mkdir -p "$R$(dirname "$l")"; cp -L "$l" "$R$l"; done
  mkdir -p "$R/etc/libibverbs.d"
  cp /etc/libibverbs.d/rxe.driver /etc/libibverbs.d/siw.driver "$R/etc/libibverbs.d/"
  [ -f "$R/lib64/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib/"
  cat > "$R/etc/ld.so.conf" <<EOF
/lib/x86_64-linux-gnu
/usr/lib/x86_64-linux-gnu
EOF
  ldconfig -r "$R" 2>/dev/null || true
  echo 'root:x:0:0:root:/root:/bin/sh' > "$R/etc/passwd"; echo 'root:x:0:' > "$R/etc/group"
  printf '127.0.0.1 localhost\n' > "$R/etc/hosts"
  cp /etc/protocols /etc/services "$R/etc/" 2>/dev/null || true
  printf 'ulimit -l unlimited 2>/dev/null\nexport PS1="rxevm\\$ "\n' > "$R/etc/profile"

  # kernel modules: the wanted set plus what modprobe says they depend on
  WANT="virtio_pci virtio_net rdma_rxe siw ib_uverbs ib_umad rdma_ucm rdma_cm ib_cm iw_cm
        crc32_generic crc32c_generic crc32_pclmul crc32c_intel configfs af_packet sch_netem
        sch_prio cls_u32 sch_htb sch_red
        nvme_core nvme_fabrics nvme_rdma nvmet nvmet_rdma null_blk loop"
  for m in $WANT; do "$MODPROBE" -d "$KROOT" -S "$KVER" --show-depends "$m" 2>/dev/null || true; done |
    awk '$1=="insmod"{print $2}' | sort -u | while read -r ko; do
      rel=${ko#"$KROOT"/}; mkdir -p "$R/$(dirname "$rel")"; cp "$ko" "$R/$rel"; done
  cp "$MODDIR"/modules.order "$MODDIR"/modules.builtin* "$R/lib/modules/$KVER/" 2>/dev/null || true
  "$DEPMOD" -b "$R" "$KVER"

  cat > "$R/init" <<'EOF'
#!/bin/sh
# rxevm init: bring up NICs, load rdma_rxe + siw, start a tiny command agent.
export PATH=/usr/bin:/usr/sbin:/bin:/sbin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmp /tmp; mount -t tmpfs shm /dev/shm
ulimit -l unlimited
for a in $(cat /proc/cmdline); do case $a in rxevm.*=*) k=${a#rxevm.}; eval "RX_${k%%=*}=\"${a#*=}\"";; esac; done
hostname "rxevm${RX_id:-0}"
echo "rxevm: id=${RX_id} roce=${RX_roce} iw=${RX_iw} ctl=${RX_ctl} mtu=${RX_mtu:-1500}"
modprobe virtio_pci; modprobe virtio_net
for m in configfs crc32_pclmul crc32_generic crc32c_intel crc32c_generic sch_netem sch_prio cls_u32 sch_htb sch_red; do modprobe $m 2>/dev/null; done
mount -t configfs none /sys/kernel/config 2>/dev/null
i=0; while [ ! -e /sys/class/net/eth2 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
ip link set lo up
setif() { # setif DEV ADDR
  [ -n "$2" ] || return 0
  ip link set "$1" mtu "${RX_mtu:-1500}" 2>/dev/null; ip addr add "$2" dev "$1"; ip link set "$1" up
  echo "rxevm: $1 $(cat /sys/class/net/$1/address) $2"
}
setif eth0 "$RX_roce"; setif eth1 "$RX_iw"; ip link set eth2 up; [ -n "$RX_ctl" ] && ip addr add "$RX_ctl" dev eth2
for m in ib_core ib_uverbs ib_umad rdma_cm rdma_ucm iw_cm ib_cm rdma_rxe siw; do modprobe $m || echo "rxevm: modprobe $m FAILED"; done
[ -n "$RX_roce" ] && { rdma link add rxe0 type rxe netdev eth0 || echo "rxevm: rxe0 FAILED"; }
[ -n "$RX_iw" ]   && { rdma link add siw0 type siw netdev eth1 || echo "rxevm: siw0 FAILED"; }
rdma link show
cat > /bin/agent <<'EOA'
#!/bin/sh
# one command per TCP connection: first line is run by sh, output streamed back
read -r cmd
cd /root
exec sh -c "$cmd" </dev/null 2>&1
EOA
chmod +x /bin/agent
setsid nc -ll -p 7000 -e /bin/agent </dev/null >/dev/null 2>&1 &
echo "rxevm: uptime $(cut -d' ' -f1 /proc/uptime)s"
echo "RXEVM-READY"
# console shell (serial); if it exits, respawn
while true; do setsid cttyhack sh -l; sleep 1; done
EOF
  chmod +x "$R/init"
  ts "pack initramfs"
  (cd "$R" && find . -print0 | cpio --null -o -H newc --quiet | gzip -6) > "$IRD.tmp"
  mv "$IRD.tmp" "$IRD"
fi
cp -f "$KROOT/boot/vmlinuz-$KVER" "$W/out/vmlinuz"
lap initramfs
{
  echo "kernel_pkg=$KPKG $PKGVER"; echo "kver=$KVER"
  echo "vmlinuz_bytes=$(stat -c %s "$W/out/vmlinuz")"; echo "initramfs_bytes=$(stat -c %s "$IRD")"
  echo "initramfs_tree=$(du -sh "$W/initramfs" | cut -f1)"
  echo "modules=$(cd "$W/initramfs/lib/modules/$KVER" && find . -name '*.ko' | sed 's#.*/##' | sort | tr '\n' ' ')"
  cat "$TIMES"
} > "$W/out/build-info.txt"
ts "done"; cat "$W/out/build-info.txt"
