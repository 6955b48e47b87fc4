package main

import (
	"encoding/json"
	"errors"
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
		p := filepath.Join(dir, e.Name())
		isTmp := strings.HasSuffix(e.Name(), ".tmp")
		if !isTmp && !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
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
			// A run killed before its record took its name: it had not
			// started its sandbox.
			os.Remove(p)
			f.Close()
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(f, maxAuditRecord))
		var a policy.GitAudit
		if err := json.Unmarshal(b, &a); err != nil {
			os.Stderr.WriteString("nsbox: warning: the record of a killed run's git audit cannot be read (" + err.Error() + "); it is kept as " + p + ".failed: look at that run's workspace before you run git in it\n")
			os.Rename(p, p+".failed")
			f.Close()
			continue
		}
		// The tree may have been the user's since the run was killed
		// (days ago, after a reboot): the audit reports and renames
		// nothing.
		os.Stderr.WriteString("nsbox: note: an earlier run was killed before its git audit; it is run now, to report\n")
		if _, err := auditGit(&policy.Result{GitAudit: a.Deferred()}); errors.Is(err, policy.ErrGitAuditIncomplete) {
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.Contains(line, policy.ErrGitAuditIncomplete.Error()) {
					os.Stderr.WriteString("nsbox: warning: " + line + "\n")
				}
			}
		}
		os.Remove(p)
		f.Close()
	}
}
