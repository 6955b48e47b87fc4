package store

import (
	"bytes"
	"testing"
)

// unmarkedMeta0 returns img with one page appended, a branch page whose
// only child is itself, and the FIRST meta page rewritten to make that
// page its root (a newer transaction id than meta 1, a valid checksum,
// the file's own page size), with the page header's flags of page 0
// cleared. bbolt never looks at a meta page's header: Meta.Validate
// checks magic, version and checksum of the meta body only (bbolt v1.5.0
// internal/common/meta.go), the checksum does not cover the page header,
// and getPageSizeFromFirstMeta and DB.meta take such a meta as valid.
func unmarkedMeta0(t testing.TB, img []byte) []byte {
	t.Helper()
	img, id, ps := appendLoopPage(img)

	m0 := img[pageHeaderSize : pageHeaderSize+metaSize]
	m1 := img[ps+pageHeaderSize : ps+pageHeaderSize+metaSize]
	txid := ne.Uint64(m0[48:])
	if t1 := ne.Uint64(m1[48:]); t1 > txid {
		txid = t1
	}
	ne.PutUint64(m0[16:], id)         // root bucket's page
	ne.PutUint64(m0[32:], noFreelist) // no free list
	ne.PutUint64(m0[40:], id+1)       // pages in use
	ne.PutUint64(m0[48:], txid+1)     // newer than meta 1
	sealMeta(m0)
	ne.PutUint16(img[8:], 0) // page 0's header: no longer "meta"
	return img
}

// TestReview45CheckerRefusesMetaBboltAccepts (MEDIUM: the same impact as
// review 43's finding: a store file crafted, or damaged, this way kills
// the whole process that opens it, `nsbox mcp` and every session it
// serves, or the CLI, with a stack overflow no recover() catches).
//
// What breaks: pickMeta still does not pick the meta bbolt picks.
// parseMeta refuses a meta page whose page header flags are not "meta"
// (0x04), but bbolt never reads those flags: Meta.Validate checks the
// magic, the version and the checksum, which covers the meta body only,
// not the 16-byte page header. With page 0's flags cleared, the checker
// takes meta 0 as lost, probes for the second meta, finds the genuine
// meta 1, checks meta 1's (sound) tree and passes the file; bbolt takes
// meta 0 as valid (getPageSizeFromFirstMeta, then DB.meta: the higher
// transaction id), and follows meta 0's root, which nobody checked: here
// a branch page that is its own child, and the cursor recurses until
// "goroutine stack exceeds 1000000000-byte limit".
//
// Attack: flip two bytes of a store (page 0's flags) and rewrite meta 0
// with a valid checksum; wait for the next notepad or memory call.
// Fix: validate a meta exactly as bbolt does (magic, version, checksum;
// no page-header checks, or refuse a file whose meta bbolt would take
// but the checker does not), then take the higher txid.
func TestReview45CheckerRefusesMetaBboltAccepts(t *testing.T) {
	img, _, _ := faultStore(t)
	bad := unmarkedMeta0(t, img)
	if err := checkStore(bytes.NewReader(bad), int64(len(bad))); err == nil {
		t.Errorf("checkStore passed a file whose first meta page has a cleared page-header flag word: the checker dropped that meta and checked meta 1's tree, but bbolt validates meta 0 (magic, version, checksum) and uses it, newer, with a self-referencing branch page as its root")
	}
	// The second meta the same way: review 43's file (a newer meta 1 with
	// a self-looping root) with meta 1's page size field made right again
	// and its page-header flags cleared; the checker checks meta 0 alone.
	one := selfLoopMeta1(t, img)
	ps := int(ne.Uint32(one[pageHeaderSize+8:]))
	m1 := one[ps+pageHeaderSize : ps+pageHeaderSize+metaSize]
	ne.PutUint32(m1[8:], uint32(ps))
	sealMeta(m1)
	ne.PutUint16(one[ps+8:], 0)
	if err := checkStore(bytes.NewReader(one), int64(len(one))); err == nil {
		t.Errorf("checkStore passed a file whose second meta page has a cleared page-header flag word: bbolt uses that newer meta, whose root is a self-referencing branch page")
	}
}

