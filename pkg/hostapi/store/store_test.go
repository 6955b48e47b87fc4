package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func newStore(t *testing.T, path string) *Store {
	t.Helper()
	s, err := New(path, "test", Options{LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func put(t *testing.T, s *Store, key, val string) {
	t.Helper()
	err := s.Update(context.Background(), func(tx *Tx) error { return tx.Put("b", key, []byte(val)) })
	if err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, s *Store, key string) string {
	t.Helper()
	var v []byte
	if err := s.View(context.Background(), func(tx *Tx) error { v = tx.Get("b", key); return nil }); err != nil {
		t.Fatal(err)
	}
	return string(v)
}

func TestCreatesPrivateDirAndFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "share", "nsbox")
	s := newStore(t, filepath.Join(dir, "x.db"))
	// Reading creates nothing.
	if got := get(t, s, "k"); got != "" {
		t.Fatalf("empty store returned %q", got)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a read created %s (%v)", dir, err)
	}
	put(t, s, "k", "v")
	if got := get(t, s, "k"); got != "v" {
		t.Fatalf("got %q, want v", got)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	fi, err = os.Stat(s.Path())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("store file mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}

func TestTightensOpenPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nsbox")
	os.Mkdir(dir, 0o755)
	os.Chmod(dir, 0o755)
	s := newStore(t, filepath.Join(dir, "x.db"))
	put(t, s, "k", "v")
	os.Chmod(s.Path(), 0o644)
	put(t, s, "k", "v2")
	for path, want := range map[string]os.FileMode{dir: 0o700, s.Path(): 0o600} {
		if fi, _ := os.Stat(path); fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
}

func sum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func TestCorruptFileIsReportedAndKept(t *testing.T) {
	cases := map[string]func(path string) error{
		"garbage": func(p string) error {
			return os.WriteFile(p, bytes.Repeat([]byte("not a database\n"), 2000), 0o600)
		},
		"short": func(p string) error { return os.WriteFile(p, []byte("xyz"), 0o600) },
		"truncated": func(p string) error {
			return os.WriteFile(p, bytes.Repeat([]byte("garbage "), 1000), 0o600)
		},
		"damaged meta": func(p string) error {
			s, _ := New(p, "test", Options{})
			if err := s.Update(context.Background(), func(tx *Tx) error { return tx.Put("b", "k", []byte("v")) }); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			// Both meta pages (pages 0 and 1) get garbage in their body.
			for _, off := range []int64{16, 4096 + 16} {
				if _, err := f.WriteAt(bytes.Repeat([]byte{0xAB}, 64), off); err != nil {
					return err
				}
			}
			return nil
		},
		"other program's bbolt file": func(p string) error {
			db, err := bolt.Open(p, 0o600, nil)
			if err != nil {
				return err
			}
			defer db.Close()
			return db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("theirs"))
				if err != nil {
					return err
				}
				return b.Put([]byte("a"), []byte("b"))
			})
		},
		"store of another kind": func(p string) error {
			s, _ := New(p, "othertype", Options{})
			return s.Update(context.Background(), func(tx *Tx) error { return tx.Put("b", "k", []byte("v")) })
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			if err := mk(path); err != nil {
				t.Fatal(err)
			}
			before := sum(t, path)
			s := newStore(t, path)
			for _, op := range []string{"view", "update"} {
				var err error
				if op == "view" {
					err = s.View(context.Background(), func(*Tx) error { return nil })
				} else {
					err = s.Update(context.Background(), func(tx *Tx) error { return tx.Put("b", "k", []byte("v")) })
				}
				var ce *CorruptError
				if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
					t.Fatalf("%s: err = %v, want a *CorruptError", op, err)
				}
				if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "left untouched") {
					t.Fatalf("%s: error does not name the file: %v", op, err)
				}
				t.Logf("%s: %v", op, err)
			}
			if sum(t, path) != before {
				t.Fatal("the corrupt store file was modified")
			}
		})
	}
}

func TestRefusesSymlinkAndFIFO(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "victim")
	os.WriteFile(target, nil, 0o600)
	link := filepath.Join(dir, "link.db")
	os.Symlink(target, link)
	err := newStore(t, link).Update(context.Background(), func(tx *Tx) error { return tx.Put("b", "k", []byte("v")) })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("symlink: err = %v", err)
	}
	if fi, _ := os.Stat(target); fi.Size() != 0 {
		t.Fatal("the store wrote through a symlink")
	}
	fifo := filepath.Join(dir, "fifo.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() { done <- newStore(t, fifo).View(context.Background(), func(*Tx) error { return nil }) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("fifo: err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("opening a FIFO store blocked")
	}
}

func TestBusyWhenAnotherHolderKeepsTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	s, _ := New(path, "test", Options{LockTimeout: 300 * time.Millisecond})
	put(t, s, "k", "v")
	// Another holder (here a raw bbolt handle, as another process would
	// be) keeps the exclusive lock.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = s.Update(context.Background(), func(tx *Tx) error { return tx.Put("b", "k", []byte("w")) })
	var be *BusyError
	if !errors.As(err, &be) || !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want a *BusyError naming the file", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("waited %s for a 300ms timeout", d)
	}
	db.Close()
	put(t, s, "k", "w")
	if got := get(t, s, "k"); got != "w" {
		t.Fatalf("after the lock was released: %q", got)
	}
}

