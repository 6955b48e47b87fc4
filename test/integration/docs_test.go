package integration

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// docBlock is a code block of the docs marked runnable (```sh runnable).
type docBlock struct {
	file string
	line int
	code string
	// expect are the texts its output must contain: "# expect: TEXT" at
	// the end of a line.
	expect []string
}

// runnableBlocks reads the ```sh runnable blocks of README.md, docs/*.md
// and examples/*/README.md.
func runnableBlocks(t *testing.T, root string) []docBlock {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	for _, g := range []string{"docs/*.md", "examples/*/README.md"} {
		m, _ := filepath.Glob(filepath.Join(root, g))
		files = append(files, m...)
	}
	var blocks []docBlock
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		var cur *docBlock
		n := 0
		for sc.Scan() {
			n++
			l := sc.Text()
			trimmed := strings.TrimSpace(l)
			switch {
			case cur == nil && strings.HasPrefix(trimmed, "```") && strings.Contains(trimmed, " runnable"):
				rel, _ := filepath.Rel(root, f)
				cur = &docBlock{file: rel, line: n}
			case cur != nil && trimmed == "```":
				blocks = append(blocks, *cur)
				cur = nil
			case cur != nil:
				cur.code += l + "\n"
				if _, want, ok := strings.Cut(l, "# expect: "); ok {
					cur.expect = append(cur.expect, strings.TrimSpace(want))
				}
			}
		}
		fh.Close()
		if cur != nil {
			t.Errorf("%s:%d: runnable block not closed", f, cur.line)
		}
	}
	return blocks
}

// TestDocsRunnable runs every code block the docs mark runnable against the
// built binary (nsbox on PATH, in a fresh workspace, as root and as an
// unprivileged user): a documented command that no longer works fails
// here (issue 19, item 9).
func TestDocsRunnable(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := runnableBlocks(t, root)
	if len(blocks) < 5 {
		t.Fatalf("found %d runnable blocks; the docs mark more", len(blocks))
	}
	bin := nsboxBin(t)
	eachUser(t, func(t *testing.T, u user) {
		for _, b := range blocks {
			t.Run(strings.ReplaceAll(b.file, "/", "_")+"_"+strconv.Itoa(b.line), func(t *testing.T) {
				ws := u.tempDir(t)
				bindir := filepath.Join(ws, ".bin")
				u.mkdirAs(t, bindir)
				if err := os.Symlink(bin, filepath.Join(bindir, "nsbox")); err != nil {
					t.Fatal(err)
				}
				// Sessions of their own: a block's session named
				// "demo" is not another test run's.
				rundir := filepath.Join(ws, ".xdg-run")
				u.mkdirAs(t, rundir)
				r := u.runAs(t, &runOpts{dir: ws, env: []string{
					"PATH=" + bindir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
					"NSBOX_REPO=" + root,
					"XDG_RUNTIME_DIR=" + rundir,
				}}, "/bin/sh", "-e", "-c", b.code)
				if r.code != 0 {
					t.Fatalf("%s:%d: exit %d\n%s\nstdout: %s\nstderr: %s", b.file, b.line, r.code, b.code, r.stdout, r.stderr)
				}
				for _, want := range b.expect {
					if !strings.Contains(r.stdout, want) {
						t.Errorf("%s:%d: output lacks %q\nstdout: %s", b.file, b.line, want, r.stdout)
					}
				}
			})
		}
	})
}
