#!/usr/bin/env bash
# Run a Go package's tests as root in a throw-away cgroup v2 VM.
#
#   hack/run-in-vm.sh [PKG] [-- TEST-BINARY-FLAGS...]
#   hack/run-in-vm.sh ./pkg/cgroups -- -test.v -test.run 'VM|OOM'
#
# The VM: Debian's cloud kernel (the package linux-image-cloud-amd64 depends
# on, fetched once with `apt-get download` into .cache/vm/), booted with
# cgroup_no_v1=all by qemu with an initramfs of busybox-static, test/vm/init.sh
# as /init and the package's test binary built static (CGO_ENABLED=0). The
# init sets NSBOX_VM=1, mounts cgroup2 on /sys/fs/cgroup and enables every
# controller for the root's children. No disk, no network; nothing persists.
#
# Exit status: the test binary's, or 125 when the VM could not be built,
# booted or did not report (timeout: NSBOX_VM_TIMEOUT seconds, default 120;
# the VM runs ~10 s under TCG here). A VM that stops answering without
# reporting (under TCG the whole guest froze twice in TestCPULimit) is booted
# once more, saying so; a test that fails is never run again.
#
# Needs: go, qemu-system-x86_64, busybox-static, cpio, apt-get (Debian/Ubuntu
# host with package lists: run `apt-get update` once). KVM is used when the
# CPU has vmx/svm and /dev/kvm opens; otherwise TCG emulation.
#
# Environment: NSBOX_VM_KERNEL (a vmlinuz to use instead of Debian's),
# NSBOX_VM_CACHE (default .cache/vm), NSBOX_VM_TAGS (go build tags),
# NSBOX_VM_TIMEOUT, NSBOX_VM_MEM (MiB, default 1024), NSBOX_VM_SMP (default 2).
set -euo pipefail

die() { echo "run-in-vm: $*" >&2; exit 125; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${NSBOX_VM_CACHE:-$ROOT/.cache/vm}
TIMEOUT=${NSBOX_VM_TIMEOUT:-120}
MEM=${NSBOX_VM_MEM:-1024}
SMP=${NSBOX_VM_SMP:-2}
PKG=./pkg/cgroups
if [[ $# -gt 0 && $1 != -- ]]; then PKG=$1; shift; fi
if [[ $# -gt 0 && $1 == -- ]]; then shift; fi
TEST_ARGS=("$@")
[[ ${#TEST_ARGS[@]} -gt 0 ]] || TEST_ARGS=(-test.v -test.timeout=100s)

for tool in go qemu-system-x86_64 cpio; do
	command -v "$tool" >/dev/null || die "$tool not found (apt-get install qemu-system-x86 cpio busybox-static)"
done
BUSYBOX=""
for b in /bin/busybox /usr/bin/busybox; do
	# The initramfs has no libc: only a static busybox (busybox-static) works.
	if [[ -x $b ]] && ! ldd "$b" >/dev/null 2>&1; then BUSYBOX=$b; break; fi
done
[[ -n $BUSYBOX ]] || die "a static busybox is needed: apt-get install busybox-static"

mkdir -p "$CACHE"
[[ -e $CACHE/.gitignore ]] || echo '*' >"$CACHE/.gitignore" # never committed

# --- kernel -----------------------------------------------------------------
kernel=${NSBOX_VM_KERNEL:-}
if [[ -z $kernel ]]; then
	pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	if [[ -z $pkg ]]; then
		# No package lists: use a kernel fetched earlier, if any.
		kernel=$(ls -1 "$CACHE"/linux-image-*/boot/vmlinuz-* 2>/dev/null | sort -V | tail -n1 || true)
		[[ -n $kernel ]] || die "cannot resolve linux-image-cloud-amd64 (run: apt-get update)"
	else
		dir=$CACHE/$pkg
		if ! ls "$dir"/boot/vmlinuz-* >/dev/null 2>&1; then
			echo "run-in-vm: fetching $pkg" >&2
			dl=$(mktemp -d "$CACHE/dl.XXXXXX")
			(cd "$dl" && apt-get download "$pkg" >/dev/null 2>&1) || { rm -rf "$dl"; die "apt-get download $pkg failed"; }
			rm -rf "$dir.tmp" && dpkg-deb -x "$dl"/*.deb "$dir.tmp" && rm -rf "$dl" && mv "$dir.tmp" "$dir"
		fi
		kernel=$(ls -1 "$dir"/boot/vmlinuz-* | head -n1)
	fi
fi
[[ -r $kernel ]] || die "kernel $kernel not readable"

# --- initramfs ----------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/nsbox-vm.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs=$work/root
mkdir -p "$rootfs"/{bin,dev,proc,sys,tmp,etc}
cp "$BUSYBOX" "$rootfs/bin/busybox"
install -m 0755 "$ROOT/test/vm/init.sh" "$rootfs/init"
(cd "$ROOT" && CGO_ENABLED=0 go test -c ${NSBOX_VM_TAGS:+-tags "$NSBOX_VM_TAGS"} -o "$rootfs/test.bin" "$PKG") ||
	die "building the test binary of $PKG failed"
[[ -f $rootfs/test.bin ]] || die "$PKG has no tests"
go version -m "$rootfs/test.bin" | grep -q 'CGO_ENABLED=0' || die "test binary is not static"
chmod 0755 "$rootfs/test.bin"
printf '%s\n' "${TEST_ARGS[@]}" >"$rootfs/test.args"
(cd "$rootfs" && find . -print0 | cpio --null -o -H newc --quiet --owner=0:0) >"$work/initrd"

# --- boot -----------------------------------------------------------------------
accel=(-accel tcg -cpu max)
how=tcg
if grep -qE '\b(vmx|svm)\b' /proc/cpuinfo && { exec 3<>/dev/kvm; } 2>/dev/null; then
	exec 3>&-
	accel=(-accel kvm -cpu host)
	how=kvm
fi
boot() {
	echo "run-in-vm: booting $(basename "$kernel") ($how, $SMP cpus, ${MEM}M) with $PKG" >&2
	: >"$work/exit"
	start=$(date +%s.%N)
	rc=0
	timeout --kill-after=10 "$TIMEOUT" qemu-system-x86_64 "${accel[@]}" \
		-smp "$SMP" -m "$MEM" -nographic -nodefaults -no-user-config -no-reboot \
		-serial mon:stdio -serial "file:$work/exit" \
		-kernel "$kernel" -initrd "$work/initrd" \
		-append "console=ttyS0 cgroup_no_v1=all panic=-1 quiet" || rc=$?
	end=$(date +%s.%N)
	echo "run-in-vm: VM ran for $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}')s" >&2
}
boot
if [[ $rc -eq 124 || $rc -eq 137 ]] && ! grep -q NSBOX_VM_EXIT= "$work/exit"; then
	echo "run-in-vm: the VM stopped answering after ${TIMEOUT}s without reporting; booting it once more" >&2
	boot
fi
[[ $rc -eq 124 || $rc -eq 137 ]] && die "timed out after ${TIMEOUT}s"
code=$(tr -d '\r' <"$work/exit" 2>/dev/null | sed -n 's/^NSBOX_VM_EXIT=\([0-9]*\)$/\1/p' | tail -n1)
[[ -n $code ]] || die "the VM did not report an exit code (qemu status $rc)"
exit "$code"
