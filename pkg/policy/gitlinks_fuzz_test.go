package policy

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// FuzzGitlinks gives gitlinks any index file (go test -run '^$' -fuzz
// FuzzGitlinks ./pkg/policy): an index in a writable directory is the
// sandbox's to write, and it is read on the host, before a run and in the
// audit after one. No input may panic, and every path returned is one of
// the index's entries (here: no longer than the file).
func FuzzGitlinks(f *testing.F) {
	entry := func(version int, name string, drop byte) []byte {
		e := make([]byte, 40+20+2)
		binary.BigEndian.PutUint32(e[24:], 0o160000)
		binary.BigEndian.PutUint16(e[60:], uint16(len(name)))
		if version == 4 {
			e = append(e, drop)
			return append(append(e, name...), 0)
		}
		e = append(e, name...)
		pad := 8 - (len(e) % 8)
		return append(e, make([]byte, pad)...)
	}
	index := func(version int, entries ...[]byte) []byte {
		b := []byte("DIRC")
		b = binary.BigEndian.AppendUint32(b, uint32(version))
		b = binary.BigEndian.AppendUint32(b, uint32(len(entries)))
		for _, e := range entries {
			b = append(b, e...)
		}
		return b
	}
	f.Add(index(2, entry(2, "lib/a", 0), entry(2, "lib/b", 0)))
	f.Add(index(4, entry(4, "lib/a", 0), entry(4, "b", 1)))
	// A drop count as long as the varint allows, which overflowed into
	// a negative count.
	over := index(4, entry(4, "lib/a", 0))
	over = binary.BigEndian.AppendUint32(over[:8], 2)[:12]
	over = append(over, entry(4, "lib/a", 0)...)
	e := make([]byte, 40+20+2)
	binary.BigEndian.PutUint32(e[24:], 0o160000)
	e = append(e, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)
	over = append(append(over, e...), "x\x00"...)
	f.Add(over)
	dir := f.TempDir()
	path := filepath.Join(dir, "index")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, sha256 := range []bool{false, true} {
			for _, l := range gitlinks(path, sha256) {
				if len(l) > len(b) {
					t.Fatalf("a path of %d bytes from an index of %d", len(l), len(b))
				}
			}
		}
	})
}
