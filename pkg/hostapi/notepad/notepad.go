// Package notepad is the "notepad" host API: text documents kept as tabs
// (id, title, content, timestamps) on the host ($XDG_DATA_HOME/nsbox/
// notepad.db). A sandbox lists, reads, writes, patches and closes tabs
// through hostCall; selecting a tab and clearing the notepad are host-only
// operations that exist in this Go API but are never registered as host
// API methods.
package notepad

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/nsbox/nsbox/pkg/hostapi/store"
	"github.com/nsbox/nsbox/pkg/ipc"
)

// API is the host API name.
const API = "notepad"

// FileName is the store file inside the data directory.
const FileName = "notepad.db"

// Bounds. MaxDocumentBytes and MaxDocumentJSONBytes keep every document
// readable from inside a sandbox: a program there reaches the host through
// a socket that carries at most 4 MiB per message, and a result is at most
// 3 MiB of JSON text (hostcall.MaxResultBytes), in which a document's
// characters take up to 6 bytes each ("<" is \u003c): 2 MiB of "<" was
// stored and could never be read back (review 18). A document over either
// bound is refused, from the host API and from this Go API alike, with a
// *store.TooLargeError.
const (
	MaxDocumentBytes = 2 << 20
	// MaxDocumentJSONBytes bounds the document as a JSON string, leaving
	// the rest of a result (id, title, time) 16 KiB.
	MaxDocumentJSONBytes = 3<<20 - 16<<10
	MaxTitleBytes        = 256
	MaxTabs              = 100
)

const (
	tabsBucket  = "tabs"
	metaBucket  = "meta"
	selectedKey = "selected"
)

// Tab is one document.
type Tab struct {
	ID      string    `json:"id"`
	Title   string    `json:"title"`
	Content string    `json:"content"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Order is the creation sequence; tabs list in this order.
	Order uint64 `json:"order"`
}

// Meta describes a tab without its content.
type Meta struct {
	ID       string    `json:"id"`
	Title    string    `json:"title"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
	Size     int       `json:"size"`  // bytes
	Lines    int       `json:"lines"` // lines of text
	Selected bool      `json:"selected"`
}

func (t *Tab) meta(selected string) Meta {
	lines := strings.Count(t.Content, "\n")
	if t.Content != "" && !strings.HasSuffix(t.Content, "\n") {
		lines++
	}
	return Meta{ID: t.ID, Title: t.Title, Created: t.Created, Updated: t.Updated,
		Size: len(t.Content), Lines: lines, Selected: t.ID == selected}
}

// Notepad is the notepad store.
type Notepad struct {
	st  *store.Store
	now func() time.Time
}

// Open returns the notepad in dataDir (nothing is created until the first
// write).
func Open(dataDir string, o store.Options) (*Notepad, error) {
	st, err := store.New(filepath.Join(dataDir, FileName), API, o)
	if err != nil {
		return nil, err
	}
	return &Notepad{st: st, now: time.Now}, nil
}

// Path is the store file.
func (n *Notepad) Path() string { return n.st.Path() }

// isID reports whether id is a tab id: ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$
// (idSchema says the same to callers), checked byte by byte.
func isID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

func checkID(id string) error {
	if !isID(id) {
		return &store.ArgError{Field: "id", Msg: fmt.Sprintf("%q is not a tab id (1-64 letters, digits, '.', '_' or '-')", clipID(id))}
	}
	return nil
}

func clipID(id string) string {
	if len(id) > 70 {
		return id[:64] + "..."
	}
	return id
}

func checkContent(content string) error {
	if len(content) > MaxDocumentBytes {
		return &store.TooLargeError{What: "the document", Size: len(content), Limit: MaxDocumentBytes}
	}
	if n := ipc.StringLen(content); n > MaxDocumentJSONBytes {
		return &store.TooLargeError{What: "the document as JSON text (quotes, newlines and control characters take 2 to 6 bytes each)", Size: n, Limit: MaxDocumentJSONBytes}
	}
	if !utf8.ValidString(content) {
		return &store.ArgError{Field: "content", Msg: "is not valid UTF-8 text"}
	}
	return nil
}

