package sandbox

import (
	"bufio"
	"encoding/binary"
	"os"
	"os/exec"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

const faultSigChild = "NSBOX_FAULTSIG_CHILD"

// TestFilterFaultSignals: behind faultsig.c's filter a real fault still
// reaches the Go runtime (a nil dereference panics and is recovered),
// while SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT and SIGSYS sent
// by another process, with kill(2) or with sigqueue(3), are dropped. A Go
// program without the filter dies of the first one (checked: the child
// dies when the filter is not installed).
func TestFilterFaultSignals(t *testing.T) {
	if os.Getenv(faultSigChild) == "1" {
		if err := filterFaultSignals(); err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		recovered := func() (ok bool) {
			defer func() { ok = recover() != nil }()
			var p *int
			return *p == 1
		}()
		if !recovered {
			os.Exit(2)
		}
		os.Stdout.WriteString("ready\n")
		bufio.NewReader(os.Stdin).ReadString('\n')
		os.Stdout.WriteString("survived\n")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFilterFaultSignals$")
	cmd.Env = append(os.Environ(), faultSigChild+"=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "ready" {
		cmd.Wait()
		t.Fatalf("child: %q (a real fault did not panic behind the filter?)", out.Text())
	}
	pid := cmd.Process.Pid
	for _, sig := range []unix.Signal{unix.SIGSEGV, unix.SIGBUS, unix.SIGFPE, unix.SIGILL, unix.SIGTRAP, unix.SIGABRT, unix.SIGSYS} {
		if err := unix.Kill(pid, sig); err != nil {
			t.Fatal(err)
		}
		// sigqueue(3): rt_sigqueueinfo with SI_QUEUE, which the Go
		// runtime does not count as sent by a program.
		var info [128]byte
		binary.LittleEndian.PutUint32(info[0:], uint32(sig))
		binary.LittleEndian.PutUint32(info[8:], uint32(0xffffffff)) // SI_QUEUE (-1)
		binary.LittleEndian.PutUint32(info[16:], uint32(os.Getpid()))
		binary.LittleEndian.PutUint32(info[20:], uint32(os.Getuid()))
		if _, _, e := unix.Syscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(pid), uintptr(sig), uintptr(unsafe.Pointer(&info[0]))); e != 0 {
			t.Fatal(e)
		}
	}
	stdin.Write([]byte("go\n"))
	if !out.Scan() || out.Text() != "survived" {
		err := cmd.Wait()
		t.Fatalf("the child did not survive signals sent to it: %q, %v", out.Text(), err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}
