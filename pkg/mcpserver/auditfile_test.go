package mcpserver

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestAuditRefusesSymlinkAndFIFO(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "bashrc")
	os.WriteFile(victim, []byte("# rc\n"), 0o644)
	link := filepath.Join(dir, "audit.jsonl")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenAudit(link, 0); !errors.Is(err, ErrAuditNotRegular) {
		t.Fatalf("symlink: %v, want ErrAuditNotRegular", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "# rc\n" {
		t.Fatalf("the symlink's target changed: %q", b)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenAudit(fifo, 0); !errors.Is(err, ErrAuditNotRegular) {
		t.Fatalf("fifo: %v, want ErrAuditNotRegular", err)
	}
	if _, err := OpenAudit(dir, 0); err == nil {
		t.Fatal("a directory was accepted")
	}
}

func refusal(i int, method string) []byte {
	return []byte(fmt.Sprintf(`{"api":"evil","args":{"i":%d},"duration_us":1,"error":"denied: evil.%s is not allowed","kind":"hostCall","method":%q,"ok":false,"session":"s1","time":"t"}`+"\n", i, method, method))
}

func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestAuditCoalescesRefusals: a loop of identical refusals writes its first
// line and then counts; every refusal is accounted for.
func TestAuditCoalescesRefusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := OpenAudit(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1000, 0)
	a.now = func() time.Time { return clock }
	const n = 100000
	for i := 0; i < n; i++ {
		if i%10000 == 0 {
			clock = clock.Add(2 * coalesceEvery)
		}
		a.Write(refusal(i, "x"))
	}
	a.Write([]byte(`{"kind":"tool","tool":"read_file","ok":true,"session":"s1"}` + "\n"))
	a.Close()
	lines := readLines(t, path)
	if len(lines) > 30 {
		t.Fatalf("%d lines for %d identical refusals", len(lines), n)
	}
	total := 0
	for _, l := range lines {
		switch l["kind"] {
		case "hostCall":
			total++
		case "repeated":
			total += int(l["count"].(float64))
			if r, _ := l["repeated"].(map[string]any); r["method"] != "x" {
				t.Fatalf("repeated line does not say what: %v", l)
			}
		}
	}
	if total != n {
		t.Fatalf("%d refusals accounted for, want %d", total, n)
	}
	// A line that is no refusal is written at once; the count of the
	// refusals before it follows when its second ends (here: at Close).
	if l := lines[len(lines)-2]; l["tool"] != "read_file" {
		t.Fatalf("line before the last count: %v", l)
	}
}

// TestAuditCoalescesRefusalsInTurn: refusals of a few kinds in turn are
// counted like a run of one kind (two kinds in turn were each a full
// line, and a flood of them pushed every earlier line out of a capped
// log); refusals of ever new kinds past maxRuns are counted together.
func TestAuditCoalescesRefusalsInTurn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := OpenAudit(path, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1000, 0)
	a.now = func() time.Time { return clock }
	a.Write([]byte(`{"kind":"tool","tool":"evidence","ok":true,"session":"s1"}` + "\n"))
	// Two kinds in turn over ten seconds, then ever new kinds within one
	// second (only maxRuns of them are lines of their own).
	const n = 30000
	for i := 0; i < 20000; i++ {
		if i%2000 == 0 {
			clock = clock.Add(coalesceEvery)
		}
		a.Write(refusal(i, "ab"[i%2:i%2+1]))
	}
	clock = clock.Add(coalesceEvery)
	for i := 20000; i < n; i++ {
		a.Write(refusal(i, fmt.Sprintf("new%d", i)))
	}
	a.Close()
	lines := readLines(t, path)
	if lines[0]["tool"] != "evidence" {
		t.Fatalf("the line before the flood is gone: first line %v", lines[0])
	}
	if len(lines) > 2*10+maxRuns+10 {
		t.Fatalf("%d lines for %d refusals of two kinds in turn and of new kinds", len(lines), n)
	}
	total := 0
	for _, l := range lines {
		switch l["kind"] {
		case "hostCall":
			total++
		case "repeated":
			total += int(l["count"].(float64))
		}
	}
	if total != n {
		t.Fatalf("%d refusals accounted for, want %d", total, n)
	}
}