// TestReview45CheckerRefusesMetaBboltAcceptsCrash shows what that file does
// to a process that reads it through the store, in a child process (the
// crash is fatal): it fails when the child dies.
func TestReview45CheckerRefusesMetaBboltAcceptsCrash(t *testing.T) {
	readInChild(t, "NSBOX_REVIEW45_STORE", func() []byte {
		img, _, _ := faultStore(t)
		return unmarkedMeta0(t, img)
	})
}

// putMeta writes a valid meta page (bbolt's layout, with its checksum) at
// off of img: page header id and flags, then the meta body.
func putMeta(img []byte, off int, id uint64, pageSize uint32, root, hwm, txid uint64) {
	ne.PutUint64(img[off:], id)
	ne.PutUint16(img[off+8:], flagMeta)
	m := img[off+pageHeaderSize : off+pageHeaderSize+metaSize]
	ne.PutUint32(m[0:], boltMagic)
	ne.PutUint32(m[4:], boltVersion)
	ne.PutUint32(m[8:], pageSize)
	ne.PutUint64(m[16:], root)
	ne.PutUint64(m[32:], noFreelist)
	ne.PutUint64(m[40:], hwm)
	ne.PutUint64(m[48:], txid)
	sealMeta(m)
}

// probedPageSize builds a 24 KiB file that the checker reads with 4 KiB
// pages and bbolt with 8 KiB pages. Meta 0 is damaged (its magic is
// gone). bbolt then probes offsets 1 KiB, 2 KiB, 4 KiB... and takes the
// page size FIELD of the first valid meta it meets (bbolt v1.5.0 db.go
// getPageSizeFromSecondMeta: it never compares the field with the
// offset): a valid meta left at 1 KiB, inside page 0, names 8 KiB, so
// bbolt's meta 1 is the one at 8 KiB, whose root (page 2 of 8 KiB, at
// 16 KiB) is a branch page whose child is itself. pickMeta keeps a probed
// meta only when its field equals the offset: it skips the one at 1 KiB,
// takes the one at 4 KiB (4 KiB pages, root an empty leaf at page 3) and
// checks that tree.
func probedPageSize() []byte {
	const small, big = 4096, 8192
	img := make([]byte, 6*small)
	// meta 0: page 0, damaged (no magic)
	putMeta(img, 0, 0, small, 3, 6, 1)
	ne.PutUint32(img[pageHeaderSize:], 0)
	// a stray valid meta 1 KiB in, naming 8 KiB pages
	putMeta(img, 1024, 0, big, 2, 3, 1)
	// the checker's meta 1: 4 KiB in, 4 KiB pages, root page 3
	putMeta(img, small, 1, small, 3, 6, 2)
	// bbolt's meta 1: 8 KiB in, 8 KiB pages, root page 2 (16 KiB in)
	putMeta(img, big, 1, big, 2, 3, 3)
	// page 3 of 4 KiB (12 KiB in): an empty leaf
	ne.PutUint64(img[3*small:], 3)
	ne.PutUint16(img[3*small+8:], flagLeaf)
	// page 2 of 8 KiB (16 KiB in): a branch page whose child is itself
	putLoopBranch(img[2*big:], 2, 'b')
	return img
}

// TestReview45CheckerProbesPageSizeUnlikeBbolt (MEDIUM, same impact as
// above): with the first meta damaged, pickMeta and bbolt probe for the
// page size differently (see probedPageSize): the checker passes a file
// whose meta bbolt follows was never checked. Fix: probe as bbolt does
// (the first valid meta at 1 KiB << i, i <= 14, while the offset is below
// the file's size less 1 KiB, reading 4 KiB or to the end, and its page
// size field whatever the offset), then read meta 1 at that page size.
func TestReview45CheckerProbesPageSizeUnlikeBbolt(t *testing.T) {
	bad := probedPageSize()
	if err := checkStore(bytes.NewReader(bad), int64(len(bad))); err == nil {
		t.Errorf("checkStore passed a file whose first meta is damaged and which bbolt reads with the page size of a valid meta found 1 KiB in (8 KiB), following an unchecked meta at 8 KiB to a self-referencing branch page")
	}
}

// TestReview45CheckerProbesPageSizeUnlikeBboltCrash: that file, read
// through the store in a child process.
func TestReview45CheckerProbesPageSizeUnlikeBboltCrash(t *testing.T) {
	readInChild(t, "NSBOX_REVIEW45_PROBE", probedPageSize)
}
