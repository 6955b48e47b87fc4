package store

import (
	"bytes"
	"testing"
)

// smallFileMetas builds a 3 KiB store file that the checker reads with
// 1 KiB pages and meta 1, and bbolt with 512-byte pages and meta 0.
//
// bbolt v1.5.0 takes the first meta's page size only when it reads a
// whole 4 KiB at offset 0 (db.go getPageSizeFromFirstMeta: `bw ==
// len(buf)`, buf [0x1000]byte): in a file shorter than 4 KiB it skips
// meta 0, probes, and takes the page size field of the valid meta at
// 1 KiB, here 512. pickMeta reads 80 bytes at 0 and takes meta 0's field
// (1 KiB) whatever the file's size. Then the checker takes meta 1 (the
// higher txid) at 1 KiB pages and checks its tree (an empty leaf at page
// 2, 2 KiB in), while bbolt, with 512-byte pages, finds meta 1 at 512
// (zeros, invalid) and uses meta 0, which nobody checked: its root is
// page 5 of 512 bytes (2.5 KiB in, the unused half of the checker's
// leaf), a branch page whose only child is itself.
func smallFileMetas() []byte {
	const ps = 1024
	img := make([]byte, 3*ps)
	// meta 0: 1 KiB pages, root page 5 (of 512 bytes for bbolt), txid 1
	putMeta(img, 0, 0, ps, 5, 6, 1)
	// meta 1: newer, its page size field 512, root page 2 (of 1 KiB)
	putMeta(img, ps, 1, 512, 2, 3, 2)
	// page 2 of 1 KiB: an empty leaf
	ne.PutUint64(img[2*ps:], 2)
	ne.PutUint16(img[2*ps+8:], flagLeaf)
	// page 5 of 512 bytes, the second half of that leaf: a branch page
	// whose child is itself
	putLoopBranch(img[5*512:], 5, 'b')
	return img
}

// TestReview47CheckerSmallFileFirstMeta
//
// Finding (MEDIUM, the impact of reviews 43 and 45: a store file crafted
// or damaged this way kills the whole process that opens it, `nsbox mcp`
// and every session it serves, or the CLI, with a fatal stack overflow no
// recover() catches): pickMeta "follows bbolt step for step" but not in
// step 1's read: bbolt uses the first meta's page size only when the file
// has 4 KiB at offset 0, and the checker whenever it has 80 bytes. In a
// file under 4 KiB (a store of 1 KiB pages has 3 or 4 pages: written by
// hand, or a store truncated) the two choose different page sizes and so
// different metas (see smallFileMetas). Attack: write that 3 KiB file as
// a host API store (a sandbox that can write $NSBOX_DATA's stores, or
// damage to one); the next call to the store crashes the process.
// Fix: read the first meta as bbolt does (4 KiB at 0, or refuse files
// under 4 KiB), i.e. take meta 0's page size only when bbolt would.
func TestReview47CheckerSmallFileFirstMeta(t *testing.T) {
	bad := smallFileMetas()
	if err := checkStore(bytes.NewReader(bad), int64(len(bad))); err == nil {
		t.Errorf("checkStore passed a 3 KiB file that bbolt reads with the page size of the meta at 1 KiB (512), following meta 0 to a self-referencing branch page the checker never read")
	}
}

// TestReview47CheckerSmallFileFirstMetaCrash: that file, opened and read
// through the store in a child process (the crash is fatal): it fails
// when the child dies.
func TestReview47CheckerSmallFileFirstMetaCrash(t *testing.T) {
	readInChild(t, "NSBOX_REVIEW47_SMALL", smallFileMetas)
}