func TestBusyWhileAnotherProcessHoldsTheLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	s, _ := New(path, "test", Options{LockTimeout: 200 * time.Millisecond})
	put(t, s, "k", "v")
	f, err := os.OpenFile(path+".lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	err = s.Update(context.Background(), func(tx *Tx) error { return tx.Put("b", "k", []byte("w")) })
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("writer: err = %v, want ErrBusy", err)
	}
	err = s.View(context.Background(), func(*Tx) error { return nil })
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("reader: err = %v, want ErrBusy", err)
	}
	f.Close()
	// The abandoned waiters got the lock in the background and let it go.
	done := make(chan error, 1)
	go func() {
		done <- s.Update(context.Background(), func(tx *Tx) error { return tx.Put("b", "k", []byte("w")) })
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lock stayed held after the holder and the timed-out waiters were gone")
	}
	if get(t, s, "k") != "w" {
		t.Fatal("write lost")
	}
}

func TestUpdateIsAtomic(t *testing.T) {
	s := newStore(t, filepath.Join(t.TempDir(), "x.db"))
	put(t, s, "a", "1")
	boom := errors.New("boom")
	err := s.Update(context.Background(), func(tx *Tx) error {
		tx.Put("b", "a", []byte("2"))
		tx.Put("b", "c", []byte("3"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if get(t, s, "a") != "1" || get(t, s, "c") != "" {
		t.Fatal("a failed update left changes behind")
	}
}

func TestConcurrentWritersInOneProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	const writers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _ := New(path, "test", Options{}) // a separate handle per writer
			for i := 0; i < each; i++ {
				errs <- s.Update(context.Background(), func(tx *Tx) error {
					n, _ := strconv.Atoi(string(tx.Get("b", "counter")))
					if err := tx.Put("b", "counter", []byte(strconv.Itoa(n+1))); err != nil {
						return err
					}
					return tx.Put("b", fmt.Sprintf("w%d-%d", w, i), []byte("x"))
				})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := newStore(t, path)
	if got := get(t, s, "counter"); got != strconv.Itoa(writers*each) {
		t.Fatalf("counter = %s, want %d: lost updates", got, writers*each)
	}
}

// helperEnv makes the test binary, re-executed, act as a second process
// writing the same store.
const helperEnv = "NSBOX_STORE_TEST_HELPER"

func TestHelperProcess(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("helper for TestConcurrentWritersTwoProcesses")
	}
	parts := strings.Split(spec, "|")
	path, name := parts[0], parts[1]
	startNs, _ := strconv.ParseInt(parts[2], 10, 64)
	time.Sleep(time.Until(time.Unix(0, startNs))) // both processes start together
	s, _ := New(path, "test", Options{LockTimeout: 30 * time.Second})
	for i := 0; i < 50; i++ {
		err := s.Update(context.Background(), func(tx *Tx) error {
			n, _ := strconv.Atoi(string(tx.Get("b", "counter")))
			if err := tx.Put("b", "counter", []byte(strconv.Itoa(n+1))); err != nil {
				return err
			}
			// Who wrote the n+1th update, to see the interleaving.
			if err := tx.Put("order", fmt.Sprintf("%04d", n+1), []byte(name)); err != nil {
				return err
			}
			return tx.Put("b", fmt.Sprintf("%s-%d", name, i), []byte("x"))
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		if i == 0 {
			// Rendezvous: neither process goes on until the other has
			// written once, so both really contend for the store however
			// late the scheduler starts one of them (a fixed start time
			// alone let a slow start run the writers one after the other).
			other := map[string]string{"p1": "p2", "p2": "p1"}[name]
			deadline := time.Now().Add(30 * time.Second)
			for seen := false; !seen; {
				if err := s.View(context.Background(), func(tx *Tx) error { seen = tx.Get("b", other+"-0") != nil; return nil }); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
				if !seen && time.Now().After(deadline) {
					fmt.Fprintln(os.Stderr, "the other writer never wrote")
					os.Exit(3)
				}
				time.Sleep(time.Millisecond)
			}
		}
		// Readers interleave with writers.
		if err := s.View(context.Background(), func(tx *Tx) error { tx.Get("b", "counter"); return nil }); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
	}
}

func TestConcurrentWritersTwoProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	start := time.Now().Add(500 * time.Millisecond).UnixNano()
	for _, name := range []string{"p1", "p2"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%d", helperEnv, path, name, start))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		outs = append(outs, &out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer process %d: %v\n%s", i+1, err, outs[i])
		}
	}
	s := newStore(t, path)
	if got := get(t, s, "counter"); got != "100" {
		t.Fatalf("counter = %s, want 100: the two processes lost updates", got)
	}
	for _, k := range []string{"p1-0", "p1-49", "p2-0", "p2-49"} {
		if get(t, s, k) == "" {
			t.Fatalf("key %s missing", k)
		}
	}
	// The processes interleaved: neither kept the store for all its writes
	// (the rendezvous after each one's first write makes at least two
	// changes of writer the minimum when the lock works).
	switches, prev := 0, ""
	s.View(context.Background(), func(tx *Tx) error {
		return tx.ForEach("order", func(_ string, v []byte) error {
			if prev != "" && string(v) != prev {
				switches++
			}
			prev = string(v)
			return nil
		})
	})
	t.Logf("the writer changed %d times over 100 updates", switches)
	if switches < 2 {
		t.Fatalf("the two processes did not interleave (%d switches)", switches)
	}
}
