package namespaces

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// MapError is a failed write of a worker's id maps.
type MapError struct {
	File string // "uid_map", "gid_map", "setgroups", or the helper's path
	Err  error
}

func (e *MapError) Error() string { return "write " + e.File + ": " + e.Err.Error() }
func (e *MapError) Unwrap() error { return e.Err }

// WriteMaps writes the id maps of the user namespace of pid, a child of
// this process started by Spawn that has not been reaped (so pid cannot
// name another process). It runs in the parent user namespace, where the
// kernel checks the writer's capabilities (user_namespaces(7), "Defining
// user and group ID mappings"):
//   - ModeSingle: "deny" to setgroups, then one line mapping the caller's
//     own uid and gid, which any user may write for a namespace it created.
//   - ModeFull by root: the lines directly (CAP_SETUID and CAP_SETGID in
//     the parent namespace); setgroups stays "allow".
//   - ModeFull otherwise: newuidmap and newgidmap, which check the lines
//     against /etc/subuid and /etc/subgid, run side by side.
//
// The worker must not yet be non-dumpable (its /proc files would belong to
// root): it turns so only once its handshake has come, after this.
func WriteMaps(pid int, id *Identity) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	if id.Helper {
		// Both run at once, started and then waited for from this one
		// goroutine: a goroutine each made the Go runtime hand a blocked
		// thread over twice as often (~0.17 ms of CPU per start).
		u, err := startHelper(id.NewUIDMap, pid, id.UIDMap)
		if err != nil {
			return err
		}
		g, gerr := startHelper(id.NewGIDMap, pid, id.GIDMap)
		err = u.finish()
		if gerr == nil {
			gerr = g.finish()
		}
		if err == nil {
			err = gerr
		}
		return err
	}
	if id.Mode == ModeSingle {
		// setgroups "deny" before the gid map: the kernel requires it for
		// a map written without CAP_SETGID over the parent namespace, and
		// it stops the sandbox from dropping a supplementary group that a
		// negative ACL relies on (CVE-2014-8989).
		if err := writeProc(dir+"setgroups", "setgroups", []byte("deny")); err != nil {
			return err
		}
	}
	if err := writeProc(dir+"uid_map", "uid_map", mapText(id.UIDMap)); err != nil {
		return err
	}
	return writeProc(dir+"gid_map", "gid_map", mapText(id.GIDMap))
}

// mapText is the text of a map file: one "INSIDE OUTSIDE COUNT" line per
// range, written in a single write(2) as the kernel requires.
func mapText(m []IDRange) []byte {
	var b bytes.Buffer
	for _, r := range m {
		fmt.Fprintf(&b, "%d %d %d\n", r.Inside, r.Outside, r.Count)
	}
	return b.Bytes()
}

func writeProc(path, name string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return &MapError{File: name, Err: underlying(err)}
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return &MapError{File: name, Err: underlying(err)}
	}
	return nil
}

func underlying(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// helper is a running newuidmap or newgidmap: its pid and the read end of
// the pipe its stdout and stderr share.
type helper struct {
	path     string
	pid, out int
}

// startHelper starts newuidmap or newgidmap PID INSIDE OUTSIDE COUNT...
// with an empty environment and /dev/null as stdin. A bare fork and exec
// (syscall.ForkExec: vfork-style, as os/exec's) without os/exec's wrapper
// (its pidfd, its copying goroutine, a context): the supervisor spends
// ~0.15 ms of CPU less per helper, on a start the helpers already make
// ~4 ms longer.
func startHelper(path string, pid int, m []IDRange) (*helper, error) {
	argv := []string{path, strconv.Itoa(pid)}
	for _, r := range m {
		argv = append(argv, strconv.FormatUint(uint64(r.Inside), 10), strconv.FormatUint(uint64(r.Outside), 10), strconv.FormatUint(uint64(r.Count), 10))
	}
	null, err := syscall.Open(os.DevNull, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &MapError{File: path, Err: err}
	}
	defer syscall.Close(null)
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, &MapError{File: path, Err: err}
	}
	// The set-uid helper gets these three as its fds 0-2 (ForkExec dup2s
	// them); every descriptor nsbox opens itself is O_CLOEXEC and stays
	// behind, as it did with os/exec.
	child, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: []string{}, Files: []uintptr{uintptr(null), uintptr(p[1]), uintptr(p[1])}})
	syscall.Close(p[1])
	if err != nil {
		syscall.Close(p[0])
		return nil, &MapError{File: path, Err: err}
	}
	return &helper{path: path, pid: child, out: p[0]}, nil
}

// finish waits for the helper to exit and reaps it; its own message is
// the error on failure.
func (h *helper) finish() error {
	// Its message, until it exits (EOF: the helper held the only write
	// end); a few lines at most, but never more than 4 KiB are kept.
	var out []byte
	buf := make([]byte, 512)
	for {
		n, err := syscall.Read(h.out, buf)
		if n > 0 && len(out) < 4096 {
			out = append(out, buf[:n]...)
		}
		if n == 0 || (err != nil && err != syscall.EINTR) {
			break
		}
	}
	syscall.Close(h.out)
	var ws syscall.WaitStatus
	var err error
	for {
		_, err = syscall.Wait4(h.pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return &MapError{File: h.path, Err: err}
	}
	if ws.Exited() && ws.ExitStatus() == 0 {
		return nil
	}
	status := fmt.Errorf("exit status %d", ws.ExitStatus())
	if ws.Signaled() {
		status = fmt.Errorf("signal: %v", ws.Signal())
	}
	if msg := bytes.TrimSpace(out); len(msg) > 0 {
		return &MapError{File: h.path, Err: fmt.Errorf("%s (%v)", msg, status)}
	}
	return &MapError{File: h.path, Err: status}
}

// SetIdentity is the worker's first step once its maps exist: it takes
// uid and gid of its user namespace on every thread (syscall.Setresuid
// and friends act process-wide). With setgroups allowed the supplementary
// groups are cleared first: a root caller's host groups (kgid 0) would
// otherwise stay in the sandbox's credentials, unmapped but still granting
// access to the host files of those groups. With setgroups denied (the
// single-id map) they stay as they were, shown as the overflow gid, as the
// kernel forces.
func SetIdentity(uid, gid uint32, setgroups bool) error {
	if setgroups {
		// A caller without supplementary groups leaves none to clear:
		// Go applies setgroups on every thread (a stop of the world and
		// a signal per thread, ~0.1-0.2 ms here), which is then skipped.
		// An error reading them clears them all the same.
		if gs, err := syscall.Getgroups(); err != nil || len(gs) > 0 {
			if err := syscall.Setgroups(nil); err != nil {
				return fmt.Errorf("setgroups: %w", err)
			}
		}
	}
	if err := syscall.Setresgid(int(gid), int(gid), int(gid)); err != nil {
		return fmt.Errorf("setresgid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(int(uid), int(uid), int(uid)); err != nil {
		return fmt.Errorf("setresuid %d: %w", uid, err)
	}
	return nil
}