func checkTitle(title string) error {
	switch {
	case len(title) > MaxTitleBytes:
		return &store.TooLargeError{What: "the title", Size: len(title), Limit: MaxTitleBytes}
	case !utf8.ValidString(title) || strings.IndexFunc(title, unicode.IsControl) >= 0:
		return &store.ArgError{Field: "title", Msg: "must be one line of printable UTF-8"}
	}
	return nil
}

// List returns the tabs in creation order, and the selected tab's id ("" when
// none is).
//
// It holds no document: each tab's content is measured as it is decoded
// and dropped. Decoding every tab whole (100 of 2 MiB) held over 200 MiB
// a call, calls side by side, outside every budget (review 40).
func (n *Notepad) List(ctx context.Context) ([]Meta, string, error) {
	out := []Meta{}
	var sel string
	err := n.st.View(ctx, func(tx *store.Tx) error {
		sel = string(tx.Get(metaBucket, selectedKey))
		tabs, err := n.tabs(tx)
		for _, t := range tabs {
			out = append(out, Meta{ID: t.ID, Title: t.Title, Created: t.Created, Updated: t.Updated,
				Size: t.Content.size, Lines: t.Content.lines, Selected: t.ID == sel})
		}
		return err
	})
	return out, sel, err
}

// tabRecord is a stored tab read for its metadata: its content is
// measured, not kept.
type tabRecord struct {
	ID      string      `json:"id"`
	Title   string      `json:"title"`
	Content contentSize `json:"content"`
	Created time.Time   `json:"created"`
	Updated time.Time   `json:"updated"`
	Order   uint64      `json:"order"`
}

// contentSize is a document's length in bytes and lines, as Tab.meta
// counts them.
type contentSize struct{ size, lines int }

// UnmarshalJSON measures the JSON string b as encoding/json would decode
// it, without decoding it: the record is valid JSON by then (Unmarshal
// checks it whole first), so b is a string literal or null.
func (c *contentSize) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return errors.New("content is not a string")
	}
	size, newlines, last := 0, 0, byte(0)
	for i := 1; i < len(b)-1; {
		ch := b[i]
		switch {
		case ch == '\\':
			e := b[i+1]
			i += 2
			if e != 'u' {
				size++
				last = e // n for a newline; any other escape is one byte
				if e == 'n' {
					newlines++
				}
				continue
			}
			r := hexRune(b[i : i+4])
			i += 4
			if utf16.IsSurrogate(r) {
				if i+6 <= len(b)-1 && b[i] == '\\' && b[i+1] == 'u' {
					if r2 := utf16.DecodeRune(r, hexRune(b[i+2:i+6])); r2 != unicode.ReplacementChar {
						r = r2
						i += 6
					} else {
						r = unicode.ReplacementChar
					}
				} else {
					r = unicode.ReplacementChar
				}
			}
			size += utf8.RuneLen(r)
			last = 'x'
			if r == '\n' {
				newlines++
				last = 'n'
			}
		case ch < utf8.RuneSelf:
			size++
			i++
			last = 'x'
		default:
			r, n := utf8.DecodeRune(b[i : len(b)-1])
			if r == utf8.RuneError && n == 1 {
				size += utf8.RuneLen(unicode.ReplacementChar) // as encoding/json replaces it
			} else {
				size += n
			}
			i += n
			last = 'x'
		}
	}
	c.size, c.lines = size, newlines
	if size > 0 && last != 'n' {
		c.lines++ // a last line without its newline, as Tab.meta counts it
	}
	return nil
}

