#!/usr/bin/env bash
# Soak and kill -9 check (issue 21), one command:
#
#   make build && sudo N=2000 K=50 hack/soak.sh
#
# 1. N runs of `nsbox run`, as root and as uid 65534 (setpriv), every other
#    one with --memory/--pids, every 10th leaving a marked background
#    process inside the sandbox that must die with it;
# 2. K times per kind of supervisor (run, run with limits, script), as both
#    users: start it with a marked long-running command, SIGKILL the
#    supervisor once the command runs, then one plain run (which cleans what
#    a killed run could not);
# and then counts what is left over against a snapshot taken before:
# processes (marked ones, and any running the nsbox binary), mounts in this
# mount namespace, nsbox-* cgroups, nsbox temp directories under /tmp, and
# the fds held by surviving nsbox processes. It exits 1 on any leak.
#
# Environment: NSBOX (default bin/nsbox), N (2000), K (50), USERS ("0 65534";
# root-less only when not run as root).
set -u

NSBOX=$(readlink -f "${NSBOX:-bin/nsbox}")
N=${N:-2000}
K=${K:-50}
if [ "$(id -u)" = 0 ]; then
  USERS=${USERS:-"0 65534"}
else
  USERS=$(id -u)
fi
MARKER="nsbox-soak-marker-$$"
status=0

[ -x "$NSBOX" ] || { echo "soak: $NSBOX not found (make build)" >&2; exit 2; }

as_user() { # uid cmd...
  local u=$1
  shift
  if [ "$u" = "$(id -u)" ]; then
    "$@"
  else
    setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"
  fi
}

# pids of processes whose command line holds the marker, or that run the
# nsbox binary under test (supervisors, workers, shims).
leftover_pids() {
  {
    pgrep -f -- "$MARKER"
    find /proc/[0-9]*/exe -maxdepth 0 -lname "$NSBOX" 2>/dev/null | cut -d/ -f3
  } | grep -v -x "$$" | sort -u
}

count_fds() { # fds held by the given pids
  local n=0 p
  for p in "$@"; do
    n=$((n + $(ls "/proc/$p/fd" 2>/dev/null | wc -l)))
  done
  echo "$n"
}

cgroups() { find /sys/fs/cgroup -type d -name 'nsbox-*' 2>/dev/null | sort; }
# The temp directories nsbox makes: script work directories, named
# nsbox-script-<pid>-<random> (the test suites' nsbox-it-*, nsbox-posture-*,
# ... are not nsbox's, nor an nsbox-script-<random> of another build that
# may run beside this soak on a shared machine; those are listed apart).
tmpdirs() { find /tmp -maxdepth 1 -regex '/tmp/nsbox-script-[0-9]+-[0-9]+' 2>/dev/null | sort; }
foreign_tmpdirs() { find /tmp -maxdepth 1 -regex '/tmp/nsbox-script-[0-9]+' 2>/dev/null | sort; }
mounts() { wc -l </proc/self/mountinfo; }

before_cg=$(cgroups)
before_tmp=$(tmpdirs)
before_foreign=$(foreign_tmpdirs)
before_mounts=$(mounts)
before_pids=$(leftover_pids | wc -l)

echo "# nsbox soak: $NSBOX ($(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null)), N=$N K=$K, users: $USERS"
echo "- start: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"

# ------------------------------------------------------------------ runs
for u in $USERS; do
  fail=0
  t0=$(date +%s.%N)
  for i in $(seq 1 "$N"); do
    lim=()
    [ $((i % 2)) = 0 ] && lim=(--memory 256M --pids 64)
    if [ $((i % 10)) = 0 ]; then
      as_user "$u" "$NSBOX" run "${lim[@]}" -- /bin/sh -c "/bin/sh -c 'sleep 600; : $MARKER' & exit 0" </dev/null >/dev/null 2>&1 || fail=$((fail + 1))
    else
      as_user "$u" "$NSBOX" run "${lim[@]}" -- /bin/true </dev/null >/dev/null 2>&1 || fail=$((fail + 1))
    fi
  done
  t1=$(date +%s.%N)
  echo "- uid $u: $N runs in $(echo "$t1 - $t0" | bc) s, $fail failed"
  [ "$fail" = 0 ] || status=1
