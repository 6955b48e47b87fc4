package main

import (
	"encoding/json"
	"os"

	"github.com/nsbox/nsbox/pkg/policy"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

// A run records the placeholders its sandbox made for missing protected
// paths (an empty .git, .mcp.json, .vscode/ in the workspace), with the
// identity of each inode (policy.MadePlaceholders), in nsbox's data
// directory while its sandbox lives, under an exclusive flock, and removes
// the record once its hold released them. A run killed with SIGKILL leaves
// the record unlocked; the next nsbox removes what that run made
// (policy.RemoveLeftPlaceholders: the same inode, still empty, in a root
// no live run holds) and never a file of the user's that took the name
// since. The data directory is hidden and read-only in every sandbox, so
// no sandbox can forge a record.

// maxPlaceholderRecord bounds what is read of one record.
const maxPlaceholderRecord = 4 << 20

// pendingPlaceholders holds the records of runs' placeholders (pending.go).
const pendingPlaceholders pendingDir = "placeholders-pending"

// recordPlaceholders records the placeholders res's sandbox made; call it
// once the sandbox is built. The returned function ends the record once
// hold has released them (it may be called more than once): removed, or
// kept for a later nsbox when the release left some of them (a root
// another run held: policy.Hold.Pending).
func recordPlaceholders(res *policy.Result, hold *policy.Hold) (done func()) {
	if res == nil || len(res.Placeholders) == 0 {
		return func() {}
	}
	made := policy.MadePlaceholders(res.Placeholders)
	if len(made) == 0 {
		return func() {}
	}
	end := pendingPlaceholders.record(made)
	return func() { end(hold.Pending()) }
}

// releaseUnrecorded releases hold for a sandbox whose start failed before
// its placeholders were recorded (a build that found the policy changed,
// say). What the release left for a later nsbox (another run held the
// workspace: policy.Hold.Pending) is recorded then, so that it is not
// left behind for good.
func releaseUnrecorded(hold *policy.Hold, res *policy.Result) {
	hold.Release(res.Placeholders)
	if hold.Pending() {
		recordPlaceholders(res, hold)()
	}
}

// removeLeftPlaceholders removes the placeholders that runs killed before
// their end left (records no live nsbox holds locked).
//
// It also removes the private TMPDIRs that Landlock sessions of killed
// supervisors left in the host's temporary directory (with what their
// commands wrote there; sandbox.RemoveDeadLandlockTmpDirs).
func removeLeftPlaceholders() {
	// Silently, as the placeholders: what cannot be removed now is tried
	// again by the next run.
	sandbox.RemoveDeadLandlockTmpDirs()
	// A second pass when the first removed some and kept others: a
	// placeholder directory of one record may have held another record's
	// placeholders, gone now (two runs that shared a workspace).
	for pass := 0; pass < 2; pass++ {
		removedAny, keptAny := false, false
		pendingPlaceholders.deadRuns(maxPlaceholderRecord, func(p string, f *os.File, b []byte) {
			var made []policy.MadePlaceholder
			if err := json.Unmarshal(b, &made); err != nil {
				os.Remove(p)
				return
			}
			// Silently: only nsbox's own empty files go, nothing for
			// the user to act on, and stderr stays the command's.
			removed, keep := policy.RemoveLeftPlaceholders(made)
			removedAny = removedAny || len(removed) > 0
			if len(keep) == 0 {
				os.Remove(p)
			} else if b, err := json.Marshal(keep); err == nil {
				// A live run holds their roots, or a directory was not
				// empty: a later nsbox tries again.
				keptAny = true
				f.Truncate(0)
				f.WriteAt(b, 0)
			}
		})
		if !removedAny || !keptAny {
			return
		}
	}
}
