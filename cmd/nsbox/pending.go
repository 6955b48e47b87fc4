package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/pkg/hostapi"
)

// pendingDir names a directory of nsbox's data directory that holds one
// record per live run, of work the run must finish after its sandbox is
// gone (its git audit, the removal of its placeholders). A run writes its
// record under an exclusive flock and removes it once the work is done; a
// run killed with SIGKILL leaves it unlocked, and the next nsbox finishes
// the work (deadRuns). The data directory is hidden and read-only in every
// sandbox (the built-in defaults), so no sandbox can forge or change a
// record.
type pendingDir string

func (d pendingDir) path() (string, error) {
	dd, err := hostapi.DataDir(os.Getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(dd, string(d)), nil
}

// record writes v's record and returns what ends it (idempotent): done
// removes the record; done with keep set only drops its lock, leaving it
// to a later nsbox as a killed run's (deadRuns). The record is written
// under a temporary name and locked before it takes its final one, so that
// no other nsbox takes it for a dead run's. A record that cannot be
// written is skipped: the run itself still does the work.
func (d pendingDir) record(v any) (done func(keep bool)) {
	noop := func(bool) {}
	dir, err := d.path()
	if err != nil || os.MkdirAll(dir, 0o700) != nil {
		return noop
	}
	b, err := json.Marshal(v)
	if err != nil {
		return noop
	}
	f, err := os.CreateTemp(dir, "run-*.tmp")
	if err != nil {
		return noop
	}
	final := strings.TrimSuffix(f.Name(), ".tmp") + ".json"
	if unix.Flock(int(f.Fd()), unix.LOCK_EX) != nil || writeAll(f, b) != nil || os.Rename(f.Name(), final) != nil {
		os.Remove(f.Name())
		f.Close()
		return noop
	}
	ended := false
	return func(keep bool) {
		if !ended {
			ended = true
			if !keep {
				os.Remove(final)
			}
			f.Close() // drops the lock
		}
	}
}

func writeAll(f *os.File, b []byte) error {
	_, err := f.Write(b)
	return err
}

// deadRuns calls fn for each record no live nsbox holds locked, with the
// record open (read-write, locked exclusively, closed after fn) and its
// content, at most max bytes. fn removes the record when its work is done.
// A record still under its temporary name is a run killed before it
// started its sandbox: it is removed without fn.
func (d pendingDir) deadRuns(max int64, fn func(path string, f *os.File, content []byte)) {
	dir, err := d.path()
	if err != nil {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		isTmp := strings.HasSuffix(e.Name(), ".tmp")
		if !isTmp && !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		f, err := os.OpenFile(p, os.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close() // a live run's
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) != nil || st.Nlink == 0 {
			f.Close() // removed by its run in the meantime
			continue
		}
		if isTmp {
			os.Remove(p)
			f.Close()
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(f, max))
		fn(p, f, b)
		f.Close()
	}
}