done

# ---------------------------------------------------------------- kill -9
# start_kind uid kind: starts a supervisor of that kind whose command runs
# the marker, in the background; prints its pid.
start_kind() {
  local u=$1 kind=$2 args
  case $kind in
  run) args=(run -- /bin/sh -c "sleep 600; : $MARKER") ;;
  run-limited) args=(run --memory 256M --pids 64 -- /bin/sh -c "sleep 600; : $MARKER") ;;
  script) args=(script --lang bash -c "sleep 600; : $MARKER") ;;
  esac
  # exec: the background job's pid is nsbox's own (setpriv execs it too).
  if [ "$u" = "$(id -u)" ]; then
    exec "$NSBOX" "${args[@]}" </dev/null >/dev/null 2>&1 &
  else
    exec setpriv --reuid="$u" --regid="$u" --clear-groups -- "$NSBOX" "${args[@]}" </dev/null >/dev/null 2>&1 &
  fi
  echo $!
}

children() { cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | grep . ; }

for u in $USERS; do
  for kind in run run-limited script; do
    killed=0
    for i in $(seq 1 "$K"); do
      pid=$(start_kind "$u" "$kind")
      # setpriv execs nsbox: $pid is the supervisor, its child the worker
      # (PID 1 inside), whose child is the command. Wait for the command.
      worker=
      for _ in $(seq 1 400); do
        worker=$(children "$pid" | head -1)
        [ -n "$worker" ] && [ -n "$(children "$worker")" ] && break
        sleep 0.05
      done
      kill -9 "$pid" 2>/dev/null && killed=$((killed + 1))
      wait "$pid" 2>/dev/null
      # The sandbox dies with its supervisor (PDEATHSIG of PID 1, then
      # the kernel empties the PID namespace): give it a moment.
      for _ in $(seq 1 100); do
        [ -z "$worker" ] || [ ! -e "/proc/$worker" ] && break
        sleep 0.05
      done
    done
    echo "- uid $u: $killed/$K supervisors of kind '$kind' killed with SIGKILL while their command ran"
  done
  # What a killed supervisor could not remove, the next one of its kind
  # does (a run: cgroups; a script: its work directory).
  as_user "$u" "$NSBOX" run -- /bin/true </dev/null >/dev/null 2>&1
  as_user "$u" "$NSBOX" script --lang bash -c true </dev/null >/dev/null 2>&1
done

sleep 0.5
# ----------------------------------------------------------------- count
check() { # ok? what detail
  if [ "$1" = 0 ]; then echo "  [ok  ] $2: $3"; else echo "  [LEAK] $2: $3"; status=1; fi
}
left=$(leftover_pids)
nleft=$(echo "$left" | grep -c . || true)
new_cg=$(comm -13 <(echo "$before_cg") <(cgroups) | grep -c . || true)
new_tmp=$(comm -13 <(echo "$before_tmp") <(tmpdirs))
nnew_tmp=$(echo "$new_tmp" | grep -c . || true)
after_mounts=$(mounts)
echo
echo "## Leftovers"
check $((nleft > before_pids)) "processes (marked, or running $NSBOX)" "before $before_pids, after $nleft $(echo $left)"
check $((after_mounts > before_mounts)) "mounts in this mount namespace" "before $before_mounts, after $after_mounts"
check $((new_cg > 0)) "nsbox-* cgroups" "$new_cg new"
check $((nnew_tmp > 0)) "nsbox temp directories in /tmp" "$nnew_tmp new $(echo $new_tmp)"
nforeign=$(comm -13 <(echo "$before_foreign") <(foreign_tmpdirs) | grep -c . || true)
[ "$nforeign" = 0 ] || echo "  (not counted: $nforeign new nsbox-script-<random> directories, a name this build does not make: other nsbox builds on this machine)"
check $(($(count_fds $left) > 0 && nleft > before_pids)) "fds held by leftover nsbox processes" "$(count_fds $left)"
echo "- end: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
