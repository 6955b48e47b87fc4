#!/usr/bin/env bash
# nsbox start-up benchmark (make bench, after make build). Prints markdown.
#
# 1. Wall time of `/bin/true` run bare, under bubblewrap and under
#    `nsbox run`, interleaved in one run (a b c a b c ...), as root and as
#    uid 65534: median, p90, ratios. The driver (bench/startbench) fork+execs
#    each command directly: no shell in the measured path.
# 2. The kernel's floor: the namespaces alone (bench/cmin/nsfloor.c) and
#    the whole isolation in C (bench/cmin/cmin.c), against bwrap and nsbox.
#    Then what seccomp adds: nsbox run against nsbox run --seccomp unconfined,
#    and the filter's compile and load times (pkg/seccomp benchmarks).
# 3. A leak check: LOOP runs of `nsbox run -- /bin/true` (every 10th leaves a
#    marked background process inside), then: no leftover process, no
#    nsbox-* cgroup directory, no new host mount, no fd growth. Repeated with
#    --memory 256M --pids 64 when this nsbox has those flags.
# 4. What limits cost: nsbox run with and without --memory 256M --pids 64.
# 5. The filtered network: what --allow-host adds to a cold start, then
#    bulk throughput and connect latency against --net host, slirp4netns
#    and pasta (bench/netcompare_test.go), and the same connect's design
#    in C (bench/cmin/connfloor.c).
#
# Knobs (environment): N=300 runs per command, WARMUP=20, LOOP=1000,
# NSBOX=bin/nsbox, BENCH_USER=65534, SKIP_LEAK=1, SKIP_ROOTLESS=1, SKIP_NET=1.
# docs/benchmarks.md explains every figure and how to profile further.
set -uo pipefail

cd "$(dirname "$0")/.."
REPO=$PWD
GO=${GO:-$(command -v go 2>/dev/null || echo /usr/local/go/bin/go)}
N=${N:-300}
WARMUP=${WARMUP:-20}
LOOP=${LOOP:-1000}
NSBOX=${NSBOX:-bin/nsbox}
BENCH_USER=${BENCH_USER:-65534}
status=0

if [ ! -x "$NSBOX" ]; then
  echo "bench: $NSBOX not found: run make build first" >&2
  exit 2
fi

