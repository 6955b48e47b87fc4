#!/usr/bin/env bash
# Builds the prototype variants measured in docs/benchmarks.md from a commit
# of this repository, in a scratch directory: nothing in the checkout is
# modified. Each variant adds one change to the previous one.
#
#   bench/prototypes/build-variants.sh [COMMIT] [OUT]
#     COMMIT  default HEAD (patches made against 4c8a0f7; those already in
#             COMMIT are skipped, the later ones apply to f4f93ef)
#     OUT     default /tmp/nsbox-variants; binaries land in OUT/bin/
#
# Variants (cumulative):
#   base      the commit as `make build` builds it (cgo on, dynamic)
#   caps      + start-caps.patch      cap_last_cap read once, not 41 times
#   target    + start-target.patch    mount points created with mkdirat on
#                                     the resolved parent, not MkdirAllHandle
#   limits    + start-limits.patch    no CleanupStale scan without limits
#   static    + a static binary, -s -w: CGO_ENABLED=0 when nothing needs cgo,
#                                     else libseccomp.a linked statically
#                                     (-linkmode external -extldflags -static,
#                                     tags osusergo,netgo)
#   async     + start-asyncclose.patch nsbox run kills the sandbox and exits
#                                     without waiting for the teardown
#   prewarm   + start-prewarm.patch   the worker pre-creates threads only
#                                     when a limit applies (else no 2 ms sleep)
#   seccache  + start-seccompcache.patch measurement prototype: the compiled
#                                     default seccomp filter cached on disk
#   noschema  + tools-schema-stub.go.txt measurement only: jsonschema/v6 and
#                                     x/text/message not linked
#   nocg      + cgroups-stub.go.txt   measurement only: containerd/cgroups,
#                                     go-systemd, godbus not linked
#   trace-*   base and nocg with bench/phases/trace.patch (for bench/phases)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
commit=${1:-HEAD}
out=${2:-/tmp/nsbox-variants}
GO=${GO:-$(command -v go 2>/dev/null || echo /usr/local/go/bin/go)}
rm -rf "$out/bin"
mkdir -p "$out/bin"
src=$out/src
rm -rf "$src"
mkdir -p "$src"
git -C "$repo" archive "$commit" | tar -x -C "$src"

build() { # name cgo ldflags [dir]
  (cd "${4:-$src}" && CGO_ENABLED=$2 "$GO" build -tags seccomp -trimpath -ldflags="$3" -o "$out/bin/$1" ./cmd/nsbox)
  echo "built $out/bin/$1"
}
# static: pure Go when possible, else cgo (libseccomp) linked statically
build_static() { # name [dir]
  if (cd "${2:-$src}" && CGO_ENABLED=0 "$GO" build -tags seccomp -trimpath -ldflags="-s -w" -o "$out/bin/$1" ./cmd/nsbox 2>/dev/null); then
    echo "built $out/bin/$1 (CGO_ENABLED=0)"
  else
    (cd "${2:-$src}" && CGO_ENABLED=1 "$GO" build -tags 'seccomp osusergo netgo' -trimpath \
      -ldflags='-s -w -linkmode external -extldflags "-static"' -o "$out/bin/$1" ./cmd/nsbox)
    echo "built $out/bin/$1 (cgo, static)"
  fi
}
# apply PATCH: a patch already contained in COMMIT is reported and skipped.
apply() {
  if (cd "$src" && patch -p1 -s -R --dry-run < "$1" >/dev/null 2>&1); then
    echo "$(basename "$1"): already in $commit, skipped"
  elif (cd "$src" && patch -p1 -s --dry-run < "$1" >/dev/null 2>&1); then
    (cd "$src" && patch -p1 -s < "$1")
  else
    echo "$(basename "$1"): does not apply to $commit (the code changed), skipped"
  fi
}

build base 1 ""
cp -a "$src" "$out/src-base"
apply "$here/start-caps.patch"; build caps 1 ""
apply "$here/start-target.patch"; build target 1 ""
apply "$here/start-limits.patch"; build limits 1 ""
build_static static
apply "$here/start-asyncclose.patch"; build_static async
apply "$here/start-prewarm.patch"; build_static prewarm
apply "$here/start-seccompcache.patch"; build_static seccache
if [ -f "$src/pkg/tools/schema.go" ]; then
  cp "$here/tools-schema-stub.go.txt" "$src/pkg/tools/schema.go"
  build_static noschema
fi
rm "$src"/pkg/cgroups/{v1,v2,systemd}.go
cp "$here/cgroups-stub.go.txt" "$src/pkg/cgroups/stub.go"
build_static nocg
# traced builds
(cd "$out/src-base" && patch -p1 -s < "$repo/bench/phases/trace.patch") && build trace-base 1 "" "$out/src-base"
(cd "$src" && patch -p1 -s < "$repo/bench/phases/trace.patch") && build_static trace-nocg
rm -rf "$out/src-base"
