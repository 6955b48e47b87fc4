package notepad

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/hostapi/store"
	"github.com/nsbox/nsbox/pkg/ipc"
)

var ctx = context.Background()

func open(t *testing.T, dir string) *Notepad {
	t.Helper()
	n, err := Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	i := 0
	n.now = func() time.Time { i++; return base.Add(time.Duration(i) * time.Second) }
	return n
}

func ptr(s string) *string { return &s }

func TestWriteCreatesThenUpdates(t *testing.T) {
	dir := t.TempDir()
	n := open(t, dir)
	m, created, err := n.Write(ctx, "", nil, "# Plan\n\n1. write code\n")
	if err != nil || !created {
		t.Fatalf("create: %v created=%v", err, created)
	}
	if m.ID != "tab-1" || m.Title != "Plan" || !m.Selected || m.Lines != 3 || m.Size != 22 {
		t.Fatalf("new tab: %+v", m)
	}
	// No id: the selected tab is overwritten, not a new one made.
	m2, created, err := n.Write(ctx, "", ptr("Plan v2"), "1. write code\n2. test it\n")
	if err != nil || created || m2.ID != "tab-1" || m2.Title != "Plan v2" || !m2.Created.Equal(m.Created) || !m2.Updated.After(m.Updated) {
		t.Fatalf("overwrite: %+v created=%v %v", m2, created, err)
	}
	// A named tab is created beside it, and does not take the selection.
	m3, created, err := n.Write(ctx, "notes", nil, "")
	if err != nil || !created || m3.Selected || m3.Title != "Untitled" {
		t.Fatalf("named tab: %+v %v", m3, err)
	}
	tabs, sel, err := open(t, dir).List(ctx)
	if err != nil || sel != "tab-1" || len(tabs) != 2 || tabs[0].ID != "tab-1" || tabs[1].ID != "notes" {
		t.Fatalf("list: %+v sel=%q %v", tabs, sel, err)
	}
	tab, err := n.Get(ctx, "")
	if err != nil || tab.Content != "1. write code\n2. test it\n" {
		t.Fatalf("get selected: %+v %v", tab, err)
	}
}

