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

# Go: go.mod's version or newer. Where no Go that new is installed and
# /usr/local/go is free, root gets the official toolchain from the Go
# module proxy (the zip `go` itself fetches when go.mod asks for a newer
# toolchain), checked against the SHA-256 pinned here, in /usr/local/go.
# Keep go_version in step with go.mod's go line.
go_version=1.26.8
declare -A go_sha256=(
  [amd64]=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7
  [arm64]=02b36b6787b3ac767668f630e2998df45a3b1f9ffee08d1bf3ef6487cd658d99
)
here=$(cd "$(dirname "$0")" && pwd)
go_ok() {
  local have
  have=$(cd / && GOTOOLCHAIN=local "$("$here/find-go.sh")" version 2>/dev/null | awk '{ sub(/^go/, "", $3); print $3 }')
  [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$go_version" "$have" | sort -V | head -n 1)" = "$go_version" ]
}
need_go=
if ! go_ok; then
  need_go=1
  why[curl]="build: fetches Go $go_version (none that new is installed)"
  why[unzip]="build: unpacks Go $go_version"
  why[ca-certificates]="build: checks the Go module proxy's certificate"
fi

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

# install_go puts Go $go_version in /usr/local/go (root, /usr/local/go
# free), or says what to do.
install_go() {
  local arch zip proxy
  arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
  case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
  if [ "$(id -u)" != 0 ] || [ -e /usr/local/go ] || [ -z "${go_sha256[$arch]:-}" ]; then
    local found
    found=$(cd / && GOTOOLCHAIN=local "$("$here/find-go.sh")" version 2>/dev/null | awk '{print $3}')
    echo "nsbox: Go $go_version or newer is required (found: ${found:-none})." >&2
    echo "  Install it from https://go.dev/dl/ into /usr/local/go; as root, with /usr/local/go absent, make does (amd64, arm64)." >&2
    exit 1
  fi
  proxy=${GOPROXY:-}; proxy=${proxy%%,*}
  case "$proxy" in http://*|https://*) ;; *) proxy=https://proxy.golang.org ;; esac
  zip=golang.org/toolchain@v0.0.1-go$go_version.linux-$arch
  go_tmp=$(mktemp -d)
  trap 'rm -rf "$go_tmp"' EXIT
  echo "installing: Go $go_version in /usr/local/go (from $proxy)"
  curl -fsSL --retry 3 -o "$go_tmp/go.zip" "$proxy/golang.org/toolchain/@v/v0.0.1-go$go_version.linux-$arch.zip"
  # The pinned hash, not the proxy, decides what is installed.
  if ! echo "${go_sha256[$arch]}  $go_tmp/go.zip" | sha256sum -c --status; then
    echo "nsbox: the Go $go_version download does not have the SHA-256 pinned in hack/install-deps.sh; not installed" >&2
    exit 1
  fi
  unzip -q "$go_tmp/go.zip" -d "$go_tmp/x"
  mv "$go_tmp/x/$zip" /usr/local/go
  /usr/local/go/bin/go version
}

if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  missing=()
fi
if [ -n "$need_go" ] && [ "$(id -u)" = 0 ]; then
  install_go
  need_go=
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "nsbox: these packages are missing; install them as root:" >&2
  for p in "${missing[@]}"; do echo "  $p  (${why[$p]})" >&2; done
  echo "  sudo apt-get install ${missing[*]}" >&2
fi
if [ -n "$need_go" ]; then
  install_go # not root: says what to do, and fails
fi
# Only the build packages are required to build.
for p in "${missing[@]}"; do
  case "$p" in libseccomp-dev|pkg-config|gcc|libc6-dev) exit 1 ;; esac
done
exit 0
