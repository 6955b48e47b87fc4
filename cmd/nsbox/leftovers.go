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

func pendingPlaceholderDir() (string, error) {
	d, err := hostapi.DataDir(os.Getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "placeholders-pending"), nil
}

// recordPlaceholders records the placeholders res's sandbox made; call it
// once the sandbox is built. The returned function removes the record
// (once the hold has released them); it may be called more than once.
func recordPlaceholders(res *policy.Result) (done func()) {
	noop := func() {}
	if res == nil || len(res.Placeholders) == 0 {
		return noop
	}
	made := policy.MadePlaceholders(res.Placeholders)
	if len(made) == 0 {
		return noop
	}
	dir, err := pendingPlaceholderDir()
	if err != nil || os.MkdirAll(dir, 0o700) != nil {
		return noop
	}
	b, err := json.Marshal(made)
	if err != nil {
		return noop
	}
	// Written under a temporary name and locked before it takes its final
	// one, so that no other nsbox takes it for a dead run's.
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
	removed := false
	return func() {
		if !removed {
			removed = true
			os.Remove(final)
			f.Close() // drops the lock
		}
	}
}

// removeLeftPlaceholders removes the placeholders that runs killed before
// their end left (records no live nsbox holds locked).
func removeLeftPlaceholders() {
	dir, err := pendingPlaceholderDir()
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
		if unix.Fstat(int(f.Fd()), &st) != nil || st.Nlink == 0 || isTmp {
			// Removed by its run in the meantime, or a run killed
			// before its record took its name (its list is incomplete:
			// nothing of it is trusted).
			if isTmp && st.Nlink > 0 {
				os.Remove(p)
			}
			f.Close()
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(f, maxPlaceholderRecord))
		var made []policy.MadePlaceholder
		if err := json.Unmarshal(b, &made); err != nil {
			os.Remove(p)
			f.Close()
			continue
		}
		// Silently: only nsbox's own empty files go, nothing for the
		// user to act on, and stderr stays the command's.
		_, keep := policy.RemoveLeftPlaceholders(made)
		if len(keep) == 0 {
			os.Remove(p)
		} else if b, err := json.Marshal(keep); err == nil {
			// A live run holds their roots: a later nsbox tries again.
			f.Truncate(0)
			f.WriteAt(b, 0)
		}
		f.Close()
	}
}
