package notify

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Review 35: the metadata gate's container fallback (commit 694374a:
// Server.metaFD opens a command's fd N through /proc/TID/fd/N and reads
// its open flags from /proc/TID/fdinfo/N; readMem falls back to
// readProcMem, /proc/TID/mem). Each test below fails on the code it was
// written against and passes once the weakness it names is fixed. The
// fallback is forced as TestMetaGateWithoutPidfdGetfd forces it
// (pidfdGetfd and processVMReadv answer EPERM, as a container runtime's
// default seccomp profile makes them); each test also runs its scenario
// with the real calls, which must (and do) pass, to show the failure is
// the fallback's.

// review35Fallback makes pidfd_getfd and process_vm_readv fail with EPERM
// for the rest of the test, as containerd's and moby's default profiles
// do without CAP_SYS_PTRACE.
func review35Fallback(t *testing.T) {
	t.Helper()
	saved, savedRead := pidfdGetfd, processVMReadv
	pidfdGetfd = func(int, int, int) (int, error) { return -1, unix.EPERM }
	processVMReadv = func(int, []unix.Iovec, []unix.RemoteIovec, uint) (int, error) { return 0, unix.EPERM }
	t.Cleanup(func() { pidfdGetfd, processVMReadv = saved, savedRead })
}

// review35EachReader runs fn twice: with the gate's first way of reading
// the command's fds and memory (named first), and with the /proc
// fallback a container runtime's seccomp profile leaves it.
func review35EachReader(t *testing.T, first string, fn func(t *testing.T)) {
	t.Run(first, fn)
	t.Run("proc-fallback", func(t *testing.T) {
		review35Fallback(t)
		fn(t)
	})
}

// review35Run runs child mode under a metadata gate that lets rw be
// written, and returns the child's "key value" lines.
func review35Run(t *testing.T, mode, rw string, args ...string) map[string]string {
	t.Helper()
	if err := MetaSupported(); err != nil {
		t.Skip(err)
	}
	o := Options{Meta: NewMetaGate([]MetaInode{inodeOf(t, rw)}, nil)}
	cmd := childCmd(t, mode, append([]string{rw}, args...), nil)
	cmd.Env = append(cmd.Env, metaEnv+"=1")
	stdin, out := startGateChild(t, cmd, GateConfig{}, o)
	stdin.Write([]byte("go\n"))
	res := map[string]string{}
	for out.Scan() {
		var k, v string
		fmt.Sscanf(out.Text(), "%s %s", &k, &v)
		res[k] = v
	}
	cmd.Wait()
	return res
}

func init() {
	// review35-opath-race: fd 200 is, in turn, an O_PATH descriptor of
	// rw/p and no descriptor at all (another thread dup3s and closes it
	// in a loop), while this thread makes fchmod(200, 0644) again and
	// again. The kernel answers every one EBADF: fchmod refuses an
	// O_PATH descriptor (fdget skips it), and a closed number is no
	// descriptor. rw/p's mode must stay 0600.
	childModes["review35-opath-race"] = func(args []string, _ *bufio.Reader) int {
		p := filepath.Join(args[0], "p")
		opath, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		const n = 200
		var stop atomic.Bool
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			for !stop.Load() {
				unix.Dup3(opath, n, 0)
				unix.Close(n)
			}
			close(done)
		}()
		ok := 0
		for i := 0; i < 20000; i++ {
			if _, _, e := unix.Syscall(unix.SYS_FCHMOD, n, 0o644, 0); e == 0 {
				ok++
			}
		}
		stop.Store(true)
		<-done
		fmt.Println("fchmod-ok", ok)
		return 0
	}
	// review35-protnone: chmod(2) of rw/f, whose path lies in a page the
	// program mapped PROT_NONE. The kernel cannot read the path
	// (getname: copy_from_user fails): EFAULT, and rw/f stays 0600.
	childModes["review35-protnone"] = func(args []string, _ *bufio.Reader) int {
		p := filepath.Join(args[0], "f")
		mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		copy(mem, p+"\x00")
		if err := unix.Mprotect(mem, unix.PROT_NONE); err != nil {
			fmt.Println("error", err)
			return 1
		}
		r := "ok"
		atFDCWD := unix.AT_FDCWD
		if _, _, e := unix.Syscall6(unix.SYS_FCHMODAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(&mem[0])), 0o640, 0, 0, 0); e != 0 {
			r = errName(e)
		}
		fmt.Println("chmod", r)
		return 0
	}
}

