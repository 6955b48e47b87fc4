package memory

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/hostapi/store"
)

// TestListReadsTextByBucketKey: a record whose stored "key" field is not
// its bucket key (a store written by hand, or damaged) is listed as it is
// stored, as a full read lists it. List orders the records by their
// metadata and then reads the texts it returns; reading them by the
// field's key fetched another record's text (or none: "vanished").
func TestListReadsTextByBucketKey(t *testing.T) {
	m := open(t, t.TempDir())
	save(t, m, "b", "text of b")
	when := time.Now().Add(time.Hour)
	odd, err := json.Marshal(Record{Key: "b", Text: "text of a", Tags: []string{}, Created: when, Updated: when})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.st.Update(ctx, func(tx *store.Tx) error { return tx.Put(bucket, "a", odd) }); err != nil {
		t.Fatal(err)
	}
	recs, total, err := m.List(ctx, "", 10)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if total != 2 || len(recs) != 2 {
		t.Fatalf("list: %d of %d records, want 2", len(recs), total)
	}
	texts := map[string]bool{}
	for _, r := range recs {
		texts[r.Text] = true
	}
	if !texts["text of a"] || !texts["text of b"] {
		t.Errorf("list returned the texts %v, want each record's own (\"text of a\" and \"text of b\")", texts)
	}
}
