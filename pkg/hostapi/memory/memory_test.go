package memory

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/hostapi/store"
	"github.com/nsbox/nsbox/pkg/ipc"
)

var ctx = context.Background()

func open(t *testing.T, dir string) *Memory {
	t.Helper()
	m, err := Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A clock that advances, so that "most recent" is well defined.
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	m.now = func() time.Time { n++; return base.Add(time.Duration(n) * time.Second) }
	return m
}

func save(t *testing.T, m *Memory, key, text string, tags ...string) Record {
	t.Helper()
	r, _, err := m.Save(ctx, key, text, tags)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSaveGetPersists(t *testing.T) {
	dir := t.TempDir()
	m := open(t, dir)
	r1, created, err := m.Save(ctx, "color", "Favourite colour is teal", []string{"Pref", "pref", " ui "})
	if err != nil || !created {
		t.Fatalf("save: %v created=%v", err, created)
	}
	if !reflect.DeepEqual(r1.Tags, []string{"pref", "ui"}) {
		t.Fatalf("tags not normalised: %q", r1.Tags)
	}
	r2, created, err := m.Save(ctx, "color", "Favourite colour is orange", nil)
	if err != nil || created {
		t.Fatalf("overwrite: %v created=%v", err, created)
	}
	if !r2.Created.Equal(r1.Created) || !r2.Updated.After(r1.Updated) {
		t.Fatalf("overwrite timestamps: %+v then %+v", r1, r2)
	}
	// A new handle (as another process would open it) sees the data.
	got, err := open(t, dir).Get(ctx, "color")
	if err != nil || got.Text != "Favourite colour is orange" {
		t.Fatalf("get after reopen: %+v, %v", got, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, FileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("store file: %v %v", fi, err)
	}
}

func TestDerivedKeysAreUnique(t *testing.T) {
	m := open(t, t.TempDir())
	a := save(t, m, "", "Deploy with make release, then tag")
	b := save(t, m, "", "Deploy with make release, then tag")
	c := save(t, m, "", "!!!")
	if a.Key != "deploy-with-make-release-then" || b.Key != a.Key+"-2" || c.Key != "memory" {
		t.Fatalf("keys: %q %q %q", a.Key, b.Key, c.Key)
	}
}

func TestRecallRanksBestFirst(t *testing.T) {
	m := open(t, t.TempDir())
	save(t, m, "db", "The project uses PostgreSQL 16 for storage; migrations live in db/migrations.", "database")
	save(t, m, "ci", "CI runs on GitHub Actions; the deploy job needs the DEPLOY_TOKEN secret.", "ci")
	save(t, m, "style", "Code style: gofmt, short functions, errors wrapped with %w.", "style")
	save(t, m, "deploy", "Deploy to production with make release. Deploy only on Fridays after review. Deploy logs go to /var/log/deploy.", "ops")
	save(t, m, "misc", "Lunch is at noon.")

	res, err := m.Recall(ctx, "how do I deploy", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) < 2 || res[0].Key != "deploy" || res[1].Key != "ci" {
		t.Fatalf("ranking for 'deploy': %v", keys(res))
	}
	for i := 1; i < len(res); i++ {
		if res[i].Score > res[i-1].Score {
			t.Fatalf("results not sorted by score: %+v", res)
		}
	}
	// A tag match outranks a mere mention in the text.
	save(t, m, "pg-note", "Remember to vacuum.", "postgresql")
	save(t, m, "mention", "Someone once said postgresql in a meeting about lunch and coffee and other things.")
	res, _ = m.Recall(ctx, "postgresql", nil, 0)
	if len(res) < 3 || res[len(res)-1].Key != "mention" {
		t.Fatalf("tag boost: %v", keys(res))
	}
	// Plurals fold: "migration" finds "migrations".
	res, _ = m.Recall(ctx, "migration", nil, 0)
	if len(res) != 1 || res[0].Key != "db" {
		t.Fatalf("stemming: %v", keys(res))
	}
	// No match, no results (not an error).
	if res, err := m.Recall(ctx, "kubernetes", nil, 0); err != nil || len(res) != 0 {
		t.Fatalf("no match: %v %v", keys(res), err)
	}
	// Tags filter; a query equal to a key wins.
	res, _ = m.Recall(ctx, "deploy", []string{"ci"}, 0)
	if len(res) != 1 || res[0].Key != "ci" {
		t.Fatalf("tag filter: %v", keys(res))
	}
	res, _ = m.Recall(ctx, "style", nil, 1)
	if len(res) != 1 || res[0].Key != "style" {
		t.Fatalf("limit/key: %v", keys(res))
	}
}

func keys(ms []Match) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Key)
	}
	return out
}

