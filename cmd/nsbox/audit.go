package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"

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

// pendingAudits holds the records of runs' git audits (pending.go).
const pendingAudits pendingDir = "audit-pending"

// recordAudit writes a's record and returns what removes it.
func recordAudit(a *policy.GitAudit) (done func()) {
	if a == nil {
		return func() {}
	}
	end := pendingAudits.record(a)
	return func() { end(false) }
}

// finishPendingAudits runs the audits that runs killed before theirs left
// (records no live nsbox holds locked), and says what they did.
func finishPendingAudits() {
	sayEndedSessions()
	pendingAudits.deadRuns(maxAuditRecord, func(p string, f *os.File, b []byte) {
		var a policy.GitAudit
		if err := json.Unmarshal(b, &a); err != nil {
			io.WriteString(msgs, "nsbox: warning: the record of a killed run's git audit cannot be read ("+err.Error()+"); it is kept as "+p+".failed: look at that run's workspace before you run git in it\n")
			os.Rename(p, p+".failed")
			return
		}
		// The tree may have been the user's since the run was killed
		// (days ago, after a reboot): the audit reports and renames
		// nothing.
		io.WriteString(msgs, "nsbox: note: an earlier run was killed before its git audit; it is run now, to report\n")
		if _, err := auditGit(&policy.Result{GitAudit: a.Deferred()}); errors.Is(err, policy.ErrGitAuditIncomplete) {
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.Contains(line, policy.ErrGitAuditIncomplete.Error()) {
					io.WriteString(msgs, "nsbox: warning: "+line+"\n")
				}
			}
		}
		os.Remove(p)
	})
}

// sessionEnded holds what the audit said at the end of a session that
// ended with nobody to tell (its idle timeout, its owner's end, a
// signal): the daemon's log, where it also went, is removed with the
// session (review 44).
const sessionEnded pendingDir = "session-ended"

// sessionNotice is one such record.
type sessionNotice struct {
	Name  string   `json:"name"`
	Why   string   `json:"why"`
	Lines []string `json:"lines"`
}

// noteSessionEnd leaves a session's end report for the next nsbox.
func noteSessionEnd(name, why string, lines []string) {
	sessionEnded.record(sessionNotice{Name: name, Why: why, Lines: lines})(true)
}

// sayEndedSessions prints, once, what the audits of sessions that ended
// unattended said.
func sayEndedSessions() {
	sessionEnded.deadRuns(maxAuditRecord, func(p string, f *os.File, b []byte) {
		var n sessionNotice
		if json.Unmarshal(b, &n) == nil {
			io.WriteString(msgs, "nsbox: note: session "+n.Name+" ended ("+n.Why+"); its audit said:\n")
			for _, l := range n.Lines {
				io.WriteString(msgs, l+"\n")
			}
		}
		os.Remove(p)
	})
}