func TestPatchIsAtomic(t *testing.T) {
	n := open(t, t.TempDir())
	n.Write(ctx, "d", nil, "a\nb\nc\n")
	if _, err := n.Patch(ctx, "d", "@@ -2 +2 @@\n-b\n+B\n", nil); err != nil {
		t.Fatal(err)
	}
	_, err := n.Patch(ctx, "d", "@@ -1 +1 @@\n-a\n+A\n@@ -3 +3 @@\n-x\n+X\n", nil)
	var pe *PatchError
	if !errors.As(err, &pe) || pe.Hunk != 2 {
		t.Fatalf("bad second hunk: %v", err)
	}
	_, err = n.Patch(ctx, "d", "", []Edit{{Search: "a", Replace: "A"}, {Search: "zzz", Replace: ""}})
	if !errors.Is(err, ErrPatch) {
		t.Fatalf("bad edit: %v", err)
	}
	tab, _ := n.Get(ctx, "d")
	if tab.Content != "a\nB\nc\n" {
		t.Fatalf("a failed patch changed the tab: %q", tab.Content)
	}
	if _, err := n.Patch(ctx, "d", "x", []Edit{{Search: "a"}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("diff and edits: %v", err)
	}
	if _, err := n.Patch(ctx, "nope", "", []Edit{{Search: "a"}}); err == nil || err.Error() != `no tab with id "nope"` {
		t.Fatalf("unknown tab: %v", err)
	}
}

func TestCloseAndHostOnlyOperations(t *testing.T) {
	n := open(t, t.TempDir())
	n.Write(ctx, "a", nil, "1")
	n.Write(ctx, "b", nil, "2")
	n.Write(ctx, "c", nil, "3")
	err := n.Close(ctx, "zzz")
	var nf *store.NotFoundError
	if !errors.As(err, &nf) || err.Error() != `no tab with id "zzz"` {
		t.Fatalf("close unknown: %v", err)
	}
	if err := n.Select(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := n.Select(ctx, "zzz"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("select unknown: %v", err)
	}
	// Closing the selected tab selects the next one.
	if err := n.Close(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, sel, _ := n.List(ctx); sel != "c" {
		t.Fatalf("selection after close: %q", sel)
	}
	count, err := n.Clear(ctx)
	if err != nil || count != 2 {
		t.Fatalf("clear: %d %v", count, err)
	}
	tabs, sel, _ := n.List(ctx)
	if len(tabs) != 0 || sel != "" {
		t.Fatalf("after clear: %+v %q", tabs, sel)
	}
	if _, err := n.Get(ctx, ""); err == nil || err.Error() != "no tab is selected; give a tab id" {
		t.Fatalf("get with no selection: %v", err)
	}
	// Ids keep counting after a clear: an old id never names a new tab.
	m, _, _ := n.Write(ctx, "", nil, "x")
	if m.ID != "tab-4" {
		t.Fatalf("id after clear: %s", m.ID)
	}
}

func TestDocumentBounds(t *testing.T) {
	n := open(t, t.TempDir())
	big := strings.Repeat("0123456789abcdef", 20<<20/16) // 20 MiB
	_, _, err := n.Write(ctx, "big", nil, big)
	var tl *store.TooLargeError
	if !errors.As(err, &tl) || tl.Limit != MaxDocumentBytes {
		t.Fatalf("20 MiB document: %v", err)
	}
	if want := "the document is too large: 20971520 bytes, the limit is 2097152 bytes"; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	// The largest allowed document is stored and read back whole, and its
	// result fits the channel.
	max := strings.Repeat("x", MaxDocumentBytes)
	if _, _, err := n.Write(ctx, "max", nil, max); err != nil {
		t.Fatal(err)
	}
	v, err := call(t, n, "content", `{"id":"max"}`)
	if err != nil {
		t.Fatal(err)
	}
	if c := v.(ipc.Map)["content"].(ipc.String); len(c) != MaxDocumentBytes {
		t.Fatalf("read back %d bytes", len(c))
	}
	// A patch cannot grow a document past the bound either.
	_, err = n.Patch(ctx, "max", "", []Edit{{Search: "x", Replace: "yy", All: true}})
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("growing patch: %v", err)
	}
	if _, _, err := n.Write(ctx, "bad", nil, "\xff\xfe"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("invalid UTF-8: %v", err)
	}
	if _, _, err := n.Write(ctx, "../etc", nil, "x"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bad id: %v", err)
	}
}

func TestTabLimit(t *testing.T) {
	n := open(t, t.TempDir())
	for i := 0; i < MaxTabs; i++ {
		if _, _, err := n.Write(ctx, fmt.Sprintf("t%d", i), nil, "x"); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := n.Write(ctx, "one-more", nil, "x")
	if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "100 tabs") {
		t.Fatalf("tab limit: %v", err)
	}
	// Overwriting an existing tab is still fine.
	if _, _, err := n.Write(ctx, "t0", nil, "y"); err != nil {
		t.Fatal(err)
	}
}

func call(t *testing.T, n *Notepad, method, args string) (ipc.Value, error) {
	t.Helper()
	v, err := ipc.ParseValue([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range methods(n) {
		if m.Name == method {
			out, err := m.Fn(ctx, v)
			if err != nil {
				return nil, err
			}
			return ipc.ToValue(out)
		}
	}
	t.Fatalf("no method %s", method)
	return nil, nil
}

func TestResultsArePlainData(t *testing.T) {
	n := open(t, t.TempDir())
	for _, c := range []struct{ method, args string }{
		{"write", `{"content":"hello\nworld\n"}`},
		{"write", `{"id":"two","title":"Two","content":"x"}`},
		{"list", `{}`},
		{"metadata", `{"id":"two"}`},
		{"content", `{}`},
		{"patch", `{"diff":"@@ -1 +1 @@\n-hello\n+hi\n"}`},
		{"patch", `{"id":"two","edits":[{"search":"x","replace":"y"}]}`},
		{"close", `{"id":"two"}`},
	} {
		v, err := call(t, n, c.method, c.args)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.args, err)
		}
		data, err := ipc.MarshalValue(v)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ipc.ParseValue(data)
		if err != nil || !reflect.DeepEqual(back, v) {
			t.Fatalf("%s: result changed through JSON: %#v -> %#v", c.method, v, back)
		}
	}
}

func TestHandlerErrors(t *testing.T) {
	n := open(t, t.TempDir())
	for _, c := range []struct{ method, args, want string }{
		{"close", `{"id":"nope"}`, `no tab with id "nope"`},
		{"close", `{}`, `invalid argument "id": is required`},
		{"write", `{"id":"a"}`, `invalid argument "content": is required`},
		{"write", `{"content":"x","select":true}`, `invalid argument "select": unknown argument`},
		{"content", `{}`, `no tab is selected; give a tab id`},
		{"patch", `{"id":"a","diff":"@@ -1 +1 @@\n-a\n+b\n"}`, `no tab with id "a"`},
	} {
		_, err := call(t, n, c.method, c.args)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s %s: %v, want %q", c.method, c.args, err, c.want)
		}
	}
}

func TestHostOnlyOperationsAreNotMethods(t *testing.T) {
	want := []string{"notepad.list", "notepad.metadata", "notepad.content", "notepad.write", "notepad.patch", "notepad.close"}
	if !reflect.DeepEqual(Methods(), want) {
		t.Fatalf("methods %v, want %v", Methods(), want)
	}
	tools := map[string]string{}
	for _, tl := range Tools() {
		d := tl.Definition()
		var schema map[string]any
		if err := json.Unmarshal(d.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Fatalf("%s: bad schema (%v)", d.Name, err)
		}
		tools[d.Name] = d.Description
	}
	for _, name := range []string{"document_read", "document_overwrite", "document_patch", "notepad_list_tabs", "notepad_get_metadata", "notepad_get_content", "notepad_close_tab"} {
		if tools[name] == "" {
			t.Errorf("tool %s missing", name)
		}
	}
	if len(tools) != 7 {
		t.Errorf("%d tools, want 7", len(tools))
	}
}