// TestReview35FdinfoFlagsRaceFailsOpen
//
// Severity: LOW (the kernel's answer not kept: a change made through a
// descriptor the kernel refuses; the file still has to pass the gate's
// writable check, so no file outside the writable places is reached).
//
// Weakness: in the /proc fallback, Server.metaFD opens the target's fd N
// (/proc/TID/fd/N) and, in a second step, reads whether that fd is an
// O_PATH one from /proc/TID/fdinfo/N (fdinfoFlags). The two reads are of
// whatever fd N is at each moment: another thread of the command can
// replace or close fd N in between. And fdinfoFlags fails open: a
// fdinfo it cannot open or parse (ENOENT once fd N is closed) is flags
// 0, "not O_PATH". With pidfd_getfd the gate read F_GETFL of the very
// file it took, so the check could not be split.
//
// Attack: one thread makes fd N an O_PATH descriptor of rw/p and closes
// it in a loop; another calls fchmod(N, 0644). The kernel answers every
// call EBADF (an O_PATH descriptor or none). Under the fallback some
// calls pass: fd/N is opened while N is rw/p's O_PATH descriptor, fdinfo/N
// is read once it is closed, and rw/p is made 0644.
//
// Fix: fail closed: a fdinfo that cannot be read or has no parsable
// "flags:" line is EBADF (or ESRCH), never "not O_PATH"; and tie the two
// reads to one file: read fdinfo/N before and after the open and require
// the same "ino:" and "mnt_id:" lines as the opened descriptor's statx
// (STATX_INO, STATX_MNT_ID), else retry or answer EBADF.
func TestReview35FdinfoFlagsRaceFailsOpen(t *testing.T) {
	review35EachReader(t, "pidfd_getfd", func(t *testing.T) {
		rw, _ := metaTree(t)
		p := filepath.Join(rw, "p")
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		res := review35Run(t, "review35-opath-race", rw)
		if res["fchmod-ok"] == "" {
			t.Fatalf("the child did not run: %v", res)
		}
		if res["fchmod-ok"] != "0" {
			t.Errorf("%s fchmod calls on an fd that was an O_PATH descriptor or none succeeded (the kernel answers EBADF to each)", res["fchmod-ok"])
		}
		if m := modeOf(t, p); m != 0o600 {
			t.Errorf("rw/p mode %o, want 600: a fchmod through its O_PATH descriptor was made", m)
		}
	})
}

// TestReview35ProcMemReadsProtNone
//
// Severity: LOW (the kernel's answer not kept: a chmod whose path the
// kernel cannot read is made).
//
// Weakness: readProcMem reads the target's memory through /proc/TID/mem,
// which reads with FOLL_FORCE (proc(5); mem_rw, with the default
// proc_mem.force_override=always): pages the target mapped PROT_NONE (a
// guard page, memory a program protects from itself) are read as if
// readable. process_vm_readv, the first choice, and the kernel's own
// getname (copy_from_user) honour the protection and fail with EFAULT. So
// under the fallback the gate performs calls the kernel would refuse with
// EFAULT, reading memory the program itself cannot.
//
// Attack: chmod(2) of a workspace file whose path string lies in a
// PROT_NONE page: EFAULT from the kernel; the fallback reads the path
// and makes the chmod.
//
// Fix: before a read through /proc/TID/mem, check the range lies in
// mappings the target may read (the "r" bit of the /proc/TID/maps lines
// covering it, read through c.proc.dir), else EFAULT; or read with a
// method without FOLL_FORCE.
func TestReview35ProcMemReadsProtNone(t *testing.T) {
	review35EachReader(t, "process_vm_readv", func(t *testing.T) {
		rw, _ := metaTree(t)
		res := review35Run(t, "review35-protnone", rw)
		if res["chmod"] != "EFAULT" {
			t.Errorf("chmod with its path in a PROT_NONE page: %q, want EFAULT (the kernel cannot read the path)", res["chmod"])
		}
		if m := modeOf(t, filepath.Join(rw, "f")); m != 0o600 {
			t.Errorf("rw/f mode %o, want 600 (unchanged)", m)
		}
	})
}
