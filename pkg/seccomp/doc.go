// Package seccomp turns seccomp profiles in the OCI/Docker JSON format into
// BPF programs and installs them. It is a leaf package: it imports no other
// nsbox package except the data-only package profiles.
//
// # Where each step runs
//
// The supervisor parses (Parse, LoadFile, Default) and compiles (Compile)
// before the sandbox starts, so every profile problem is reported there,
// with the field at fault. The compiled program crosses the channel as bytes
// (Filter.Bytes, FilterFromBytes). The worker installs it (Filter.Install)
// as its last setup step, with one seccomp(2) call and no libseccomp.
//
// The built-in default profile is also compiled ahead of time: `go
// generate ./pkg/seccomp/...` writes it, compiled for each Options variant,
// into precompiled/, which is embedded in the binary, and DefaultFilter
// returns that filter without parsing or compiling anything (see
// precompiled.go). Other profiles and architectures without a precompiled
// filter are compiled at run time.
//
// # Why the default profile is a denylist
//
// profiles/seccomp/default.json allows by default and refuses a list of
// syscalls. nsbox runs arbitrary toolchains (compilers, interpreters, test
// suites, package managers, browsers under test); an allowlist that does
// not break some of them is about as wide as Docker's, which allows ~370
// syscalls, and every missing entry is a hard-to-diagnose failure. The
// sandbox's boundary is built from namespaces, a fresh root, no
// capabilities and no_new_privs; seccomp's job there is to close the kernel
// entry points that those do not close or that are a recurring source of
// privilege escalations. The denylist names them, each with the attack it
// stops (the "comment" of its rule). Two mechanisms keep the denylist from
// going stale:
//
//   - syscalls newer than anything the filter can name get ENOSYS (see the
//     ENOSYS stub in enosys.go), so a new kernel interface is refused until
//     libseccomp or nsbox's table learns its name;
//   - only the native ABI is allowed: i386 (int 0x80) and x32 (syscall
//     numbers with bit 30 set) calls kill the process, so nothing can reach
//     the kernel through a second syscall table the rules do not cover.
//
// Users who want an allowlist can pass Docker's profile, which this package
// reads unchanged (includes/excludes evaluated for a sandbox with no
// capabilities), or their own.
//
// # Bad-architecture action
//
// Calls from an ABI the filter does not cover kill the process
// (SECCOMP_RET_KILL_PROCESS). EPERM would leave a 32-bit program failing every
// call in confusing ways, and killing only the thread (libseccomp's default)
// leaves a Go process with a dead thread. A death by SIGSYS is unambiguous
// and is reported as a violation.
//
// # Strictness
//
// Parse rejects what it does not understand: unknown or duplicate keys,
// actions, operators, architectures, capabilities, syscall names, argument
// tests that can never match, errno 0 (a "denied" call that reports
// success) and rules for one syscall that libseccomp cannot keep apart
// (different actions where one rule has no argument conditions, or the same
// conditions). Syscall names are checked against libseccomp and against a
// small table of syscalls newer than libseccomp 2.5.4 (names.go).
//
// # Building
//
// The package uses cgo and libseccomp (libseccomp-dev to build, libseccomp2
// at run time; github.com/seccomp/libseccomp-golang v0.11.1). No build tags
// are needed. runc's libcontainer/seccomp is not used; see enosys.go for why.
package seccomp
