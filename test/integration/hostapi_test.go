package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/hostapi"
	"github.com/nsbox/nsbox/pkg/hostapi/store"
)

// The memory/notepad host APIs through the CLI. The Go API side (sessions,
// tools, `nsbox call` from scripts, refusals, bounds) is tested in
// test/integration/hostapi, whose test binary can act as a sandbox worker.

// chownTree gives dir and everything in it to u (the test seeds stores as
// root, then runs nsbox as u).
func chownTree(t *testing.T, dir string, u user) {
	t.Helper()
	if os.Getuid() != 0 {
		return
	}
	filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, u.uid, u.gid)
		}
		return err
	})
}

// seedStores writes memories and tabs with the Go API, as a session would.
func seedStores(t *testing.T, dataDir string) {
	t.Helper()
	s, err := hostapi.Open(dataDir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, m := range []struct{ key, text, tag string }{
		{"deploy", "Deploy with make release. Deploy only after review.", "ops"},
		{"db", "The staging database is PostgreSQL on db.internal.", "db"},
		{"lunch", "Lunch is at noon.", ""},
	} {
		var tags []string
		if m.tag != "" {
			tags = []string{m.tag}
		}
		if _, _, err := s.Memory.Save(ctx, m.key, m.text, tags); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Notepad.Write(ctx, "", nil, "# Plan\nstep one\n"); err != nil {
		t.Fatal(err)
	}
	title := "Notes"
	if _, _, err := s.Notepad.Write(ctx, "notes", &title, "a\x1b[31mred\n"); err != nil {
		t.Fatal(err)
	}
}

func TestHostAPICLI(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			xdg := u.tempDir(t)
			env := &runOpts{env: []string{"XDG_DATA_HOME=" + xdg}}
			dataDir := filepath.Join(xdg, "nsbox")

			// A fresh data directory: empty lists, and nothing created.
			r := u.run(t, env, "memory", "list")
			expectCode(t, r, 0)
			if strings.TrimSpace(r.stdout) != "no memories" {
				t.Fatalf("empty list: %q", r.stdout)
			}
			r = u.run(t, env, "notepad", "list")
			expectCode(t, r, 0)
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Fatalf("listing created %s", dataDir)
			}

			seedStores(t, dataDir)
			chownTree(t, xdg, u)

			r = u.run(t, env, "memory", "list")
			expectCode(t, r, 0)
			for _, k := range []string{"deploy", "db", "lunch", "KEY", "TAGS"} {
				if !strings.Contains(r.stdout, k) {
					t.Fatalf("memory list lacks %q:\n%s", k, r.stdout)
				}
			}
			r = u.run(t, env, "memory", "search", "how do we deploy to staging")
			expectCode(t, r, 0)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if len(lines) < 3 || !strings.Contains(lines[1], "deploy") || !strings.Contains(lines[2], "db") {
				t.Fatalf("search ranking:\n%s", r.stdout)
			}
			r = u.run(t, env, "memory", "search", "--json", "postgresql")
			expectCode(t, r, 0)
			var res struct {
				Results []struct{ Key string } `json:"results"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Results) != 1 || res.Results[0].Key != "db" {
				t.Fatalf("search --json: %s (%v)", r.stdout, err)
			}
			r = u.run(t, env, "memory", "show", "lunch")
			expectCode(t, r, 0)
			if !strings.Contains(r.stdout, "Lunch is at noon.") {
				t.Fatalf("show: %q", r.stdout)
			}
			r = u.run(t, env, "memory", "delete", "lunch")
			expectCode(t, r, 0)
			r = u.run(t, env, "memory", "delete", "lunch")
			expectCode(t, r, 1)
			if !strings.Contains(r.stderr, `no memory with key "lunch"`) {
				t.Fatalf("delete twice: %q", r.stderr)
			}

			r = u.run(t, env, "notepad", "list")
			expectCode(t, r, 0)
			if !strings.Contains(r.stdout, "* ") || !strings.Contains(r.stdout, "tab-1") || !strings.Contains(r.stdout, "Notes") {
				t.Fatalf("notepad list:\n%s", r.stdout)
			}
			r = u.run(t, env, "notepad", "show")
			expectCode(t, r, 0)
			if r.stdout != "# Plan\nstep one\n" {
				t.Fatalf("notepad show (selected): %q", r.stdout)
			}
			// Not a terminal: the content comes out exactly as stored.
			r = u.run(t, env, "notepad", "show", "notes")
			expectCode(t, r, 0)
			if r.stdout != "a\x1b[31mred\n" {
				t.Fatalf("notepad show notes: %q", r.stdout)
			}
			r = u.run(t, env, "notepad", "show", "nope")
			expectCode(t, r, 1)
			if !strings.Contains(r.stderr, `no tab with id "nope"`) {
				t.Fatalf("show unknown: %q", r.stderr)
			}

			// The store files are private to their owner.
			for _, name := range []string{"memory.db", "notepad.db"} {
				fi, err := os.Stat(filepath.Join(dataDir, name))
				if err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("%s: %v %v", name, fi, err)
				}
			}
			if fi, err := os.Stat(dataDir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("data dir: %v %v", fi, err)
			}

			// A corrupt store: a clear error naming the file, which stays
			// as it was.
			garbage := strings.Repeat("garbage ", 1000)
			u.writeFile(t, filepath.Join(dataDir, "memory.db"), garbage, 0o600)
			r = u.run(t, env, "memory", "list")
			expectCode(t, r, 1)
			if !strings.Contains(r.stderr, filepath.Join(dataDir, "memory.db")+" is unreadable") {
				t.Fatalf("corrupt store: %q", r.stderr)
			}
			if b, _ := os.ReadFile(filepath.Join(dataDir, "memory.db")); string(b) != garbage {
				t.Fatal("the corrupt store was modified")
			}
		})
	}
}

// hostAPIRunReady skips unless `nsbox run` serves the memory and notepad
// host APIs (--host-api, with the handlers of hostapi.DefaultHandlers).
func hostAPIRunReady(t *testing.T, u user, env *runOpts) {
	t.Helper()
	r := u.run(t, nil, "run", "--help")
	if !strings.Contains(r.stdout, "--host-api") {
		t.Skip("nsbox run has no --host-api flag yet")
	}
	r = u.run(t, env, "run", "--host-api", "memory.list", "--", "/run/nsbox/bin/nsbox", "call", "memory", "list", "{}")
	if strings.Contains(r.stderr, "has no handler") {
		t.Skip("nsbox run does not serve the memory/notepad handlers yet (wire hostapi.DefaultHandlers into run)")
	}
	expectCode(t, r, 0)
}

// A memory saved by `nsbox call` in one `nsbox run` is recalled by another
// (a separate process), and seen by `nsbox memory list` on the host.
func TestHostAPIThroughRun(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		xdg := u.tempDir(t)
		env := &runOpts{env: []string{"XDG_DATA_HOME=" + xdg}}
		hostAPIRunReady(t, u, env)

		r := u.run(t, env, "run", "--host-api", "memory.save", "--",
			"/run/nsbox/bin/nsbox", "call", "memory", "save", `{"key":"greeting","text":"Say hello in French: bonjour","tags":["lang"]}`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, `"key":"greeting"`) {
			t.Fatalf("save: %q", r.stdout)
		}
		r = u.run(t, env, "run", "--host-api", "memory.recall", "--",
			"/run/nsbox/bin/nsbox", "call", "memory", "recall", `{"query":"french hello"}`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, `"key":"greeting"`) {
			t.Fatalf("recall in a later run: %q", r.stdout)
		}
		// Allowed by the policy, but not a host API method: refused.
		r = u.run(t, env, "run", "--host-api", "notepad.clear", "--",
			"/run/nsbox/bin/nsbox", "call", "notepad", "clear", `{}`)
		expectCode(t, r, 1)
		if !strings.Contains(r.stderr, "notepad.clear has no handler") {
			t.Fatalf("notepad.clear: %q", r.stderr)
		}
		r = u.run(t, env, "memory", "list")
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "greeting") {
			t.Fatalf("host list: %q", r.stdout)
		}
	})
}
