// Package cgroups applies nsbox's resource limits (memory, pids, cpu) to one
// sandbox with the best mechanism this host and uid offer, reads the kernel's
// own counters of what the limits did (OOM kills, refused forks), kills the
// whole tree and leaves nothing behind on the host.
//
// Mechanisms, best first (see Detect):
//
//   - "cgroup2": a cgroup of our own in the unified hierarchy (root, or a
//     cgroup namespace of our own). The worker is cloned straight into it
//     with CLONE_INTO_CGROUP (CgroupFD).
//   - "cgroup2-delegated": root-less on cgroup v2, in a subtree delegated to
//     this uid: either the caller's own cgroup (when it is writable and holds
//     no process but ours, we move ourselves into a leaf "nsbox-<pid>-sup" and
//     create the sandbox groups beside it, respecting the no-internal-process
//     rule), or a transient systemd scope with Delegate=yes created over
//     D-Bus for the worker (AddProcess).
//   - "cgroup1": hybrid and v1 hosts, one group in each of the memory, pids,
//     cpu and freezer hierarchies the caller can write to.
//   - "rlimit": no cgroup access; Rlimits returns RLIMIT_DATA/NPROC/CPU for the
//     commands the worker runs.
//   - "none": no limits were asked for; Rlimits still returns RLIMIT_CORE=0.
//
// Every group is created under the caller's current cgroup in its hierarchy
// and named "nsbox-<supervisor pid>-<random>[-<id>]"; CleanupStale removes
// those whose supervisor is gone. The package never changes host-wide mounts
// or sysctls and never writes outside groups it created, apart from enabling
// controllers in the subtree_control of the cgroup that becomes the parent of
// its groups (which must be the caller's own or delegated to it).
//
// The package imports no other nsbox package, prints nothing and never exits.
package cgroups
