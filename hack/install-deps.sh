#!/usr/bin/env bash
# Installs the system packages nsbox needs to build and test, when run as
# root on Debian/Ubuntu; otherwise says exactly what to install.
set -euo pipefail

# package -> why
declare -A why=(
  [libseccomp-dev]="build: seccomp filters (libseccomp-golang, cgo)"
  [pkg-config]="build: finds libseccomp"
  [gcc]="build: cgo"
  [libc6-dev]="build: C headers for cgo, libc.a for the static bin/nsbox"
  [bubblewrap]="bench: the comparison in make bench"
  [qemu-system-x86]="test: cgroup v2 tests in a throw-away VM (make test-vm)"
  [busybox-static]="test: the VM's initramfs"
  [cpio]="test: the VM's initramfs"
  [python3]="test: inline python scripts"
  [nodejs]="test: inline node scripts"
  [npm]="test: the MCP reference client"
  [ruby]="test: inline ruby scripts"
  [iproute2]="test: network checks"
  [util-linux]="test: setpriv, unshare"
  [hyperfine]="bench: timing"
  [containerd]="test: the container test runs nsbox inside ctr run (test/container)"
  [python3-pip]="test: a real pip against a local index through the filtered network"
  [uidmap]="run and test: newuidmap/newgidmap give a root-less sandbox the caller's /etc/subuid range"
  [slirp4netns]="bench: the filtered network against slirp4netns in make bench"
  [passt]="bench: the filtered network against pasta in make bench"
  [strace]="test: a command traced inside the sandbox (TestExecTracedCommand)"
  [git]="test: the git perimeter tests run the host's git after a sandbox (they skip without it)"
)

missing=()
for p in "${!why[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    # nodejs from another source (nodesource) also provides npm.
    if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
    if [ "$p" = nodejs ] && command -v node >/dev/null 2>&1; then continue; fi
    if [ "$p" = python3 ] && command -v python3 >/dev/null 2>&1; then continue; fi
    missing+=("$p")
  fi
done

if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
  echo "nsbox: Go 1.23 or newer is required (https://go.dev/dl/, or apt-get install golang-go on a recent release)" >&2
  exit 1
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi
echo "nsbox: these packages are missing; install them as root:" >&2
for p in "${missing[@]}"; do echo "  $p  (${why[$p]})" >&2; done
echo "  sudo apt-get install ${missing[*]}" >&2
# Only the build packages are required to build.
for p in "${missing[@]}"; do
  case "$p" in libseccomp-dev|pkg-config|gcc|libc6-dev) exit 1 ;; esac
done
exit 0
