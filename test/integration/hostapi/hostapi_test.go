package hostapiit

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/pkg/hostapi"
	"github.com/nsbox/nsbox/pkg/hostapi/memory"
	"github.com/nsbox/nsbox/pkg/hostapi/notepad"
	"github.com/nsbox/nsbox/pkg/hostapi/store"
)

var ctx = context.Background()

// A script inside calls `nsbox call memory save`: the call crosses the
// channel, reaches the Go handler on the host (the store on the host
// changes), and the handler's result comes back to the script.
func TestShellCallReachesHandler(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		dir := dataDir(t)
		b := startBox(t, dir, hostapi.Methods())
		r := b.sh(`nsbox call memory save '{"key":"build","text":"The project builds with make; tests with make test.","tags":["howto"]}'`)
		expect(t, r.code == 0, "nsbox call memory save: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		res := jsonOf(t, r.stdout)
		expect(t, res["key"] == "build" && res["created"] == true, "result of memory.save: %s", r.stdout)

		// The host's store has it: the handler ran on the host.
		m, err := memory.Open(dir, store.Options{})
		must(t, err)
		rec, err := m.Get(ctx, "build")
		must(t, err)
		expect(t, rec.Text == "The project builds with make; tests with make test." && reflect.DeepEqual(rec.Tags, []string{"howto"}), "stored: %+v", rec)
		fi, err := os.Stat(m.Path())
		must(t, err)
		expect(t, fi.Mode().Perm() == 0o600 && fi.Sys() != nil, "store file mode %v", fi.Mode())
		expect(t, int(fi.Sys().(*syscall.Stat_t).Uid) == os.Getuid(), "store file is not owned by the user running the session")

		// And a recall from inside finds it, best match first.
		m.Save(ctx, "lunch", "Lunch is at noon.", nil)
		r = b.sh(`nsbox call memory recall '{"query":"how do I run the tests"}'`)
		expect(t, r.code == 0, "recall: %d %s", r.code, r.stderr)
		var rec2 struct {
			Results []memory.Match `json:"results"`
		}
		must(t, json.Unmarshal([]byte(r.stdout), &rec2))
		expect(t, len(rec2.Results) == 1 && rec2.Results[0].Key == "build", "recall results: %s", r.stdout)

		// Every call was audited, with its method.
		expect(t, strings.Contains(b.audit.String(), `"method":"save"`) && strings.Contains(b.audit.String(), `"method":"recall"`), "audit: %s", b.audit)
	})
}

// memory_save in one session, memory_recall in a later session of another
// process (same data directory), then memory_delete removes it.
func TestMemoryToolsPersistAcrossProcesses(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		dir := dataDir(t)
		b := startBox(t, dir, hostapi.Methods())
		var saved map[string]any
		b.mustTool("memory_save", map[string]any{"key": "deploy", "text": "Deploy with `make release`; deploy only after review.", "tags": []string{"ops"}}, &saved)
		expect(t, saved["key"] == "deploy" && saved["created"] == true, "memory_save output: %v", saved)
		b.mustTool("memory_save", map[string]any{"text": "The staging database is postgres on db.internal.", "tags": []string{"db"}}, nil)
		b.s.Close()

		// A separate process (this binary again) runs its own session.
		out := helper(t, "recall", dir)
		var got struct {
			Results []memory.Match `json:"results"`
		}
		must(t, json.Unmarshal([]byte(out), &got))
		expect(t, len(got.Results) >= 1 && got.Results[0].Key == "deploy", "recall in a later session/process: %s", out)

		b2 := startBox(t, dir, hostapi.Methods())
		b2.mustTool("memory_delete", map[string]any{"key": "deploy"}, nil)
		r := b2.tool("memory_recall", map[string]any{"key": "deploy"})
		expect(t, !r.Success && r.errText() == `no memory with key "deploy"`, "recall after delete: %+v", r)
		r = b2.tool("memory_delete", map[string]any{"key": "deploy"})
		expect(t, !r.Success && r.errText() == `no memory with key "deploy"`, "delete twice: %+v", r)
		var left struct {
			Results []memory.Match `json:"results"`
		}
		b2.mustTool("memory_recall", map[string]any{"query": "deploy release review"}, &left)
		for _, m := range left.Results {
			expect(t, m.Key != "deploy", "deleted memory still recalled: %+v", left)
		}
	})
}

// helper runs this binary as another process (the same user) performing
// one step in its own session, and returns what it printed.
func helper(t *testing.T, step, dir string) string {
	t.Helper()
	self, err := os.Executable()
	must(t, err)
	cmd := exec.Command(self, "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "NSBOX_HOSTAPI_IT_HELPER="+step, "NSBOX_HOSTAPI_IT_DIR="+dir, "NSBOX_BIN="+nsboxBin(t))
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("helper %s: %v\n%s\n%s", step, err, out, stderr)
	}
	_, res, ok := strings.Cut(string(out), "RESULT:")
	expect(t, ok, "helper printed no result: %s", out)
	res, _, _ = strings.Cut(res, "\n")
	return res
}