# Everything the measured processes run lives in a world-readable temp dir,
# so that uid $BENCH_USER can execute it whatever the permissions of the
# checkout. The binary is a copy of $NSBOX (same bytes, same page cache).
work=$(mktemp -d "${TMPDIR:-/tmp}/nsbox-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
if ! (cd "$REPO" && CGO_ENABLED=0 "$GO" build -trimpath -o "$work/startbench" ./bench/startbench &&
  CGO_ENABLED=0 "$GO" build -trimpath -o "$work/gostart" ./bench/gostart); then
  echo "bench: cannot build bench/startbench and bench/gostart" >&2
  exit 2
fi
install -m 0755 "$NSBOX" "$work/nsbox"
nsbox="$work/nsbox"
# A project-sized workspace: 410 directories of five files, a .env in one
# of them. Every run with a built-in profile walks it for .env files.
project="$work/project"
for a in 0 1 2 3 4 5 6 7 8 9; do
  for b in 0 1 2 3 4 5 6 7 8 9; do
    mkdir -p "$project/a$a/b$b/c0" "$project/a$a/b$b/c1" "$project/a$a/b$b/c2"
  done
done
find "$project" -type d -exec sh -c 'for d; do touch "$d/f0.go" "$d/f1.go" "$d/f2.go" "$d/f3.go" "$d/f4.go"; done' sh {} +
touch "$project/a1/.env"
# Empty workspaces (the issue's cold start: nothing in them, so every agent
# file of the built-in profiles is missing and gets a placeholder for the
# run), one per user of the tables below.
mkdir -p "$work/empty-root" "$work/empty-$BENCH_USER"
chown "$BENCH_USER:$BENCH_USER" "$work/empty-$BENCH_USER" 2>/dev/null || true

BWRAP_ARGS="--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --unshare-all --die-with-parent --new-session"

echo "# nsbox start-up benchmark"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- host: $(uname -sr), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
echo "- nsbox: $NSBOX ($(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown), $(stat -c %s "$NSBOX") bytes, $(file -b "$NSBOX" 2>/dev/null | grep -o 'statically linked\|dynamically linked' || echo '?'))"
if command -v bwrap >/dev/null 2>&1; then
  echo "- bwrap: $(bwrap --version 2>&1)"
fi
echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- runs: $N per command after $WARMUP warm-up runs, interleaved"

# run_table TITLE EMPTY-WORKSPACE [setpriv prefix...]
run_table() {
  local title=$1 empty=$2
  shift 2
  local specs=(-c "bare=/bin/true")
  if command -v bwrap >/dev/null 2>&1; then
    specs+=(-c "bwrap=bwrap $BWRAP_ARGS /bin/true")
  fi
  specs+=(-c "nsbox=$nsbox run -- /bin/true")
  specs+=(-c "nsbox-net-host=$nsbox run --net host -- /bin/true")
  specs+=(-c "nsbox-project=$nsbox run --workspace $project -- /bin/true")
  specs+=(-c "nsbox-empty-ws=$nsbox run --workspace $empty -- /bin/true")
  # cwd /: visible inside every sandbox (a cwd under /tmp is not); with it
  # there is no workspace, except where --workspace names one.
  (cd / && "$@" "$work/startbench" -n "$N" -warmup "$WARMUP" -title "$title" \
    -ratio "nsbox/bwrap,nsbox-empty-ws/bwrap,nsbox/bare,bwrap/bare,nsbox-net-host/nsbox,nsbox-project/nsbox,nsbox-empty-ws/nsbox" "${specs[@]}")
}

if ! command -v bwrap >/dev/null 2>&1; then
  echo
  echo "SKIP bwrap: not installed (apt-get install bubblewrap); its rows are missing"
fi

run_table "as root (uid $(id -u))" "$work/empty-root" || status=1

if [ "${SKIP_ROOTLESS:-}" = 1 ]; then
  echo
  echo "SKIP root-less table: SKIP_ROOTLESS=1"
elif [ "$(id -u)" != 0 ]; then
  echo
  echo "SKIP second table: not root, the table above is already root-less"
elif ! command -v setpriv >/dev/null 2>&1; then
  echo
  echo "SKIP root-less table: setpriv not installed (util-linux)"
else
  # --reset-env: HOME, PATH and USER of that user, as a login would set
  # them (an inherited HOME=/root makes nsbox fail on /root/.config).
  run_table "as uid $BENCH_USER (root-less)" "$work/empty-$BENCH_USER" setpriv --reuid="$BENCH_USER" --regid="$BENCH_USER" --clear-groups --reset-env || status=1
fi

# ------------------------------------------------------------ backends

# The backends in one interleaved run: bwrap, native (with and without its
# Landlock scopes step), landlock; then, under a /proc masked as an outer
# container masks it (a private mount namespace, root only), the native
# backend with the outer /proc against landlock. cwd / (no workspace).
if [ "$(id -u)" = 0 ]; then
  specs=(-c "bare=/bin/true")
  if command -v bwrap >/dev/null 2>&1; then
    specs+=(-c "bwrap=bwrap $BWRAP_ARGS /bin/true")
  fi
  specs+=(-c "native=$nsbox run -- /bin/true" -c "native-no-scopes=_NSBOX_BENCH_NO_SCOPES=1 $nsbox run -- /bin/true" -c "landlock=$nsbox run --backend landlock -- /bin/true")
  (cd / && "$work/startbench" -n "$N" -warmup "$WARMUP" -title "backends (as root)" \
    -ratio "landlock/bwrap,native/bwrap,landlock/native,native/native-no-scopes" "${specs[@]}") || status=1
  if command -v unshare >/dev/null 2>&1; then
    echo
    (cd / && unshare -m --propagation private sh -c 'mount -t tmpfs nsbox-mask /proc/acpi 2>/dev/null || mount -t tmpfs nsbox-mask /proc/scsi || exit 0; exec "$@"' sh \
      "$work/startbench" -n "$N" -warmup "$WARMUP" -title "masked /proc: native with the outer /proc against landlock (as root)" \
      -ratio "native-outer-proc/landlock" -c "native-outer-proc=$nsbox run -- /bin/true" -c "landlock=$nsbox run --backend landlock -- /bin/true") || status=1
  fi
fi

# ------------------------------------------------------------ process start

# What one process start costs before any sandboxing: C, an empty static Go
# program, and the nsbox binary in worker mode without its channel (it runs
# the Go runtime and every package init of the binary, then exits 125). A
# sandbox start pays the Go figure twice (supervisor and worker).
# Then the supervisor's own floor: nsbox printing its help (its Go start,
# package inits and the command line) and `run --backend none` (the
# policy and everything around a run, with no sandbox at all), against
# bwrap: no sandbox nsbox builds can start faster than these.
specs=(-c "c-true=/bin/true" -c "go-empty=$work/gostart" -c "nsbox-init-only:125=_NSBOX_INIT=1 $nsbox"
  -c "nsbox-help=$nsbox help" -c "nsbox-backend-none=$nsbox run --backend none -- /bin/true")
ratios="go-empty/c-true,nsbox-init-only/go-empty"
if command -v bwrap >/dev/null 2>&1; then
  specs+=(-c "bwrap=bwrap $BWRAP_ARGS /bin/true")
  ratios="$ratios,nsbox-help/bwrap,nsbox-backend-none/bwrap"
fi
(cd / && "$work/startbench" -n "$N" -warmup "$WARMUP" -title "process start floor (as root)" \
  -ratio "$ratios" "${specs[@]}" 2> >(grep -v 'backend none: the command runs WITHOUT' >&2)) || status=1

# ------------------------------------------------------------ kernel floor

# What the target (nsbox at most half of bwrap) leaves room for on this
# host: nsfloor is the namespaces alone (one clone into all of them, the id
# maps, the exec of /bin/true), cmin the whole isolation of nsbox in C
# (bench/cmin). When nsfloor alone takes most of half of bwrap, no
# implementation of the isolation meets the target here.
CC=${CC:-cc}
if command -v "$CC" >/dev/null 2>&1 && "$CC" -O2 -o "$work/nsfloor" bench/cmin/nsfloor.c && "$CC" -O2 -o "$work/cmin" bench/cmin/cmin.c; then
  echo
  specs=(-c "bare=/bin/true" -c "nsfloor=$work/nsfloor -- /bin/true" -c "nsfloor-net-host=$work/nsfloor -n -- /bin/true" -c "cmin=$work/cmin -- /bin/true")
  if command -v bwrap >/dev/null 2>&1; then
    specs+=(-c "bwrap=bwrap $BWRAP_ARGS /bin/true")
  fi
  specs+=(-c "nsbox=$nsbox run -- /bin/true")
  (cd / && "$work/startbench" -n "$N" -warmup "$WARMUP" -title "kernel floor: namespaces alone, the isolation in C (as root)" \
    -ratio "nsfloor/bwrap,nsfloor-net-host/bwrap,cmin/bwrap,nsbox/bwrap,nsfloor/bare" "${specs[@]}") || status=1
else
  echo
  echo "SKIP kernel floor: no C compiler ($CC; apt-get install gcc)"
fi

# ------------------------------------------------------------ seccomp

# What the seccomp filter adds to a cold start (issue target: under 5 %):
# the same run with and without the filter, interleaved; then the filter's
# own costs from pkg/seccomp's Go benchmarks: the embedded default filter
# (what a start uses), parsing and compiling a profile with libseccomp
# (what --seccomp FILE costs), decoding the BPF in the worker and
# installing it (seccomp(2) with TSYNC, in child processes).
echo
(cd / && "$work/startbench" -n "$N" -warmup "$WARMUP" -title "seccomp in the cold start (as root)" \
  -ratio "nsbox/unconfined" \
  -c "nsbox=$nsbox run -- /bin/true" -c "unconfined=$nsbox run --seccomp unconfined -- /bin/true") || status=1
echo
echo "### seccomp filter: compile and load (go test -bench ./pkg/seccomp)"
echo
echo '```'
(cd "$REPO" && "$GO" test -tags seccomp -run '^$' -bench 'DefaultFilter|ParseDefault|CompileDefault|FilterFromBytes|Install$' \
  -benchtime 200x ./pkg/seccomp 2>&1 | grep -E '^(Benchmark|ok|FAIL)') || status=1
echo '```'

# ------------------------------------------------------------ limits

# What cgroup limits add to a cold start (issue 22 target: limits/nsbox
# at most 1.3x): the same run with and without --memory 256M --pids 64,
# interleaved, as root. The mode that enforced the limits (cgroup1,
# cgroup2, ... or rlimit) is printed above the table.
if "$nsbox" run --help 2>&1 | grep -- '--memory' >/dev/null; then
  echo
  echo "- limits enforced by: $(cd / && "$nsbox" run --json-status fd:1 --memory 256M --pids 64 -- /bin/true 2>/dev/null |
    grep -o '"mode":"[a-z0-9-]*"' | head -1 | cut -d'"' -f4) (as root); target limits/nsbox <= 1.3x"
  echo
  (cd / && "$work/startbench" -n "$N" -warmup "$WARMUP" -title "limits in the cold start (as root)" \
    -ratio "limits/nsbox" \
    -c "nsbox=$nsbox run -- /bin/true" -c "limits=$nsbox run --memory 256M --pids 64 -- /bin/true") || status=1
