package sandbox

import (
	"testing"

	"github.com/nsbox/nsbox/pkg/namespaces"
)

// A worker whose maps were written ahead of its policy serves a
// single-id policy only when those maps are the single-id ones: the
// kernel takes a user namespace's maps once.
func TestIdMapsSuits(t *testing.T) {
	chosen := func(id *namespaces.Identity) *idMaps {
		m := &idMaps{chosen: make(chan struct{}), done: make(chan struct{}), id: id}
		close(m.chosen)
		close(m.done)
		return m
	}
	full := chosen(&namespaces.Identity{Mode: namespaces.ModeFull, Helper: true})
	single := chosen(&namespaces.Identity{Mode: namespaces.ModeSingle})
	none := chosen(nil) // the choice failed: nothing written
	for _, c := range []struct {
		name     string
		m        *idMaps
		singleID bool
		want     bool
	}{
		{"no maps begun, full", nil, false, true},
		{"no maps begun, single", nil, true, true},
		{"nothing written, single", none, true, true},
		{"full written, full", full, false, true},
		{"full written, single", full, true, false},
		{"single written, single", single, true, true},
		{"single written, default", single, false, true},
	} {
		if got := c.m.suits(c.singleID); got != c.want {
			t.Errorf("%s: suits = %v, want %v", c.name, got, c.want)
		}
	}
	if err := (*idMaps)(nil).wait(); err != nil {
		t.Errorf("wait of no maps: %v", err)
	}
}
