// Package memory is the "memory" host API: short texts an agent saves under
// a key, with tags, and recalls later by key or by a ranked text query. The
// store lives on the host ($XDG_DATA_HOME/nsbox/memory.db); a sandbox reaches
// it only through hostCall, and only the methods in Methods().
package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nsbox/nsbox/pkg/hostapi/store"
)

// API is the host API name.
const API = "memory"

// FileName is the store file inside the data directory.
const FileName = "memory.db"

// Bounds. Arguments come from sandboxed code: every size is bounded so that
// a sandbox cannot grow the host's store (or a recall's cost) without limit.
const (
	MaxKeyBytes        = 256
	MaxTextBytes       = 16 << 10
	MaxTags            = 16
	MaxTagBytes        = 64
	MaxMemories        = 5000
	DefaultRecallLimit = 5
	MaxRecallLimit     = 50
	DefaultListLimit   = 100
	MaxListLimit       = 1000
)

const bucket = "memories"

// Record is one memory.
type Record struct {
	Key     string    `json:"key"`
	Text    string    `json:"text"`
	Tags    []string  `json:"tags"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// Match is a recalled memory with its relevance score (higher is better).
type Match struct {
	Record
	Score float64 `json:"score"`
}

// Memory is the memory store. Its methods are the host-side Go API; the
// sandbox-reachable subset is registered by Register.
type Memory struct {
	st  *store.Store
	now func() time.Time
}

// Open returns the memory store in dataDir (nothing is created until the
// first save).
func Open(dataDir string, o store.Options) (*Memory, error) {
	st, err := store.New(filepath.Join(dataDir, FileName), API, o)
	if err != nil {
		return nil, err
	}
	return &Memory{st: st, now: time.Now}, nil
}

// Path is the store file.
func (m *Memory) Path() string { return m.st.Path() }

// Save stores text under key (replacing an existing memory, whose creation
// time is kept) and reports whether it was new. An empty key is derived
// from the text's first words and made unique.
func (m *Memory) Save(ctx context.Context, key, text string, tags []string) (Record, bool, error) {
	if key != "" {
		if err := checkKey("key", key); err != nil {
			return Record{}, false, err
		}
	}
	if strings.TrimSpace(text) == "" {
		return Record{}, false, &store.ArgError{Field: "text", Msg: "is empty"}
	}
	if len(text) > MaxTextBytes {
		return Record{}, false, &store.TooLargeError{What: "memory text", Size: len(text), Limit: MaxTextBytes}
	}
	if !utf8.ValidString(text) {
		return Record{}, false, &store.ArgError{Field: "text", Msg: "is not valid UTF-8"}
	}
	tags, err := normTags(tags)
	if err != nil {
		return Record{}, false, err
	}
	var rec Record
	created := false
	err = m.st.Update(ctx, func(tx *store.Tx) error {
		now := m.now().UTC()
		if key == "" {
			key = uniqueKey(tx, slug(text))
		}
		rec = Record{Key: key, Text: text, Tags: tags, Created: now, Updated: now}
		if old := tx.Get(bucket, key); old != nil {
			var prev Record
			if json.Unmarshal(old, &prev) == nil && !prev.Created.IsZero() {
				rec.Created = prev.Created
			}
		} else {
			if n := tx.Len(bucket); n >= MaxMemories {
				return &store.TooLargeError{What: "the memory store", Size: n, Limit: MaxMemories, Unit: "memories"}
			}
			created = true
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return tx.Put(bucket, key, data)
	})
	if err != nil {
		return Record{}, false, err
	}
	return rec, created, nil
}

// Get returns the memory at key.
func (m *Memory) Get(ctx context.Context, key string) (Record, error) {
	if err := checkKey("key", key); err != nil {
		return Record{}, err
	}
	var rec Record
	err := m.st.View(ctx, func(tx *store.Tx) error {
		data := tx.Get(bucket, key)
		if data == nil {
			return &store.NotFoundError{Kind: "memory", ID: key}
		}
		return m.decode(key, data, &rec)
	})
	return rec, err
}

// Recall returns up to limit memories matching query, best first. With
// tags, only memories carrying all of them are considered; with an empty
// query they are listed most recently updated first (score 0).
func (m *Memory) Recall(ctx context.Context, query string, tags []string, limit int) ([]Match, error) {
	limit, err := checkLimit(limit, DefaultRecallLimit, MaxRecallLimit)
	if err != nil {
		return nil, err
	}
	if len(query) > MaxTextBytes {
		return nil, &store.TooLargeError{What: "the query", Size: len(query), Limit: MaxTextBytes}
	}
	tags, err = normTags(tags)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(query) == "" && len(tags) == 0 {
		return nil, &store.ArgError{Field: "query", Msg: "give a key, a query or tags"}
	}
	out := []Match{}
	if strings.TrimSpace(query) == "" {
		// Tags only: the most recent, ordered without the texts, as
		// list does (review 51).
		recs, _, err := m.recent(ctx, tags, limit)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			out = append(out, Match{Record: r})
		}
		return out, nil
	}
	recs, err := m.all(ctx, tags)
	if err != nil {
		return nil, err
	}
	for _, s := range rank(recs, query) {
		out = append(out, Match{Record: s.rec, Score: roundScore(s.score)})
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Delete removes the memory at key.
func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := checkKey("key", key); err != nil {
		return err
	}
	return m.st.Update(ctx, func(tx *store.Tx) error {
		ok, err := tx.Delete(bucket, key)
		if err == nil && !ok {
			err = &store.NotFoundError{Kind: "memory", ID: key}
		}
		return err
	})
}

// List returns up to limit memories (with tag: only those carrying it),
// most recently updated first, and how many there are in all.
func (m *Memory) List(ctx context.Context, tag string, limit int) ([]Record, int, error) {
	limit, err := checkLimit(limit, DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, 0, err
	}
	var tags []string
	if tag != "" {
		if tags, err = normTags([]string{tag}); err != nil {
			return nil, 0, err
		}
	}
	return m.recent(ctx, tags, limit)
}

// recent returns the limit most recently updated memories that carry all
// of tags, and how many carry them. The order is decided without the
// texts; only the memories returned are decoded whole. Decoding every
// text to return one copied and decoded the whole store a call, reads
// side by side (review 50).
func (m *Memory) recent(ctx context.Context, tags []string, limit int) ([]Record, int, error) {
	var recs []Record
	total := 0
	err := m.st.View(ctx, func(tx *store.Tx) error {
		var err error
		if recs, err = m.each(tx, tags, false); err != nil {
			return err
		}
		sortRecent(recs)
		total = len(recs)
		if len(recs) > limit {
			recs = recs[:limit]
		}
		for i := range recs {
			data := tx.Get(bucket, recs[i].Key)
			if data == nil {
				return &store.CorruptError{Path: m.st.Path(), Reason: fmt.Sprintf("memory %q vanished within one read", recs[i].Key)}
			}
			if err := m.decode(recs[i].Key, data, &recs[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return recs, total, err
}

// all loads every memory that carries all of tags.
func (m *Memory) all(ctx context.Context, tags []string) ([]Record, error) {
	var recs []Record
	err := m.st.View(ctx, func(tx *store.Tx) error {
		var err error
		recs, err = m.each(tx, tags, true)
		return err
	})
	return recs, err
}

// recordMeta is a stored memory read without its text: encoding/json
// skips a field the struct lacks without keeping it.
type recordMeta struct {
	Tags    []string  `json:"tags"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// each reads every memory that carries all of tags, in place (no copy of
// the stored bytes), with its text only when text is set.
func (m *Memory) each(tx *store.Tx, tags []string, text bool) ([]Record, error) {
	recs := []Record{}
	err := tx.ForEachView(bucket, func(key string, data []byte) error {
		var r Record
		if text {
			if err := m.decode(key, data, &r); err != nil {
				return err
			}
		} else {
			var meta recordMeta
			if err := m.unmarshal(key, data, &meta); err != nil {
				return err
			}
			// The bucket's key, not the record's own field: recent
			// reads the text of what it returns by it, and the two
			// differ in a store written by hand or damaged.
			r = Record{Key: key, Tags: meta.Tags, Created: meta.Created, Updated: meta.Updated}
			if r.Tags == nil {
				r.Tags = []string{}
			}
		}
		if hasTags(r.Tags, tags) {
			recs = append(recs, r)
		}
		return nil
	})
	return recs, err
}

func (m *Memory) decode(key string, data []byte, r *Record) error {
	if err := m.unmarshal(key, data, r); err != nil {
		return err
	}
	if r.Tags == nil {
		r.Tags = []string{}
	}
	return nil
}

// unmarshal decodes the stored memory key into v; a store's bytes that
// are not its JSON are a CorruptError.
func (m *Memory) unmarshal(key string, data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return &store.CorruptError{Path: m.st.Path(), Reason: fmt.Sprintf("memory %q is not valid JSON (%v)", key, err)}
	}
	return nil
}