else
  echo
  echo "SKIP limits table: this nsbox has no --memory flag (nsbox run --help)"
fi

# ------------------------------------------------------------ network

# The filtered network (issue 18). First what it adds to a cold start
# (target: at most 1.5 ms): nsbox run with --allow-host and --add-host
# against the default --net none, interleaved, as root and root-less.
# Then bulk TCP throughput and connect latency through nsbox's networks,
# a plain host process, slirp4netns and pasta, interleaved in one run
# (bench/netcompare_test.go; slirp4netns and pasta need the TAP device,
# root only here, and are skipped with the reason otherwise). Every byte
# goes over the host's loopback or a namespace the benchmark creates.
if [ "${SKIP_NET:-}" = 1 ]; then
  echo
  echo "SKIP network: SKIP_NET=1"
# grep without -q reads all of the help: nsbox never gets SIGPIPE, which
# pipefail would count as the flag missing.
elif ! "$nsbox" run --help 2>&1 | grep -- '--allow-host' >/dev/null; then
  echo
  echo "SKIP network: this nsbox has no --allow-host flag (nsbox run --help)"
else
  net_specs=(-c "nsbox=$nsbox run -- /bin/true" -c "filtered=$nsbox run --allow-host good.test --add-host good.test:127.0.0.1 -- /bin/true")
  echo
  (cd / && "$work/startbench" -n "$N" -warmup "$WARMUP" -title "filtered network in the cold start (as uid $(id -u)); target: at most +1.5 ms" \
    -ratio "filtered/nsbox" "${net_specs[@]}") || status=1
  if [ "$(id -u)" = 0 ] && [ "${SKIP_ROOTLESS:-}" != 1 ] && command -v setpriv >/dev/null 2>&1; then
    echo
    (cd / && setpriv --reuid="$BENCH_USER" --regid="$BENCH_USER" --clear-groups --reset-env \
      "$work/startbench" -n "$N" -warmup "$WARMUP" -title "filtered network in the cold start (as uid $BENCH_USER, root-less)" \
      -ratio "filtered/nsbox" "${net_specs[@]}") || status=1
  fi
  echo
  if [ "$(id -u)" != 0 ]; then
    echo "- not root: slirp4netns and pasta need /dev/net/tun (mode $(stat -c %a /dev/net/tun 2>/dev/null || echo missing)); their rows may be skipped"
  else
    echo "- as root: slirp4netns $(slirp4netns --version 2>/dev/null | head -1 | sed 's/^slirp4netns version //' || echo 'not installed'), passt $(dpkg-query -W -f='${Version}' passt 2>/dev/null || echo 'not installed')"
  fi
  (cd "$REPO" && "$GO" test -tags seccomp -run '^$' -bench 'NetCompare' -benchtime 1x ./bench/ 2>&1 |
    grep -vE '^(goos|goarch|pkg|cpu): |^PASS$|^ok ') || status=1
  # The same connect built in C (bench/cmin/connfloor.c): the seccomp
  # trap alone, and the filtered design (dial on the host, install with
  # ADDFD) with no policy and no Go runtime: the floor under nsbox's
  # "connect added" on this host.
  # A mode this host cannot run (no user namespaces, no seccomp
  # notifications) is listed as skipped with its reason; connfloor itself
  # fails only on bad arguments.
  CC=${CC:-cc}
  echo
  if ! command -v "$CC" >/dev/null 2>&1; then
    echo "SKIP connect floor: no C compiler ($CC; apt-get install gcc)"
  elif ! "$CC" -O2 -pthread -o "$work/connfloor" bench/cmin/connfloor.c; then
    echo "SKIP connect floor: bench/cmin/connfloor.c does not build with $CC here (kernel headers older than seccomp user notification?)"
  else
    echo "### network: the filtered connect's design in C (bench/cmin/connfloor.c, as uid $(id -u))"
    echo
    "$work/connfloor" -r 15 -n 500 || status=1
  fi
