package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestCommandFilterOpenat2(t *testing.T) {
	f, err := CommandFilter()
	if err != nil {
		t.Skip(err)
	}
	nr, ok := nativeNr(t, "openat2")
	if !ok || nr != openat2Nr {
		t.Fatalf("openat2 is %d (%v) here, want %d", nr, ok, openat2Nr)
	}
	enosys := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	for _, c := range []struct {
		name string
		arch uint32
		want uint32
	}{
		{"openat2", nativeAudit(t), enosys},
		{"openat", nativeAudit(t), retAllow},
		{"read", nativeAudit(t), retAllow},
		// Another ABI is the profile filter's business (it kills it).
		{"openat2", nativeAudit(t) ^ 1, retAllow},
	} {
		n, _ := nativeNr(t, c.name)
		if v := runBPF(t, f.prog, seccompData{nr: n, arch: c.arch}); v != c.want {
			t.Errorf("%s arch %#x -> %s, want %s", c.name, c.arch, verdictString(v), verdictString(c.want))
		}
	}
	// The kernel accepts the program as it is.
	if _, err := FilterFromBytes(f.Bytes()); err != nil {
		t.Fatal(err)
	}
}