func TestHelperProcess(t *testing.T) {
	step := os.Getenv("NSBOX_HOSTAPI_IT_HELPER")
	if step == "" {
		t.Skip("helper for TestMemoryToolsPersistAcrossProcesses")
	}
	b := startBox(t, os.Getenv("NSBOX_HOSTAPI_IT_DIR"), hostapi.Methods())
	switch step {
	case "recall":
		r := b.tool("memory_recall", map[string]any{"query": "how do we deploy"})
		if !r.Success {
			t.Fatal(r.errText())
		}
		os.Stdout.WriteString("RESULT:" + string(r.Output) + "\n")
	}
}

func TestDocumentTools(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		dir := dataDir(t)
		b := startBox(t, dir, hostapi.Methods())

		// document_overwrite creates the first tab, then updates it.
		var w struct {
			Tab     notepad.Meta `json:"tab"`
			Created bool         `json:"created"`
		}
		doc := "# Plan\n1. parse\n2. check\n3. emit\n4. test\n5. ship\n"
		b.mustTool("document_overwrite", map[string]any{"content": doc}, &w)
		expect(t, w.Created && w.Tab.ID == "tab-1" && w.Tab.Title == "Plan" && w.Tab.Selected, "create: %+v", w)
		doc = strings.Replace(doc, "1. parse", "1. lex and parse", 1)
		b.mustTool("document_overwrite", map[string]any{"content": doc, "title": "The plan"}, &w)
		expect(t, !w.Created && w.Tab.ID == "tab-1" && w.Tab.Title == "The plan", "update: %+v", w)
		var rd struct{ ID, Title, Content string }
		b.mustTool("document_read", map[string]any{}, &rd)
		expect(t, rd.ID == "tab-1" && rd.Content == doc, "read: %+v", rd)

		// A good patch applies.
		good := "@@ -3,3 +3,3 @@\n 2. check\n-3. emit\n+3. emit code\n 4. test\n"
		b.mustTool("document_patch", map[string]any{"diff": good}, nil)
		doc = strings.Replace(doc, "3. emit\n", "3. emit code\n", 1)
		// A bad hunk is named, and nothing changes.
		bad := "@@ -1,2 +1,2 @@\n-# Plan\n+# Plan!\n 1. lex and parse\n@@ -5,2 +5,2 @@\n 4. test\n-5. deploy\n+5. ship it\n"
		r := b.tool("document_patch", map[string]any{"diff": bad})
		expect(t, !r.Success && strings.HasPrefix(r.errText(), `hunk 2 (@@ -5,2 +5,2 @@) does not apply: line to remove 6 differs: the document has "5. ship", the patch expects "5. deploy"`), "bad hunk: %s", r.errText())
		// Search/replace edits.
		b.mustTool("document_patch", map[string]any{"edits": []map[string]any{{"search": "5. ship", "replace": "5. ship v1"}}}, nil)
		doc = strings.Replace(doc, "5. ship", "5. ship v1", 1)
		r = b.tool("document_patch", map[string]any{"edits": []map[string]any{{"search": "6. party", "replace": "x"}}})
		expect(t, !r.Success && r.errText() == "edit 1 does not apply: the search text was not found", "bad edit: %+v", r)

		var content struct{ Content string }
		b.mustTool("notepad_get_content", map[string]any{"id": "tab-1"}, &content)
		expect(t, content.Content == doc, "content after patches:\n%s\nwant:\n%s", content.Content, doc)

		// Other tabs; list; metadata; close.
		b.mustTool("document_overwrite", map[string]any{"id": "notes", "content": "a\nb\n"}, nil)
		var list struct {
			Tabs     []notepad.Meta `json:"tabs"`
			Selected string         `json:"selected"`
		}
		b.mustTool("notepad_list_tabs", map[string]any{}, &list)
		expect(t, len(list.Tabs) == 2 && list.Selected == "tab-1" && list.Tabs[1].ID == "notes", "list: %+v", list)
		var meta notepad.Meta
		b.mustTool("notepad_get_metadata", map[string]any{"id": "notes"}, &meta)
		expect(t, meta.Size == 4 && meta.Lines == 2 && !meta.Selected, "metadata: %+v", meta)
		r = b.tool("notepad_close_tab", map[string]any{"id": "nope"})
		expect(t, !r.Success && r.errText() == `no tab with id "nope"`, "close unknown: %+v", r)
		b.mustTool("notepad_close_tab", map[string]any{"id": "notes"}, nil)

		// The host sees the same documents.
		n, err := notepad.Open(dir, store.Options{})
		must(t, err)
		tabs, sel, err := n.List(ctx)
		must(t, err)
		expect(t, len(tabs) == 1 && sel == "tab-1", "host view: %+v %q", tabs, sel)
	})
}

