package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Review 50, finding: readers in one process starve the writers of every
// other process. Severity: MEDIUM (a sandbox denies memory and notepad
// writes to every other session and to the user's CLI, for as long as it
// likes).
//
// Attack: a command inside `nsbox mcp` (stdio: every such server shares
// DATA/memory.db and DATA/notepad.db) keeps a few `nsbox call memory list
// '{"limit":1}'` (or notepad.list) loops running at once. Each call is a
// View: in its own process the readers share s.mu (RLock) and each takes
// LOCK_SH on DATA/memory.db.lock. flock(2) has no writer preference: a
// LOCK_SH request is granted whenever no LOCK_EX is held, however long a
// LOCK_EX request has been waiting. With two reads overlapping at every
// moment (a read of a full store takes 100+ ms) the shared lock is never
// free, and every memory.save / memory.delete of another nsbox process
// (another agent's session, `nsbox memory delete KEY` of the user trying
// to remove what the sandbox planted) waits its 10 s and fails with
// "store ... is locked by another process". In one process the RWMutex
// prefers the writer; across processes nothing does.
//
// The test: a second process (this test binary) runs a chain of Views,
// each of which reads for 50 ms, then starts the next and ends only once
// the next has begun (or after 500 ms): 60 links, about 3 s of reading in
// which some read is always in progress. While it runs, this process
// writes with a 2 s lock timeout. Today the write fails with ErrBusy.
// With a lock that lets no new reader in while a writer waits, the chain's
// next link blocks, the current one gives up waiting after 500 ms, and the
// write goes through.
func TestReview50ReadersStarveWritersOfOtherProcesses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.db")
	put(t, newStore(t, path), "k", "v")
	ready := filepath.Join(dir, "reading")

	cmd := exec.Command(os.Args[0], "-test.run=^TestReview50ReaderChainHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), review50ReaderEnv+"="+path+"|"+ready)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	// Wait until the other process is reading.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reader process never started reading:\n%s", out.String())
		}
	}
	w, err := New(path, "test", Options{LockTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Update(context.Background(), func(tx *Tx) error { return tx.Put("b", "k", []byte("w")) })
	if errors.Is(err, ErrBusy) {
		t.Fatalf("a writer waited its whole lock timeout while another process read without a break: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

const review50ReaderEnv = "NSBOX_STORE_REVIEW50_READERS"

// TestReview50ReaderChainHelper is the reading process of
// TestReview50ReadersStarveWritersOfOtherProcesses.
func TestReview50ReaderChainHelper(t *testing.T) {
	spec := os.Getenv(review50ReaderEnv)
	if spec == "" {
		t.Skip("helper for TestReview50ReadersStarveWritersOfOtherProcesses")
	}
	path, ready, _ := strings.Cut(spec, "|")
	s, _ := New(path, "test", Options{LockTimeout: 30 * time.Second})
	const links = 60
	entered := make([]chan struct{}, links+1)
	for i := range entered {
		entered[i] = make(chan struct{})
	}
	close(entered[links]) // the last link waits for no one
	done := make(chan error, links)
	var link func(i int)
	link = func(i int) {
		done <- s.View(context.Background(), func(tx *Tx) error {
			close(entered[i])
			if i == 0 {
				os.WriteFile(ready, nil, 0o600)
			}
			time.Sleep(50 * time.Millisecond)
			if i+1 < links {
				go link(i + 1)
			}
			select {
			case <-entered[i+1]:
			case <-time.After(500 * time.Millisecond):
			}
			tx.Get("b", "k")
			return nil
		})
	}
	go link(0)
	for i := 0; i < links; i++ {
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
	}
}

// Review 50, finding: --move-corrupt-aside moves a healthy store aside.
// Severity: LOW (what was saved since is out of sight, in
// NAME.corrupt-TIMESTAMP, not gone; needs two processes and a replaced
// file).
//
// Attack/race: an operation finds the store corrupt and returns from its
// transaction, releasing the lock; afterCorrupt then takes the writers'
// lock again and renames whatever is at the store's name, without
// checking that it is still the file found corrupt. In between, another
// `nsbox memory --move-corrupt-aside` moved the damaged file away and a
// session's memory.save started a new store (or the user put a backup
// back): that healthy store is renamed to memory.db.corrupt-… and the
// sessions' next reads find nothing.
//
// The test runs the interleaving in order: the failed operation, the
// file replaced by a healthy store, then the move-aside step.
func TestReview50MoveAsideTakesAHealthyStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.db")
	img, _, _ := faultStore(t)
	if err := os.WriteFile(path, img[:len(img)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(path, "test", Options{MoveAsideCorrupt: true})
	if err != nil {
		t.Fatal(err)
	}
	// 1. The operation finds the file corrupt (the lock is released when
	// it returns).
	opErr := s.view(context.Background(), func(*Tx) error { return nil })
	if !errors.Is(opErr, ErrCorrupt) {
		t.Fatalf("view: %v, want corrupt", opErr)
	}
	// 2. Meanwhile another process moves it aside and a new store is
	// written.
	if err := os.Rename(path, path+".elsewhere"); err != nil {
		t.Fatal(err)
	}
	put(t, newStore(t, path), "k", "saved after the move")
	// 3. The first operation's move-aside step.
	err = s.afterCorrupt(opErr)
	var ce *CorruptError
	if errors.As(err, &ce) && ce.MovedTo != "" {
		if got := get(t, newStore(t, ce.MovedTo), "k"); got == "saved after the move" {
			t.Fatalf("a healthy store was moved aside as corrupt to %s (it holds what was saved after the damaged file was gone)", ce.MovedTo)
		}
	}
	if got := get(t, newStore(t, path), "k"); got != "saved after the move" {
		t.Fatalf("the healthy store is gone from %s: got %q", path, got)
	}
}