func TestDeleteAndErrors(t *testing.T) {
	m := open(t, t.TempDir())
	save(t, m, "k", "text")
	if err := m.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	err := m.Delete(ctx, "k")
	var nf *store.NotFoundError
	if !errors.As(err, &nf) || err.Error() != `no memory with key "k"` {
		t.Fatalf("delete unknown: %v", err)
	}
	if _, _, err := m.Save(ctx, "k", strings.Repeat("x", MaxTextBytes+1), nil); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("huge text: %v", err)
	}
	if _, _, err := m.Save(ctx, "k", "  ", nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("empty text: %v", err)
	}
	if _, _, err := m.Save(ctx, "a\nb", "x", nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("control char in key: %v", err)
	}
	if _, err := m.Recall(ctx, "", nil, 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("empty recall: %v", err)
	}
}

func TestListRecentFirst(t *testing.T) {
	m := open(t, t.TempDir())
	save(t, m, "a", "one", "x")
	save(t, m, "b", "two")
	save(t, m, "c", "three", "x")
	recs, total, err := m.List(ctx, "", 2)
	if err != nil || total != 3 || len(recs) != 2 || recs[0].Key != "c" || recs[1].Key != "b" {
		t.Fatalf("list: %+v total=%d %v", recs, total, err)
	}
	recs, total, _ = m.List(ctx, "X", 0)
	if total != 2 || recs[0].Key != "c" || recs[1].Key != "a" {
		t.Fatalf("list by tag: %+v", recs)
	}
}

// call runs one host API method as a sandbox would reach it.
func call(t *testing.T, m *Memory, method, args string) (ipc.Value, error) {
	t.Helper()
	v, err := ipc.ParseValue([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	for _, meth := range methods(m) {
		if meth.Name == method {
			out, err := meth.Fn(ctx, v)
			if err != nil {
				return nil, err
			}
			return ipc.ToValue(out)
		}
	}
	t.Fatalf("no method %s", method)
	return nil, nil
}

// Only plain data crosses: every result is an ipc.Value (the type admits
// nothing else) and survives the trip through JSON unchanged.
func TestResultsArePlainData(t *testing.T) {
	m := open(t, t.TempDir())
	for _, c := range []struct{ method, args string }{
		{"save", `{"key":"k","text":"remember the milk","tags":["shopping"]}`},
		{"save", `{"text":"a derived key"}`},
		{"recall", `{"query":"milk"}`},
		{"recall", `{"key":"k"}`},
		{"recall", `{"tags":["shopping"]}`},
		{"list", `{}`},
		{"list", `null`},
		{"delete", `{"key":"k"}`},
	} {
		v, err := call(t, m, c.method, c.args)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.args, err)
		}
		data, err := ipc.MarshalValue(v)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ipc.ParseValue(data)
		if err != nil || !reflect.DeepEqual(back, v) {
			t.Fatalf("%s: result changed through JSON: %#v -> %#v (%v)", c.method, v, back, err)
		}
		if _, ok := v.(ipc.Map); !ok {
			t.Fatalf("%s: result is %T, want an object", c.method, v)
		}
	}
}

func TestHandlerArgumentErrors(t *testing.T) {
	m := open(t, t.TempDir())
	for args, want := range map[string]string{
		`{"text":"x","colour":"red"}`: `invalid argument "colour": unknown argument`,
		`{"text":42}`:                 `invalid argument "text": want a string`,
		`[1,2]`:                       `arguments must be a JSON object`,
		`{"key":"k"}`:                 `invalid argument "text": is empty`,
	} {
		_, err := call(t, m, "save", args)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("save %s: %v, want %q", args, err, want)
		}
	}
	_, err := call(t, m, "recall", `{"key":"k","query":"q"}`)
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("key and query: %v", err)
	}
	_, err = call(t, m, "delete", `{"key":"nope"}`)
	if err == nil || err.Error() != `no memory with key "nope"` {
		t.Errorf("delete unknown: %v", err)
	}
}

func TestToolsMapToMethods(t *testing.T) {
	allowed := map[string]bool{}
	for _, m := range Methods() {
		allowed[m] = true
	}
	want := []string{"memory_save", "memory_recall", "memory_delete"}
	var got []string
	for _, tl := range Tools() {
		d := tl.Definition()
		got = append(got, d.Name)
		var schema map[string]any
		if err := json.Unmarshal(d.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Fatalf("%s: bad schema: %v", d.Name, err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	if !reflect.DeepEqual(Methods(), []string{"memory.save", "memory.recall", "memory.delete", "memory.list"}) {
		t.Fatalf("methods: %v", Methods())
	}
}
