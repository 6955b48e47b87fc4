package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/pkg/hostapi"
	"github.com/nsbox/nsbox/pkg/policy"
)

// A run records its git audit (policy.GitAudit) in nsbox's data directory
// while its sandbox lives, under an exclusive flock, and removes the record
// once the audit has run. A run killed with SIGKILL leaves the record
// unlocked; the next nsbox that starts finishes that audit before anything
// else, so that a repository the killed run's sandbox made is made inert
// before git runs in it. The data directory is hidden and read-only in
// every sandbox (the built-in defaults), so no sandbox can change a
// record.

// maxAuditRecord bounds what is read of one record.
const maxAuditRecord = 16 << 20

func pendingAuditDir() (string, error) {
	d, err := hostapi.DataDir(os.Getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "audit-pending"), nil
}

// recordAudit writes a's record and returns what removes it. The record is
// written under a temporary name and locked before it takes its final one,
// so that no other nsbox takes it for a dead run's.
func recordAudit(a *policy.GitAudit) (done func()) {
	noop := func() {}
	if a == nil {
		return noop
	}
	dir, err := pendingAuditDir()
	if err != nil || os.MkdirAll(dir, 0o700) != nil {
		return noop
	}
	b, err := json.Marshal(a)
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
	return func() {
		os.Remove(final)
		f.Close() // drops the lock
	}
}

func writeAll(f *os.File, b []byte) error {
	_, err := f.Write(b)
	return err
}

// finishPendingAudits runs the audits that runs killed before theirs left
// (records no live nsbox holds locked), and says what they did.
func finishPendingAudits() {
	dir, err := pendingAuditDir()
	if err != nil {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close() // a live run's
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(f, maxAuditRecord))
		var a policy.GitAudit
		if err := json.Unmarshal(b, &a); err == nil {
			os.Stderr.WriteString("nsbox: note: an earlier run was killed before its git audit; running it now\n")
			auditGit(&policy.Result{GitAudit: &a})
		}
		os.Remove(p)
		f.Close()
	}
}