// TestAuditRotatesInPlaceWhenTheDirectoryIsReadOnly: a directory made
// read-only (by a root-less sandbox that may write it) does not stop the
// log: FILE.1 is rewritten in place, and the file keeps its cap.
func TestAuditRotatesInPlaceWhenTheDirectoryIsReadOnly(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores the directory's mode")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	const max = 16 << 10
	a, err := OpenAudit(path, max)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o555)
	defer os.Chmod(dir, 0o755)
	for i := 0; i < 2000; i++ {
		if _, err := a.Write([]byte(fmt.Sprintf(`{"kind":"tool","tool":"t%d","ok":true}`+"\n", i))); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	a.Close()
	st, _ := os.Stat(path)
	old, _ := os.Stat(path + ".1")
	if st.Size() > max || old == nil || old.Size() == 0 || old.Size() > max {
		t.Fatalf("sizes %d and %v, cap %d", st.Size(), old, max)
	}
	if l := readLines(t, path); l[len(l)-1]["tool"] != "t1999" {
		t.Fatalf("last line %v", l[len(l)-1])
	}
}

// TestAuditRotatesAtCap: refusals that differ (so are not coalesced) never
// grow the log past twice its cap, and the file keeps its inode.
func TestAuditRotatesAtCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	const max = 64 << 10
	a, err := OpenAudit(path, max)
	if err != nil {
		t.Fatal(err)
	}
	st0, _ := os.Stat(path)
	// A second between refusals: none is like one of the last second,
	// so each is a line of its own.
	clock := time.Unix(1000, 0)
	a.now = func() time.Time { clock = clock.Add(coalesceEvery); return clock }
	for i := 0; i < 5000; i++ {
		if _, err := a.Write(refusal(i, fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	st, _ := os.Stat(path)
	old, err := os.Stat(path + ".1")
	if err != nil {
		t.Fatalf("no rotated file: %v", err)
	}
	if st.Size() > max || old.Size() > max {
		t.Fatalf("sizes %d and %d, cap %d", st.Size(), old.Size(), max)
	}
	if !os.SameFile(st0, st) {
		t.Fatal("rotation replaced the audit file")
	}
	if old.Mode().Perm() != 0o600 {
		t.Fatalf("rotated file mode %v", old.Mode())
	}
	if l := readLines(t, path); !strings.HasPrefix(l[len(l)-1]["method"].(string), "m4999") {
		t.Fatalf("last line %v", l[len(l)-1])
	}
}

// TestAuditRotatesInItsOwnDirectory: a sandbox that can write above the
// audit file turns its directory into a symlink to another one while the
// server runs; the rotation's FILE.1 and temporary file stay in the
// directory the file was opened in (review 71), never made through the
// path again.
func TestAuditRotatesInItsOwnDirectory(t *testing.T) {
	base := t.TempDir()
	logs, victim := filepath.Join(base, "logs"), filepath.Join(base, "victim")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	const max = 16 << 10
	a, err := OpenAudit(filepath.Join(logs, "audit.jsonl"), max)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(logs, logs+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, logs); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i++ {
		if _, err := a.Write([]byte(fmt.Sprintf(`{"kind":"tool","tool":"t%d","ok":true}`+"\n", i))); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	a.Close()
	if ents, _ := os.ReadDir(victim); len(ents) != 0 {
		t.Errorf("the rotation wrote %s into the directory the path now leads to", ents[0].Name())
	}
	if old, err := os.Stat(filepath.Join(logs+".moved", "audit.jsonl.1")); err != nil || old.Size() == 0 {
		t.Errorf("no rotated part beside the file: %v", err)
	}
}