fi

# ------------------------------------------------------------ leak check

leak_loop() {
  local title=$1
  shift
  # Every 10th run leaves a background process that outlives the command
  # inside the sandbox; its command line carries the marker the driver
  # looks for afterwards.
  local marker_cmd="$nsbox run $* -- /bin/sh -c '/bin/sh -c \"sleep 600; :\" @MARKER@ & exit 0'"
  echo
  echo "### leak check: $title"
  echo
  echo '```'
  (cd / && "$work/startbench" -loop "$LOOP" -marker-every 10 -marker-cmd "$marker_cmd" -c "nsbox=$nsbox run $* -- /bin/true") || status=1
  echo '```'
}

if [ "${SKIP_LEAK:-}" = 1 ]; then
  echo
  echo "SKIP leak check: SKIP_LEAK=1"
else
  echo
  echo "## Leak check ($LOOP runs each)"
  leak_loop "nsbox run -- /bin/true"
  if "$nsbox" run --help 2>&1 | grep -- '--memory' >/dev/null; then
    leak_loop "nsbox run --memory 256M --pids 64 -- /bin/true" --memory 256M --pids 64
  else
    echo
    echo "SKIP leak check with limits: this nsbox has no --memory flag (nsbox run --help)"
  fi
fi

echo
echo "- load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
