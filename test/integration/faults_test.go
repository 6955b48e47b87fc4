package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Fault injection (issue 21): damaged stores, killing seccomp profiles,
// killed supervisors and small contract gaps never crash, hang or leak.
// The byte-level damage of stores (every 5 % truncation, flipped bytes in
// headers, meta and data pages) is covered by pkg/hostapi/store's
// TestTruncatedStoreNeverCrashes and TestFlippedBytesNeverCrash; here the
// CLI's side of it.

// noCrash fails when nsbox's output shows a Go crash.
func noCrash(t *testing.T, r result) {
	t.Helper()
	for _, s := range []string{"goroutine ", "SIGSEGV", "SIGBUS", "panic:", "fatal error:"} {
		if strings.Contains(r.stderr, s) {
			t.Fatalf("nsbox crashed (%q in its output): exit %d\n%s", s, r.code, r.stderr)
		}
	}
}

func TestFaultsTruncatedStore(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			src := u.tempDir(t)
			seedStores(t, src)
			chownTree(t, src, u)
			for _, name := range []string{"notepad.db", "memory.db"} {
				img, err := os.ReadFile(filepath.Join(src, name))
				if err != nil {
					t.Fatal(err)
				}
				cmd := strings.TrimSuffix(name, ".db")
				whole := u.run(t, nil, cmd, "list", "--data-dir", src)
				expectCode(t, whole, 0)
				for pct := 10; pct <= 95; pct += 5 {
					d := filepath.Join(u.tempDir(t), "data")
					os.Mkdir(d, 0o700)
					path := filepath.Join(d, name)
					os.WriteFile(path, img[:len(img)*pct/100], 0o600)
					chownTree(t, d, u)
					r := u.run(t, nil, cmd, "list", "--data-dir", d)
					noCrash(t, r)
					// bbolt grows its file ahead of use: a cut that keeps every
					// page in use loses nothing and must read the same.
					intact := r.code == 0 && r.stdout == whole.stdout
					if !intact && (r.code != 1 || !strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, "unreadable")) {
						t.Fatalf("%s truncated to %d%%: exit %d, want 1 and an error naming the file\n%s", name, pct, r.code, r.stderr)
					}
					if pct != 10 {
						continue
					}
					// Asked to, nsbox moves the file aside and the store
					// starts anew.
					r = u.run(t, nil, cmd, "list", "--data-dir", d, "--move-corrupt-aside")
					noCrash(t, r)
					moved, _ := filepath.Glob(path + ".corrupt-*")
					if r.code != 1 || len(moved) != 1 || !strings.Contains(r.stderr, moved[0]) {
						t.Fatalf("--move-corrupt-aside: exit %d, moved %v\n%s", r.code, moved, r.stderr)
					}
					expectCode(t, u.run(t, nil, cmd, "list", "--data-dir", d), 0)
				}
			}
		})
	}
}

var _ = fmt.Sprintf
