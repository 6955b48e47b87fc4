package policy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Outside review 23 of feffadd. Each test FAILS on the code reviewed, for
// the reason stated above it, and passes once fixed.

// LOW/MEDIUM (a killed run's record from the previous format). feffadd
// widened gitAuditRecord.StartLinks from [3]uint64 (the link's device,
// inode, ctime) to [5]uint64 (plus its target's device and inode) and
// added startLinkDepth. A record written by the nsbox before the upgrade
// (a run killed with SIGKILL, whose audit the next nsbox runs) decodes
// with every target {0,0} and startLinkDepth 0. Observed: targetMoved is
// true for every old link that leads to a directory (zero != its target),
// so each of the user's untouched links counts as "new" and is renamed
// when it leads to any repository (the user's own included); and
// unseenAtStart is false at every depth (depth+1 >= 0), so a link the
// sandbox moved into view, which the old format caught, is judged by its
// times only. Should: a target not recorded (zero) is not "moved", and a
// record without startLinkDepth keeps the old rule (a link not met is
// new) or is judged as before the upgrade.
func TestReview23OldFormatStartLinks(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "node_modules", "p")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(root, "app")
	if err := os.Symlink("node_modules/p", app); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(root, "moved")
	if err := os.Symlink("node_modules/p", moved); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(app, &st); err != nil {
		t.Fatal(err)
	}
	// The previous format: app met at the start, "moved" not.
	// The run started after all of it was made (a real record's since).
	since := time.Now().UnixNano() + 1
	rec := fmt.Sprintf(`{"roots":[%q],"known":[],"noGit":true,"since":%d,"startLinks":[[%d,%d,%d]]}`, root, since, st.Dev, st.Ino, st.Ctim.Nano())
	var a GitAudit
	if err := json.Unmarshal([]byte(rec), &a); err != nil {
		t.Fatal(err)
	}
	if a.targetMoved(app, p) {
		t.Errorf("old-format record: the user's untouched link %s counts as redirected (target recorded as zero), so it is \"new\"", app)
	}
	if !a.unseenAtStart(moved, root) {
		t.Errorf("old-format record: %s, a link the start's walk did not meet at depth 1, is not \"unseen at the start\" (startLinkDepth 0 disables the check)", moved)
	}
}
