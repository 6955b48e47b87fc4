package store

import (
	"bytes"
	"testing"
)

// selfLoopMeta1 returns img with one page appended, a branch page whose
// only child is itself, and the second meta page rewritten to make that
// page its root: a newer transaction id, a valid checksum, and a page
// size field that is not the file's (twice meta 0's). bbolt takes its
// page size from meta 0 and then uses whichever valid meta has the higher
// transaction id (bbolt v1.5.0 db.go getPageSize, DB.meta; Meta.Validate
// checks magic, version and checksum, never the page size).
func selfLoopMeta1(t testing.TB, img []byte) []byte {
	t.Helper()
	img, id, ps := appendLoopPage(img)

	m0 := img[pageHeaderSize : pageHeaderSize+metaSize]
	m1 := img[ps+pageHeaderSize : ps+pageHeaderSize+metaSize]
	copy(m1, m0)
	ne.PutUint32(m1[8:], uint32(2*ps))          // page size: not the file's
	ne.PutUint64(m1[16:], id)                   // root bucket's page
	ne.PutUint64(m1[32:], noFreelist)           // no free list
	ne.PutUint64(m1[40:], id+1)                 // pages in use
	ne.PutUint64(m1[48:], ne.Uint64(m0[48:])+1) // newer than meta 0
	sealMeta(m1)
	return img
}

// TestReview43CheckerSkipsMetaWithOtherPageSize (MEDIUM: a store file
// crafted this way, or damaged this way, kills the whole process that
// opens it: `nsbox mcp` and every session it serves, or the CLI; not
// recoverable, the second line of defence, SetPanicOnFault, catches
// faults, not a stack overflow).
//
// What breaks: pickMeta reads the second meta page at meta 0's page size
// and keeps it only when its own page size field equals that size; a
// second meta with a valid checksum and any other page size is dropped,
// and the checker walks meta 0's tree alone. bbolt does not compare the
// field: it takes the page size from meta 0 and then the valid meta with
// the higher transaction id, the second one, whose tree nobody checked.
// Here that tree's root is a branch page whose child is itself: the
// checker passes the file, and bbolt's cursor recurses into the page
// until the goroutine's stack exceeds its limit ("goroutine stack exceeds
// 1000000000-byte limit, fatal error: stack overflow"), which no
// recover() stops. The same second meta can name any page bbolt then
// trusts (offsets into unmapped memory, a free list naming live pages).
//
// Attack: write such a file at a store's path (a store in a directory the
// attacker can write, a store restored from elsewhere) and wait for the
// next notepad or memory call. Fix: choose the meta exactly as bbolt
// does (the valid one, by magic, version and checksum, with the higher
// txid, read at the page size bbolt derives) and check the tree of the
// one chosen, or refuse a meta whose page size is not the file's.
func TestReview43CheckerSkipsMetaWithOtherPageSize(t *testing.T) {
	img, _, _ := faultStore(t)
	bad := selfLoopMeta1(t, img)
	if err := checkStore(bytes.NewReader(bad), int64(len(bad))); err == nil {
		t.Errorf("checkStore passed a file whose newer meta page (page size field %d, not the file's %d) makes a self-referencing branch page the root: bbolt uses that meta", 2*ne.Uint32(img[pageHeaderSize+8:]), ne.Uint32(img[pageHeaderSize+8:]))
	}
}

// TestReview43CheckerSkipsMetaWithOtherPageSizeCrash shows what the file
// of TestReview43CheckerSkipsMetaWithOtherPageSize does to a process that
// reads it through the store: run in a child process (the crash is
// fatal), it passes when the read ends with an error or data and fails
// when the child dies.
func TestReview43CheckerSkipsMetaWithOtherPageSizeCrash(t *testing.T) {
	readInChild(t, "NSBOX_REVIEW43_STORE", func() []byte {
		img, _, _ := faultStore(t)
		return selfLoopMeta1(t, img)
	})
}