func hasTags(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func sortRecent(recs []Record) {
	sort.SliceStable(recs, func(i, j int) bool {
		if !recs[i].Updated.Equal(recs[j].Updated) {
			return recs[i].Updated.After(recs[j].Updated)
		}
		return recs[i].Key < recs[j].Key
	})
}

func roundScore(s float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(s, 'f', 4, 64), 64)
	return f
}

func checkKey(field, key string) error {
	switch {
	case key == "":
		return &store.ArgError{Field: field, Msg: "is empty"}
	case len(key) > MaxKeyBytes:
		return &store.TooLargeError{What: "the key", Size: len(key), Limit: MaxKeyBytes}
	case !utf8.ValidString(key):
		return &store.ArgError{Field: field, Msg: "is not valid UTF-8"}
	case strings.IndexFunc(key, unicode.IsControl) >= 0:
		return &store.ArgError{Field: field, Msg: "contains a control character"}
	}
	return nil
}

// normTags trims, lower-cases and de-duplicates tags, keeping their order.
func normTags(tags []string) ([]string, error) {
	if len(tags) > MaxTags {
		return nil, &store.TooLargeError{What: "the tag list", Size: len(tags), Limit: MaxTags, Unit: "tags"}
	}
	out := []string{}
	seen := map[string]bool{}
	for i, t := range tags {
		t = strings.ToLower(strings.TrimSpace(t))
		field := fmt.Sprintf("tags[%d]", i)
		switch {
		case t == "":
			return nil, &store.ArgError{Field: field, Msg: "is empty"}
		case len(t) > MaxTagBytes:
			return nil, &store.TooLargeError{What: "tag " + strconv.Itoa(i), Size: len(t), Limit: MaxTagBytes}
		case !utf8.ValidString(t) || strings.IndexFunc(t, unicode.IsControl) >= 0:
			return nil, &store.ArgError{Field: field, Msg: "must be printable UTF-8"}
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}

func checkLimit(limit, def, max int) (int, error) {
	switch {
	case limit == 0:
		return def, nil
	case limit < 0:
		return 0, &store.ArgError{Field: "limit", Msg: "must be positive"}
	case limit > max:
		return max, nil
	}
	return limit, nil
}

// slug makes a readable key from the first words of text.
func slug(text string) string {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	var b strings.Builder
	for _, w := range words {
		if b.Len()+len(w)+1 > 40 || b.Len() > 0 && strings.Count(b.String(), "-") >= 4 {
			break
		}
		if b.Len() > 0 {
			b.WriteByte('-')
		}
		b.WriteString(w)
	}
	if b.Len() == 0 {
		return "memory"
	}
	return b.String()
}

func uniqueKey(tx *store.Tx, base string) string {
	if tx.Get(bucket, base) == nil {
		return base
	}
	for i := 2; ; i++ {
		k := base + "-" + strconv.Itoa(i)
		if tx.Get(bucket, k) == nil {
			return k
		}
	}
}