// hexRune reads the four hex digits of a \u escape.
func hexRune(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// Metadata returns one tab's metadata ("" means the selected tab).
func (n *Notepad) Metadata(ctx context.Context, id string) (Meta, error) {
	var m Meta
	err := n.st.View(ctx, func(tx *store.Tx) error {
		t, sel, err := n.resolve(tx, id)
		if err == nil {
			m = t.meta(sel)
		}
		return err
	})
	return m, err
}

// Get returns one tab ("" means the selected tab).
func (n *Notepad) Get(ctx context.Context, id string) (Tab, error) {
	var t Tab
	err := n.st.View(ctx, func(tx *store.Tx) error {
		var err error
		t, _, err = n.resolve(tx, id)
		return err
	})
	return t, err
}

// Write replaces a tab's content (and its title, when title is not nil),
// creating the tab when it does not exist. An empty id means the selected
// tab, or a new tab when none is selected; a new tab is selected when no
// other is. It reports whether the tab was created.
func (n *Notepad) Write(ctx context.Context, id string, title *string, content string) (Meta, bool, error) {
	if id != "" {
		if err := checkID(id); err != nil {
			return Meta{}, false, err
		}
	}
	if err := checkContent(content); err != nil {
		return Meta{}, false, err
	}
	if title != nil {
		if err := checkTitle(*title); err != nil {
			return Meta{}, false, err
		}
	}
	var (
		m       Meta
		created bool
	)
	err := n.st.Update(ctx, func(tx *store.Tx) error {
		now := n.now().UTC()
		sel := string(tx.Get(metaBucket, selectedKey))
		if id == "" {
			id = sel
		}
		var t Tab
		found := false
		if id != "" {
			var err error
			t, found, err = n.load(tx, id)
			if err != nil {
				return err
			}
		}
		if !found {
			if c := tx.Len(tabsBucket); c >= MaxTabs {
				return &store.TooLargeError{What: "the notepad", Size: c, Limit: MaxTabs, Unit: "tabs"}
			}
			seq, err := tx.NextSequence(tabsBucket)
			if err != nil {
				return err
			}
			if id == "" {
				id = "tab-" + strconv.FormatUint(seq, 10)
				for tx.Get(tabsBucket, id) != nil {
					seq++
					id = "tab-" + strconv.FormatUint(seq, 10)
				}
			}
			t = Tab{ID: id, Title: defaultTitle(content), Created: now, Order: seq}
			created = true
			if sel == "" {
				sel = id
				if err := tx.Put(metaBucket, selectedKey, []byte(id)); err != nil {
					return err
				}
			}
		}
		if title != nil {
			t.Title = *title
		}
		t.Content, t.Updated = content, now
		m = t.meta(sel)
		return n.save(tx, &t)
	})
	return m, created, err
}

// Patch changes a tab ("" means the selected tab) with a unified diff or
// with search/replace edits (exactly one of them). The change is atomic:
// when a hunk or an edit does not apply, the tab is unchanged and the error
// (*PatchError or *EditError) names it.
func (n *Notepad) Patch(ctx context.Context, id, diff string, edits []Edit) (Meta, error) {
	if id != "" {
		if err := checkID(id); err != nil {
			return Meta{}, err
		}
	}
	switch {
	case diff == "" && len(edits) == 0:
		return Meta{}, &store.ArgError{Field: "diff", Msg: `give a unified diff in "diff" or a list of search/replace edits in "edits"`}
	case diff != "" && len(edits) > 0:
		return Meta{}, &store.ArgError{Field: "diff", Msg: `give either "diff" or "edits", not both`}
	}
	var m Meta
	err := n.st.Update(ctx, func(tx *store.Tx) error {
		t, sel, err := n.resolve(tx, id)
		if err != nil {
			return err
		}
		var content string
		if diff != "" {
			content, err = ApplyUnifiedDiff(t.Content, diff)
		} else {
			content, err = ApplyEdits(t.Content, edits)
		}
		if err != nil {
			return err
		}
		if err := checkContent(content); err != nil {
			return err
		}
		t.Content, t.Updated = content, n.now().UTC()
		m = t.meta(sel)
		return n.save(tx, &t)
	})
	return m, err
}

// Close removes a tab. When it was the selected tab, the next tab (or else
// the previous one) becomes selected.
func (n *Notepad) Close(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return n.st.Update(ctx, func(tx *store.Tx) error {
		tabs, err := n.tabs(tx)
		if err != nil {
			return err
		}
		idx := -1
		for i, t := range tabs {
			if t.ID == id {
				idx = i
			}
		}
		if idx < 0 {
			return &store.NotFoundError{Kind: "tab", ID: id}
		}
		if _, err := tx.Delete(tabsBucket, id); err != nil {
			return err
		}
		if string(tx.Get(metaBucket, selectedKey)) != id {
			return nil
		}
		switch {
		case idx+1 < len(tabs):
			return tx.Put(metaBucket, selectedKey, []byte(tabs[idx+1].ID))
		case idx > 0:
			return tx.Put(metaBucket, selectedKey, []byte(tabs[idx-1].ID))
		}
		_, err = tx.Delete(metaBucket, selectedKey)
		return err
	})
}

// Select makes id the selected tab. Host-only: it is not a host API method,
// so sandboxed code cannot change what the user is looking at.
func (n *Notepad) Select(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return n.st.Update(ctx, func(tx *store.Tx) error {
		if tx.Get(tabsBucket, id) == nil {
			return &store.NotFoundError{Kind: "tab", ID: id}
		}
		return tx.Put(metaBucket, selectedKey, []byte(id))
	})
}

// Clear closes every tab and returns how many there were. Host-only: it is
// not a host API method, so sandboxed code cannot wipe the user's notepad.
func (n *Notepad) Clear(ctx context.Context) (int, error) {
	count := 0
	err := n.st.Update(ctx, func(tx *store.Tx) error {
		var ids []string
		if err := tx.ForEachView(tabsBucket, func(k string, _ []byte) error { ids = append(ids, k); return nil }); err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := tx.Delete(tabsBucket, id); err != nil {
				return err
			}
		}
		count = len(ids)
		_, err := tx.Delete(metaBucket, selectedKey)
		return err
	})
	return count, err
}