// Host-only operations (select a tab, clear all tabs) are not host API
// methods: a script inside is refused even when a careless policy lists
// them, and the tabs do not change.
func TestHostOnlyOperationsRefused(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		dir := dataDir(t)
		n, err := notepad.Open(dir, store.Options{})
		must(t, err)
		_, _, err = n.Write(ctx, "a", nil, "keep me\n")
		must(t, err)
		_, _, err = n.Write(ctx, "b", nil, "and me\n")
		must(t, err)
		before, selBefore, err := n.List(ctx)
		must(t, err)

		b := startBox(t, dir, hostapi.Methods())
		r := b.sh(`nsbox call notepad clear '{}'`)
		expect(t, r.code == 1 && strings.Contains(r.stderr, "host API notepad.clear is not allowed by the policy"), "clear under the default allowlist: %d %q", r.code, r.stderr)

		careless := append(hostapi.Methods(), "notepad.clear", "notepad.select")
		b = startBox(t, dir, careless)
		// One `nsbox call` per command: see docs/hostapi.md, "Known limits".
		r = b.sh(`nsbox call notepad clear '{}'`)
		expect(t, r.code == 1 && strings.Contains(r.stderr, "host API notepad.clear has no handler"), "clear under a careless policy: %d %q", r.code, r.stderr)
		r = b.sh(`nsbox call notepad select '{"id":"b"}'`)
		expect(t, r.code == 1 && strings.Contains(r.stderr, "host API notepad.select has no handler"), "select under a careless policy: %d %q", r.code, r.stderr)
		// A reachable method still works in the same session.
		r = b.sh(`nsbox call notepad list '{}'`)
		expect(t, r.code == 0 && strings.Contains(r.stdout, `"selected":"a"`), "list: %d %q %q", r.code, r.stdout, r.stderr)

		// A tool whose method the policy does not allow fails with the
		// policy's refusal, and changes nothing.
		b = startBox(t, dir, []string{"notepad.list"})
		tr := b.tool("document_overwrite", map[string]any{"id": "a", "content": "overwritten"})
		expect(t, !tr.Success && tr.errText() == "host API notepad.write is not allowed by the policy", "tool outside the allowlist: %+v", tr)

		after, selAfter, err := n.List(ctx)
		must(t, err)
		expect(t, reflect.DeepEqual(before, after) && selBefore == selAfter, "tabs changed: %+v -> %+v", before, after)
	})
}

// The document bound (2 MiB) is enforced with a clear error; a 20 MiB
// document never reaches the store; the largest allowed one round-trips.
func TestLargeDocuments(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		dir := dataDir(t)
		b := startBox(t, dir, hostapi.Methods())
		r := b.tool("document_overwrite", map[string]any{"id": "big", "content": strings.Repeat("x", 3<<20)})
		expect(t, !r.Success && r.errText() == "the document is too large: 3145728 bytes, the limit is 2097152 bytes", "3 MiB: %+v", r)

		raw, _ := json.Marshal(map[string]any{"id": "huge", "content": strings.Repeat("y", 20<<20)})
		_, err := b.s.CallTool(ctx, "document_overwrite", raw, 0)
		expect(t, err != nil && strings.Contains(err.Error(), "limit"), "20 MiB: %v", err)
		t.Logf("20 MiB document_overwrite: %v", err)

		max := strings.Repeat("z", notepad.MaxDocumentBytes-1) + "\n"
		b.mustTool("document_overwrite", map[string]any{"id": "max", "content": max}, nil)
		var rd struct{ Content string }
		b.mustTool("document_read", map[string]any{"id": "max"}, &rd)
		expect(t, rd.Content == max, "max document read back with %d bytes", len(rd.Content))

		n, _ := notepad.Open(dir, store.Options{})
		tabs, _, err := n.List(ctx)
		must(t, err)
		expect(t, len(tabs) == 1 && tabs[0].ID == "max", "tabs: %+v", tabs)
	})
}

// A corrupt store is reported to the sandbox with the file named, and the
// file is left as it was.
func TestCorruptStoreFromInside(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		dir := dataDir(t)
		must(t, os.MkdirAll(dir, 0o700))
		garbage := strings.Repeat("this is not a database\n", 1000)
		must(t, os.WriteFile(dir+"/memory.db", []byte(garbage), 0o600))
		b := startBox(t, dir, hostapi.Methods())
		r := b.tool("memory_save", map[string]any{"text": "x"})
		expect(t, !r.Success && strings.Contains(r.errText(), dir+"/memory.db is unreadable") && strings.Contains(r.errText(), "left untouched"), "corrupt store: %+v", r)
		data, err := os.ReadFile(dir + "/memory.db")
		must(t, err)
		expect(t, string(data) == garbage, "the corrupt store was modified")
		// The notepad, in its own file, still works.
		b.mustTool("document_overwrite", map[string]any{"content": "fine"}, nil)
	})
}
