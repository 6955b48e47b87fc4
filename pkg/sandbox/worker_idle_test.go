package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mappingRss is the Rss of the mapping that starts at addr, from
// /proc/self/smaps, in kB (-1: no such mapping).
func mappingRss(t *testing.T, addr uintptr) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	prefix := strconv.FormatUint(uint64(addr), 16) + "-"
	in := false
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 5 && strings.Contains(f[0], "-") && len(f[1]) == 4 {
			in = strings.HasPrefix(l, prefix)
			continue
		}
		if in && strings.HasPrefix(l, "Rss:") {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			return n
		}
	}
	return -1
}

// TestIdleReleaseKeepsPrivateData: the idle release (idlerelease.c) drops
// a clean read-only file mapping, whose pages read back the same from the
// page cache, and leaves alone what holds data of this process only: a
// writable private mapping with a changed page, and a read-only one with a
// private page (written, then made read-only, as a loader does with a
// relocated segment). MADV_DONTNEED on either would throw the change away.
func TestIdleReleaseKeepsPrivateData(t *testing.T) {
	const size = 4 * 4096
	content := bytes.Repeat([]byte("nsbox idle release "), size/19+1)[:size]
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mmap := func(prot int) []byte {
		b, err := unix.Mmap(int(f.Fd()), 0, size, prot, unix.MAP_PRIVATE)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(b) })
		return b
	}
	clean := mmap(unix.PROT_READ)
	writable := mmap(unix.PROT_READ | unix.PROT_WRITE)
	relocated := mmap(unix.PROT_READ | unix.PROT_WRITE)
	writable[100] = 'W'
	relocated[200] = 'R'
	if err := unix.Mprotect(relocated, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	var sum byte
	for i := 0; i < size; i += 4096 {
		sum += clean[i] // fault every page in
	}
	if sum == 0 {
		t.Log("(sum keeps the reads)")
	}
	addr := func(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
	if rss := mappingRss(t, addr(clean)); rss <= 0 {
		t.Fatalf("the clean mapping is not resident before the release (Rss %d kB): the test cannot see a release", rss)
	}

	if n := releaseNow(); n == 0 {
		t.Fatal("nothing released")
	}
	if rss := mappingRss(t, addr(clean)); rss != 0 {
		t.Errorf("clean read-only mapping: Rss %d kB after the release, want 0", rss)
	}
	if !bytes.Equal(clean, content) {
		t.Error("the clean mapping reads back different bytes")
	}
	if writable[100] != 'W' {
		t.Error("a writable private mapping lost its change")
	}
	if relocated[200] != 'R' {
		t.Error("a read-only mapping with a private page lost it")
	}
	want := append([]byte(nil), content...)
	want[100] = 'W'
	if !bytes.Equal(writable, want) {
		t.Error("the writable mapping reads back different bytes")
	}
}

// TestIdleReleaseThenExec: a worker told it waits unused (typeIdle, what a
// Pool sends) unmaps its binary's pages (its RssFile falls), and then
// serves commands as before.
func TestIdleReleaseThenExec(t *testing.T) {
	s := startFakeWorkerSession(t)
	s.notifyIdle()
	rssFile := func() int {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(s.Pid()) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "RssFile:") {
				n, _ := strconv.Atoi(strings.Fields(l)[1])
				return n
			}
		}
		t.Fatal("no RssFile")
		return 0
	}
	st, err := os.Stat(os.Args[0]) // the helper worker's binary
	if err != nil {
		t.Fatal(err)
	}
	// Its start maps most of the binary; released, a small part is
	// mapped again by what the worker runs after. Bounded wait (a guard,
	// not a timing assertion).
	limit := int(st.Size() / 1024 / 4)
	rss := rssFile()
	for deadline := time.Now().Add(30 * time.Second); rss >= limit && time.Now().Before(deadline); {
		time.Sleep(idleRelease)
		rss = rssFile()
	}
	if rss >= limit {
		t.Errorf("RssFile %d kB, want under a quarter of the %d kB binary: the idle worker released nothing", rss, st.Size()/1024)
	}
	for i := 0; i < 3; i++ {
		res, err := s.Exec(context.Background(), Command{Argv: []string{"/bin/sh", "-c", "echo ok"}})
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "ok\n" {
			t.Fatalf("Exec after the release: %v %+v", err, res)
		}
	}
}