// resolve finds the tab named id, or the selected tab for "".
func (n *Notepad) resolve(tx *store.Tx, id string) (Tab, string, error) {
	sel := string(tx.Get(metaBucket, selectedKey))
	if id == "" {
		if sel == "" {
			return Tab{}, sel, &store.NotFoundError{Kind: "tab"}
		}
		id = sel
	} else if err := checkID(id); err != nil {
		return Tab{}, sel, err
	}
	t, ok, err := n.load(tx, id)
	if err == nil && !ok {
		err = &store.NotFoundError{Kind: "tab", ID: id}
	}
	return t, sel, err
}

func (n *Notepad) load(tx *store.Tx, id string) (Tab, bool, error) {
	data := tx.Get(tabsBucket, id)
	if data == nil {
		return Tab{}, false, nil
	}
	var t Tab
	if err := json.Unmarshal(data, &t); err != nil {
		return Tab{}, false, &store.CorruptError{Path: n.st.Path(), Reason: fmt.Sprintf("tab %q is not valid JSON (%v)", id, err)}
	}
	return t, true, nil
}

func (n *Notepad) save(tx *store.Tx, t *Tab) error {
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return tx.Put(tabsBucket, t.ID, data)
}

// tabs loads every tab's metadata (its content measured, not kept), in
// creation order.
func (n *Notepad) tabs(tx *store.Tx) ([]tabRecord, error) {
	var out []tabRecord
	// The records as stored: decoded at once, no document kept.
	err := tx.ForEachView(tabsBucket, func(id string, data []byte) error {
		var t tabRecord
		if err := json.Unmarshal(data, &t); err != nil {
			return &store.CorruptError{Path: n.st.Path(), Reason: fmt.Sprintf("tab %q is not valid JSON (%v)", id, err)}
		}
		out = append(out, t)
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Order != out[j].Order {
			return out[i].Order < out[j].Order
		}
		return out[i].ID < out[j].ID
	})
	return out, err
}

// defaultTitle is the first non-empty line of content, shortened.
func defaultTitle(content string) string {
	for _, l := range strings.Split(content, "\n") {
		l = strings.TrimSpace(strings.TrimLeft(l, "# "))
		if l == "" {
			continue
		}
		l = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, l)
		if utf8.RuneCountInString(l) > 60 {
			l = string([]rune(l)[:57]) + "..."
		}
		return l
	}
	return "Untitled"
}
