package namespaces

/*
#define _GNU_SOURCE
#include <stdlib.h>
#include "spawn.h"
#include "holder.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SpawnArgs is the program Spawn starts and the fds it gets.
type SpawnArgs struct {
	Path string
	Argv []string
	Env  []string
	// Stdin, Stdout and Stderr become fds 0 to 2 (nil: /dev/null); Extra,
	// when set, becomes fd 3. No other fd crosses the exec.
	Stdin, Stdout, Stderr, Extra *os.File
}

// SpawnError is a failed step of Spawn. It unwraps to the errno, so that
// errors.Is(err, syscall.EPERM) tells a refused user namespace.
type SpawnError struct {
	Step string
	Err  error
}

func (e *SpawnError) Error() string { return "spawn worker: " + e.Step + ": " + e.Err.Error() }
func (e *SpawnError) Unwrap() error { return e.Err }

var spawnSteps = map[C.int]string{
	C.NSBOX_STEP_CLONE:     "clone",
	C.NSBOX_STEP_SIGNALS:   "reset signals",
	C.NSBOX_STEP_SETSID:    "setsid",
	C.NSBOX_STEP_PDEATHSIG: "set parent death signal",
	C.NSBOX_STEP_CAPS:      "raise ambient capabilities",
	C.NSBOX_STEP_FDS:       "set up fds",
	C.NSBOX_STEP_EXEC:      "exec",
}

// Spawn starts a program in the namespaces o asks for, as PID 1 of the new
// PID namespace: a new session, SIGKILL when the calling thread exits
// (PR_SET_PDEATHSIG), default signal dispositions and an empty signal mask,
// and the worker's capabilities as ambient ones. Its user namespace has no
// id map yet: the caller writes one with WriteMaps before the program needs
// its ids (it runs unmapped until then, owning nothing inside).
//
// The parent death signal is tied to the calling OS thread: callers lock
// the goroutine to its thread and keep it for the child's life. Spawn
// returns once the child has exec'd; the child is the caller's to reap.
func Spawn(o Options, a SpawnArgs) (*os.Process, error) {
	pid, err := spawn(o, a, nil)
	if err != nil {
		return nil, err
	}
	// Our own unreaped child: FindProcess gets a pidfd for it, race-free.
	return os.FindProcess(pid)
}

// spawn is Spawn's C call; with st, the clone takes no namespaces and the
// program execs as a stage (holder.c): st gives fds 4 and 5 and the
// environment entry that tells the stage the namespaces and capabilities.
func spawn(o Options, a SpawnArgs, st *stageArgs) (int, error) {
	var c C.struct_nsbox_spawn
	var frees []unsafe.Pointer
	defer func() {
		for _, p := range frees {
			C.free(p)
		}
	}()
	cstr := func(s string) *C.char {
		p := C.CString(s)
		frees = append(frees, unsafe.Pointer(p))
		return p
	}
	// NUL-terminated arrays of C strings, in C memory: the child reads
	// them while Go's collector may run on other threads.
	cvec := func(ss []string) **C.char {
		n := C.size_t(len(ss) + 1)
		v := (**C.char)(C.calloc(n, C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		frees = append(frees, unsafe.Pointer(v))
		s := unsafe.Slice(v, len(ss)+1)
		for i, x := range ss {
			s[i] = cstr(x)
		}
		return v
	}
	c.path = cstr(a.Path)
	c.argv = cvec(a.Argv)
	env := a.Env
	files := []*os.File{a.Stdin, a.Stdout, a.Stderr, a.Extra, nil, nil}
	c.flags = C.int(CloneFlags(o))
	c.ambient = C.uint64_t(ambientCaps(o))
	if st != nil {
		// The stage clones the namespaces and sets the capabilities (it
		// joins H first); its own clone and exec need neither.
		var e [64]C.char
		if C.nsbox_stage_env(&e[0], C.size_t(len(e)), C.unsigned(c.flags), c.ambient) != 0 {
			return 0, &SpawnError{Step: "stage", Err: syscall.EINVAL}
		}
		env = append(env[:len(env):len(env)], C.GoString(&e[0]))
		files[4], files[5] = st.userns, st.conn
		c.flags, c.ambient = 0, 0
	}
	c.envp = cvec(env)
	for i, f := range files {
		c.fds[i] = -1
		if f != nil {
			c.fds[i] = C.int(f.Fd())
		}
	}
	pid := C.nsbox_spawn(&c)
	// The fds were read by the child; keep their files open until here.
	runtime.KeepAlive(a)
	runtime.KeepAlive(st)
	if pid < 0 {
		step, ok := spawnSteps[c.fail_step]
		if !ok {
			step = fmt.Sprintf("step %d", int(c.fail_step))
		}
		return 0, &SpawnError{Step: step, Err: syscall.Errno(c.fail_errno)}
	}
	return int(pid), nil
}

// workerCaps is NSBOX_WORKER_CAPS (spawn.h), the one list of the
// capabilities the worker keeps across its exec.
const workerCaps = uint64(C.NSBOX_WORKER_CAPS)

// ambientCaps is the ambient set of a non-root worker: workerCaps, or every
// capability the running kernel knows for --allow-privileged (raising one
// it does not know fails).
func ambientCaps(o Options) uint64 {
	if !o.AllCaps {
		return workerCaps
	}
	last := unix.CAP_LAST_CAP
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n >= 0 && n < 64 {
			last = n
		}
	}
	return 1<<(last+1) - 1
}

// cloneFlagsC is NSBOX_CLONE_FLAGS, what a C caller of nsbox_spawn uses;
// a test holds it equal to CloneFlags.
const cloneFlagsC = uintptr(C.NSBOX_CLONE_FLAGS)
