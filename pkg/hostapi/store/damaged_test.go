package store

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Helpers of the store checker's review tests (43 to 47), which build
// files bbolt would crash on and read them in a child process.

// putLoopBranch writes at p a branch page numbered id with one element,
// the key k, whose child is the page itself: bbolt recurses on it until
// its stack overflows, which no recover() catches.
func putLoopBranch(p []byte, id uint64, k byte) {
	ne.PutUint64(p[0:], id)
	ne.PutUint16(p[8:], flagBranch)
	ne.PutUint16(p[10:], 1)
	e := p[pageHeaderSize:]
	ne.PutUint32(e[0:], elementSize) // the key right after the element
	ne.PutUint32(e[4:], 1)
	ne.PutUint64(e[8:], id) // its child: itself
	p[pageHeaderSize+elementSize] = k
}

// appendLoopPage returns a copy of img cut to whole pages (the page size
// of its meta 0) with a self-looping branch page appended, that page's
// id, and the page size.
func appendLoopPage(img []byte) ([]byte, uint64, int) {
	ps := int(ne.Uint32(img[pageHeaderSize+8:]))
	img = bytes.Clone(img[:len(img)/ps*ps])
	id := uint64(len(img) / ps)
	pg := make([]byte, ps)
	putLoopBranch(pg, id, 'a')
	return append(img, pg...), id, ps
}

// sealMeta writes the checksum of the meta body m as bbolt computes it.
func sealMeta(m []byte) { ne.PutUint64(m[metaChecksumOff:], metaChecksum(m)) }

// readInChild writes the file img() makes as a store and reads it through
// the store in a child process (this test again, with env naming the
// file): a crash there is fatal, so the test fails when the child dies,
// and passes when the read ends with data or an error.
func readInChild(t *testing.T, env string, img func() []byte) {
	if p := os.Getenv(env); p != "" {
		s, err := New(p, "test", Options{})
		if err != nil {
			t.Logf("open: %v", err)
			return
		}
		_, err = readAll(s)
		t.Logf("read: %v", err)
		return
	}
	path := filepath.Join(t.TempDir(), "d.db")
	if err := os.WriteFile(path, img(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+path, "GOMAXPROCS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		first := string(out)
		if i := strings.Index(first, "\n\n"); i > 0 {
			first = first[:i]
		}
		t.Errorf("reading the store killed the process (%v): %s", err, first)
	} else {
		t.Logf("child: %s", out)
	}
}
