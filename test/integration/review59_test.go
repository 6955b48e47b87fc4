package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Review 59.

// The created-file audit at depth, for names the run puts in place
// without creating them there: a directory or file stashed by an earlier
// run where the walk does not look (node_modules) and renamed into place
// in this one, and a symlink with the protected name. Each must be gone
// from its path (quarantined) when the run ends.
func TestReview59CreatedNamesByLinkAndRename(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, "a"))
		r := u.sh(t, &runOpts{dir: ws}, nil, `
mkdir -p node_modules/s1/.hg node_modules/s2 node_modules/s3 &&
printf '[hooks]\npre-status = sh -c evil\n' > node_modules/s1/.hg/hgrc &&
printf 'revlogv1\n' > node_modules/s1/.hg/requires &&
printf '[hooks]\npre-status = sh -c evil\n' > node_modules/s2/hgrc &&
printf '[hooks]\npre-status = sh -c evil\n' > node_modules/s3/hgrc &&
printf 'BASH_ENV=/tmp/evil\n' > node_modules/envsrc &&
printf 'BASH_ENV=/tmp/evil\n' > node_modules/envsrc2 &&
printf 'export X=1; evil\n' > node_modules/envrcsrc && echo stashed`)
		expectCode(t, r, 0)
		time.Sleep(1100 * time.Millisecond) // the stash's ctimes well before the next run
		deep := "d1/d2/d3/d4/d5/d6/d7/d8/d9/d10"
		r = u.sh(t, &runOpts{dir: ws}, nil, `
mkdir -p a/b/c a/d a/e a/f `+deep+` &&
mv node_modules/s2 a/b/c/.hg &&
ln -s ../../node_modules/s1/.hg a/d/.hg &&
ln -s ../../node_modules/envsrc a/e/.env &&
mv node_modules/envsrc2 a/f/.env &&
ln -s ../../node_modules/envrcsrc a/e/.envrc.local &&
mv node_modules/s3 `+deep+`/.sl && echo placed`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "placed") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		for _, p := range []string{"a/b/c/.hg", "a/d/.hg", "a/e/.env", "a/f/.env", "a/e/.envrc.local", deep + "/.sl"} {
			if existsNoFollow(filepath.Join(ws, p)) {
				t.Errorf("%s the run put in place is still there; stderr %q", p, r.stderr)
			}
		}
	})
}

// Finding (MEDIUM, breaks normal use; not in the docs): a virtualenv named
// .env (`python3 -m venv .env`) that the run makes is renamed
// .env.nsbox-quarantine when the run ends ("$NSBOX_RW/.en[v]" matches
// directories; the threat, a dotenv file that Aider, Gemini CLI and direnv
// load, is a regular file). The agent's next command finds no .env.
func TestReview59DotEnvVirtualenvMadeByRunKept(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		r := u.sh(t, &runOpts{dir: ws}, nil, `
mkdir -p .env/bin .env/lib/python3/site-packages &&
printf 'home = /usr/bin\ninclude-system-site-packages = false\n' > .env/pyvenv.cfg &&
printf 'VIRTUAL_ENV=x\nexport VIRTUAL_ENV\n' > .env/bin/activate && echo venv-made`)
		expectCode(t, r, 0)
		if !exists(filepath.Join(ws, ".env", "pyvenv.cfg")) {
			t.Errorf("the virtualenv .env the run made is gone (quarantined: %v); stderr %q", exists(filepath.Join(ws, ".env.nsbox-quarantine")), r.stderr)
		}
	})
}

// existsNoFollow: p itself is there (a dangling symlink counts).
func existsNoFollow(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
