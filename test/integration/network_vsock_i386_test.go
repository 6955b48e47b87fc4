//go:build amd64

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// vsockI386C makes socket(AF_VSOCK) with the i386 ABI's direct socket
// call (nr 359, int $0x80 from a 64-bit program), which needs no 32-bit
// library. No connect is made.
const vsockI386C = `
#include <stdio.h>
int main(void) {
	long ret;
	__asm__ volatile ("int $0x80" : "=a"(ret) : "a"(359L), "b"(40L), "c"(1L), "d"(0L) : "memory");
	if (ret >= 0) printf("vsock created\n"); else printf("vsock %ld\n", -ret);
	return 0;
}
`

// TestNetworkFilteredRefusesVsockI386: the notification filter refused
// socket(AF_VSOCK) natively and in x32, but let the i386 ABI's direct
// socket(2) (359) through, and under --seccomp unconfined there is no main
// filter: a 64-bit program reached it with int $0x80 ("vsock created";
// found by review). The i386 socket(2) is now refused too, and the Server
// refuses every call on a vsock socket.
func TestNetworkFilteredRefusesVsockI386(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not installed: the test builds its i386-call program with it")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "v.c")
	if err := os.WriteFile(src, []byte(vsockI386C), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "vsock386")
	if out, err := exec.Command(cc, "-static", "-O1", "-o", bin, src).CombinedOutput(); err != nil {
		t.Skipf("cannot build the program: %v\n%s", err, out)
	}
	out, _ := exec.Command(bin).Output()
	if strings.TrimSpace(string(out)) != "vsock created" {
		t.Skipf("on the host, outside nsbox, the i386 socket(AF_VSOCK) gives %q (no IA-32 emulation or no vsock): nothing to test", out)
	}
	eachUser(t, func(t *testing.T, u user) {
		_, _, ws, prof, port := filteredRig(t, u)
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		prog := filepath.Join(ws, "vsock386")
		u.writeFile(t, prog, string(b), 0o755)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--seccomp", "unconfined",
			"--allow-host", "good.test:"+port, "--", prog)
		got := netResults(r.stdout)["vsock"]
		if got == "" {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		if got == "created" {
			t.Errorf("under a filtered network with --seccomp unconfined, the i386 socket(AF_VSOCK) succeeds: the family the fix refuses is still reachable")
		}
	})
}
