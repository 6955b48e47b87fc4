package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReview26WalkHoldsEveryLevelsNames
//
// Severity: MEDIUM (host memory exhaustion from inside a memory-limited
// sandbox).
//
// Weakness: the worker that serves the tools is PID 1 of the sandbox and is
// not in its memory cgroup (walk.go: "what a walk holds must not depend on
// what the workspace holds"). The ignore files of a walk are bounded per
// walk, but the directory names are not: walker.dir (pkg/tools/walk.go)
// reads up to maxDirNames (100,000) names of a directory into a slice and
// keeps that slice while it descends into each child, so a depth-first walk
// holds maxWalkDepth (64) x 100,000 names at once: 6.4 million names of up
// to 255 bytes, about 1.7 GB in the worker, whatever --memory says.
//
// Attack: a command inside (under --memory 64M) builds a chain of
// directories "a/a/a/...", each holding 100,000 hard links (no inode, no
// data: only directory entries on the workspace's disk) with 250-byte names
// that a .gitignore pattern ignores, so that no entry is reported and
// max_entries never stops the walk; then any list_directory or
// search_files the agent (or its model) runs over the workspace makes the
// worker hold every level's names at once. Eight levels are used here
// (~220 MB held); 64 are allowed.
//
// Fixed when a walk bounds the names it holds across all its levels (as it
// does for ignore patterns), not per directory.
func TestReview26WalkHoldsEveryLevelsNames(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 800,000 directory entries")
	}
	const (
		levels  = 8
		perDir  = maxDirNames
		nameLen = 250
	)
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	src := filepath.Join(base, "src")
	for _, d := range []string{ws, src} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(ws, ".gitignore"), "x*\n")
	// Hard link sources: ext4 allows 65,000 links per inode.
	var srcs []string
	for i := 0; i*60000 < levels*perDir; i++ {
		p := filepath.Join(src, fmt.Sprintf("s%d", i))
		mustWrite(t, p, "")
		srcs = append(srcs, p)
	}
	pad := strings.Repeat("p", nameLen-12)
	var made atomic.Int64
	dir := ws
	var wg sync.WaitGroup
	errs := make(chan error, levels)
	for l := 0; l < levels; l++ {
		dir = filepath.Join(dir, "a")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(dir string, l int) {
			defer wg.Done()
			for i := 0; i < perDir; i++ {
				n := made.Add(1)
				if err := os.Link(srcs[n/60000], filepath.Join(dir, fmt.Sprintf("x%s%011d", pad, i))); err != nil {
					errs <- err
					return
				}
			}
		}(dir, l)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("making the tree: %v", err)
	}
	if made.Load() != levels*perDir {
		t.Fatalf("made %d links", made.Load())
	}

	// The peak of the heap while the call runs.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	res := call(t, NewBuiltinRegistry(), &hostEnv{ws: ws}, "list_directory", `{"recursive":true}`)
	close(stop)
	<-done
	if !res.Success {
		t.Fatal(errText(res))
	}
	held := int64(peak.Load()) - int64(before)
	t.Logf("list_directory listed %d entries; heap grew by %d MiB at its peak", len(listPaths(t, res)), held>>20)
	if held > 100<<20 {
		t.Errorf("one list_directory made the worker hold %d MiB: %d levels of %d names (%d bytes each) were all held at once; a walk may hold 64 levels (~1.7 GB), outside the sandbox's memory limit",
			held>>20, levels, perDir, nameLen)
	}
}
