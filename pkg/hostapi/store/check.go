package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// This file checks a store file's structure with plain reads before bbolt
// maps it. bbolt trusts its file: it maps it and follows page ids and
// element offsets without bounds checks, so a truncated file (its meta pages
// name pages past the end, which read as SIGBUS) or a damaged page (an
// offset into unmapped memory: SIGSEGV; a page that points at its own
// ancestor: unbounded recursion) kills the whole process, however many
// recover()s stand above it. checkStoreFile walks every page bbolt could
// reach from the meta page it would pick, with pread(2) into bounded
// buffers, and reports the first damage it finds; it cannot fault. The
// layout read here is bbolt's on-disk format, version 2 (go.etcd.io/bbolt
// internal/common: page.go, meta.go, bucket.go), in native byte order.
//
// What it does not see: bbolt keeps no checksum over data pages, so a byte
// flipped inside a stored value (not in a page header, an element, a key
// order or a page id) reads back as a changed value. The host APIs store
// JSON and report a value that no longer parses as a *CorruptError.

const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderSize   = 16 // id u64, flags u16, count u16, overflow u32
	elementSize      = 16 // branch: pos, ksize u32, pgid u64; leaf: flags, pos, ksize, vsize u32
	bucketHeaderSize = 16 // root pgid u64, sequence u64
	metaChecksumOff  = 56 // the checksum covers the fields before it
	metaSize         = 64

	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagMeta     = 0x04
	flagFreelist = 0x10
	leafIsBucket = 0x01

	noFreelist = ^uint64(0)
	// minPageSize and maxPageSize are the page sizes bbolt itself probes
	// for when the first meta page is damaged.
	minPageSize = 1 << 10
	maxPageSize = 1 << 24
	// maxDepth bounds the nesting of trees and buckets: a real store is a
	// few levels deep, a damaged one could claim any depth.
	maxDepth = 64
)

var ne = binary.NativeEndian

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	hwm      uint64 // pages in use: every page id is below it
	txid     uint64
}

// validMeta reads the meta at the start of a page (b holds at least
// pageHeaderSize+metaSize bytes) as bbolt's meta.Validate judges it: its
// magic, version and checksum, which covers the meta's fields but not the
// page header; the error says why bbolt would refuse it.
func validMeta(b []byte) (boltMeta, error) {
	if len(b) < pageHeaderSize+metaSize {
		return boltMeta{}, errors.New("meta page is cut short")
	}
	m := b[pageHeaderSize:]
	if ne.Uint32(m[0:]) != boltMagic {
		return boltMeta{}, errors.New("no bbolt magic number")
	}
	if ne.Uint32(m[4:]) != boltVersion {
		return boltMeta{}, fmt.Errorf("bbolt format version %d, not %d", ne.Uint32(m[4:]), boltVersion)
	}
	if metaChecksum(m) != ne.Uint64(m[metaChecksumOff:]) {
		return boltMeta{}, errors.New("meta page checksum mismatch")
	}
	return boltMeta{
		pageSize: ne.Uint32(m[8:]),
		root:     ne.Uint64(m[16:]),
		freelist: ne.Uint64(m[32:]),
		hwm:      ne.Uint64(m[40:]),
		txid:     ne.Uint64(m[48:]),
	}, nil
}

// metaChecksum is bbolt's checksum of the meta body m: FNV-64a of the
// fields before the checksum field.
func metaChecksum(m []byte) uint64 {
	h := fnv.New64a()
	h.Write(m[:metaChecksumOff])
	return h.Sum64()
}

// storeChecker holds one walk over one file.
type storeChecker struct {
	r       io.ReaderAt
	size    int64
	meta    boltMeta
	ps      int64
	visited map[uint64]bool
	// bufs holds one page buffer a tree depth (page), reused from page
	// to page at that depth: a page's bytes are in use only while its
	// subtree is checked, one level below. A new buffer a page made every
	// operation on a store allocate its whole file (a notepad of 100
	// documents of 2 MiB: 200 MiB a call; review 40).
	bufs [][]byte
}

// checkStoreFile reports why f cannot be opened safely by bbolt, or nil.
// An empty file is a store that was never written, and passes.
func checkStoreFile(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return nil
	}
	return checkStore(f, fi.Size())
}

func checkStore(r io.ReaderAt, size int64) error {
	m, err := pickMeta(r, size)
	if err != nil {
		return err
	}
	c := &storeChecker{r: r, size: size, meta: m, ps: int64(m.pageSize), visited: map[uint64]bool{0: true, 1: true}}
	// The meta's own page count against the file: a truncated store names
	// pages that no longer exist, and bbolt would map and read past EOF.
	if m.hwm < 2 || m.hwm > uint64(size/c.ps) {
		return fmt.Errorf("the file holds %d bytes but its header says %d pages of %d bytes (truncated?)", size, m.hwm, m.pageSize)
	}
	if m.root < 2 || m.root >= m.hwm {
		return fmt.Errorf("root page %d is outside the file's %d pages", m.root, m.hwm)
	}
	if err := c.tree(m.root, 0, true, nil, nil); err != nil {
		return err
	}
	if m.freelist != noFreelist {
		if err := c.freelist(m.freelist); err != nil {
			return err
		}
	}
	return nil
}

// pickMeta finds the page size and the meta page bbolt (v1.5) will use,
// as bbolt finds them, step for step: a checker that chose otherwise
// checked one tree while bbolt followed another (review 43: a second meta
// naming another page size was skipped; review 45: a meta whose page
// header lost its flags, and a probed meta whose page size differs from
// where it lies, both of which bbolt takes).
//
//  1. The page size: the first meta's field when that meta is valid (its
//     magic, version and checksum: meta.Validate; the page header's flags
//     are not looked at), else the field of the first valid meta found at
//     1 KiB, 2 KiB, ... up to 16 MiB while below the file's last KiB
//     (getPageSizeFromSecondMeta).
//  2. The metas: pages 0 and 1 at that page size. The one with the
//     higher txid when it is valid (the first on a tie), else the other
//     when it is; none valid is no store (DB.meta).
//
// Page sizes bbolt would take but never writes are refused (fail closed).
func pickMeta(r io.ReaderAt, size int64) (boltMeta, error) {
	read := func(off int64) ([]byte, bool) {
		b := make([]byte, pageHeaderSize+metaSize)
		n, err := r.ReadAt(b, off)
		return b, n == len(b) || (err == io.EOF && n == len(b))
	}
	if size < 0x1000 {
		// bbolt takes the first meta only from a full 4 KiB read, and
		// would probe a shorter file instead (review 47): no store
		// bbolt writes is that small.
		return boltMeta{}, fmt.Errorf("the file is too short for a store (%d bytes)", size)
	}
	var ps int64
	if b, ok := read(0); ok {
		if m, err := validMeta(b); err == nil {
			ps = int64(m.pageSize)
		}
	}
	if ps == 0 {
		for i := 0; i <= 14; i++ {
			pos := int64(1024) << i
			if pos >= size-1024 {
				break
			}
			if b, ok := read(pos); ok {
				if m, err := validMeta(b); err == nil {
					ps = int64(m.pageSize)
					break
				}
			}
		}
	}
	if ps == 0 {
		return boltMeta{}, errors.New("not a bbolt database (no valid meta page)")
	}
	if ps < minPageSize || ps > maxPageSize || ps&(ps-1) != 0 {
		return boltMeta{}, fmt.Errorf("page size %d in the header is not one bbolt writes", ps)
	}
	var metas [2]*boltMeta
	for i := range metas {
		if b, ok := read(int64(i) * ps); ok {
			if m, err := validMeta(b); err == nil {
				metas[i] = &m
			}
		}
	}
	// Both valid: the higher txid, the first on a tie; else the valid one.
	best := metas[0]
	if best == nil || metas[1] != nil && metas[1].txid > best.txid {
		best = metas[1]
	}
	if best == nil {
		return boltMeta{}, errors.New("not a bbolt database (no valid meta page at its page size)")
	}
	// bbolt addresses pages with the size found above, whatever the
	// chosen meta's own field says.
	m := *best
	m.pageSize = uint32(ps)
	return m, nil
}

// page reads page id with its overflow pages, checking that all of them
// lie below the meta's page count and that the header names the page.
func (c *storeChecker) page(id uint64, depth int) ([]byte, error) {
	if id < 2 || id >= c.meta.hwm {
		return nil, fmt.Errorf("page id %d is outside the file's %d pages", id, c.meta.hwm)
	}
	hdr := make([]byte, pageHeaderSize)
	if _, err := c.r.ReadAt(hdr, int64(id)*c.ps); err != nil {
		return nil, fmt.Errorf("page %d: %v", id, err)
	}
	if got := ne.Uint64(hdr); got != id {
		return nil, fmt.Errorf("page %d is labelled as page %d", id, got)
	}
	n := uint64(ne.Uint32(hdr[12:])) + 1
	if n > c.meta.hwm-id {
		return nil, fmt.Errorf("page %d runs %d pages past the file's %d pages", id, n, c.meta.hwm)
	}
	for i := uint64(0); i < n; i++ {
		if c.visited[id+i] {
			return nil, fmt.Errorf("page %d is referenced twice (a loop or a shared page)", id+i)
		}
		c.visited[id+i] = true
	}
	buf := c.buffer(depth, int64(n)*c.ps)
	if _, err := c.r.ReadAt(buf, int64(id)*c.ps); err != nil {
		return nil, fmt.Errorf("page %d: %v", id, err)
	}
	return buf, nil
}

// buffer returns depth's page buffer, of n bytes.
func (c *storeChecker) buffer(depth int, n int64) []byte {
	for len(c.bufs) <= depth {
		c.bufs = append(c.bufs, nil)
	}
	if int64(cap(c.bufs[depth])) < n {
		c.bufs[depth] = make([]byte, n)
	}
	return c.bufs[depth][:n]
}

// tree checks the B+tree rooted at page id, whose keys must lie in
// [lo, hi) (nil: unbounded), as bbolt's own Tx.Check requires. top: the
// file's root tree, where nsbox keeps only buckets (below them, only
// values: the store makes no nested buckets), so that a flipped bucket flag
// is seen too.
func (c *storeChecker) tree(id uint64, depth int, top bool, lo, hi []byte) error {
	if depth > maxDepth {
		return fmt.Errorf("page %d is nested more than %d levels deep", id, maxDepth)
	}
	p, err := c.page(id, depth)
	if err != nil {
		return err
	}
	switch flags := ne.Uint16(p[8:]); flags {
	case flagBranch:
		return c.branch(id, p, depth, top, lo, hi)
	case flagLeaf:
		return c.leaf(fmt.Sprintf("page %d", id), p, depth, top, lo, hi)
	default:
		return fmt.Errorf("page %d has type %#x where a tree page belongs", id, flags)
	}
}

// elements checks a page's element array fits in p and returns the count.
func elements(what string, p []byte) (int, error) {
	n := int(ne.Uint16(p[10:]))
	if pageHeaderSize+n*elementSize > len(p) {
		return 0, fmt.Errorf("%s claims %d elements, more than it holds", what, n)
	}
	return n, nil
}

// inRange reports whether key lies in [lo, hi).
func inRange(key, lo, hi []byte) bool {
	return (lo == nil || bytes.Compare(key, lo) >= 0) && (hi == nil || bytes.Compare(key, hi) < 0)
}

// span returns p[off : off+n] when it lies inside p.
func span(p []byte, off, n uint64) ([]byte, bool) {
	if off > uint64(len(p)) || n > uint64(len(p))-off {
		return nil, false
	}
	return p[off : off+n], true
}

func (c *storeChecker) branch(id uint64, p []byte, depth int, top bool, lo, hi []byte) error {
	what := fmt.Sprintf("branch page %d", id)
	n, err := elements(what, p)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s is empty", what)
	}
	keys := make([][]byte, n)
	// bbolt writes a page's keys (and values) back to back right after its
	// element array; an element whose offset or size was damaged breaks
	// that chain, as does a damaged count.
	next := uint64(pageHeaderSize + n*elementSize)
	for i := 0; i < n; i++ {
		e := uint64(pageHeaderSize + i*elementSize)
		pos, ksize := uint64(ne.Uint32(p[e:])), uint64(ne.Uint32(p[e+4:]))
		key, ok := span(p, e+pos, ksize)
		if !ok || ksize == 0 || e+pos != next {
			return fmt.Errorf("%s: key %d lies outside its place in the page", what, i)
		}
		next += ksize
		if i > 0 && bytes.Compare(keys[i-1], key) >= 0 || !inRange(key, lo, hi) {
			return fmt.Errorf("%s: keys out of order", what)
		}
		keys[i] = key
	}
	for i := 0; i < n; i++ {
		e := uint64(pageHeaderSize + i*elementSize)
		childHi := hi
		if i+1 < n {
			childHi = keys[i+1]
		}
		if err := c.tree(ne.Uint64(p[e+8:]), depth+1, top, keys[i], childHi); err != nil {
			return err
		}
	}
	return nil
}

func (c *storeChecker) leaf(what string, p []byte, depth int, top bool, lo, hi []byte) error {
	n, err := elements(what, p)
	if err != nil {
		return err
	}
	var prev []byte
	next := uint64(pageHeaderSize + n*elementSize) // see branch
	for i := 0; i < n; i++ {
		e := uint64(pageHeaderSize + i*elementSize)
		flags := ne.Uint32(p[e:])
		pos, ksize, vsize := uint64(ne.Uint32(p[e+4:])), uint64(ne.Uint32(p[e+8:])), uint64(ne.Uint32(p[e+12:]))
		key, ok := span(p, e+pos, ksize)
		if !ok || ksize == 0 || e+pos != next {
			return fmt.Errorf("%s: key %d lies outside its place in the page", what, i)
		}
		val, ok := span(p, e+pos+ksize, vsize)
		if !ok {
			return fmt.Errorf("%s: value %d lies outside the page", what, i)
		}
		next += ksize + vsize
		if i > 0 && bytes.Compare(prev, key) >= 0 || !inRange(key, lo, hi) {
			return fmt.Errorf("%s: keys out of order", what)
		}
		prev = key
		if flags&^leafIsBucket != 0 {
			return fmt.Errorf("%s: element %d has unknown flags %#x", what, i, flags)
		}
		if top != (flags&leafIsBucket != 0) {
			return fmt.Errorf("%s: element %d is a %s where nsbox keeps only %s", what, i, map[bool]string{true: "bucket", false: "value"}[!top], map[bool]string{true: "buckets", false: "values"}[top])
		}
		if !top {
			continue
		}
		if err := c.bucket(fmt.Sprintf("%s bucket %q", what, key), val, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// bucket checks a bucket's header and its tree: on pages of its own, or
// inline (a leaf page stored inside the value).
func (c *storeChecker) bucket(what string, v []byte, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s is nested more than %d levels deep", what, maxDepth)
	}
	if len(v) < bucketHeaderSize {
		return fmt.Errorf("%s: header cut short", what)
	}
	if root := ne.Uint64(v); root != 0 {
		return c.tree(root, depth, false, nil, nil)
	}
	inline := v[bucketHeaderSize:]
	if len(inline) < pageHeaderSize {
		return fmt.Errorf("%s: inline page cut short", what)
	}
	if flags := ne.Uint16(inline[8:]); flags != flagLeaf {
		return fmt.Errorf("%s: inline page has type %#x, not a leaf", what, flags)
	}
	return c.leaf(what+" (inline)", inline, depth, false, nil, nil)
}

// freelist checks the free page list: bbolt reads it on every writable open
// and hands its pages out for new data, so a live page listed as free would
// be overwritten.
func (c *storeChecker) freelist(id uint64) error {
	p, err := c.page(id, 0) // after the trees: depth 0's buffer is free
	if err != nil {
		return fmt.Errorf("free list: %w", err)
	}
	if flags := ne.Uint16(p[8:]); flags != flagFreelist {
		return fmt.Errorf("free list page %d has type %#x", id, flags)
	}
	first, n := uint64(0), uint64(ne.Uint16(p[10:]))
	if n == 0xFFFF { // the count overflowed into the first element
		if len(p) < pageHeaderSize+8 {
			return fmt.Errorf("free list page %d cut short", id)
		}
		first, n = 1, ne.Uint64(p[pageHeaderSize:])
	}
	ids, ok := span(p, pageHeaderSize+first*8, n*8)
	if !ok || n > uint64(len(p))/8 {
		return fmt.Errorf("free list page %d claims %d entries, more than it holds", id, n)
	}
	seen := make(map[uint64]bool, n)
	for i := uint64(0); i < n; i++ {
		f := ne.Uint64(ids[i*8:])
		switch {
		case f < 2 || f >= c.meta.hwm:
			return fmt.Errorf("free list names page %d, outside the file's %d pages", f, c.meta.hwm)
		case c.visited[f]:
			return fmt.Errorf("free list names page %d, which is in use", f)
		case seen[f]:
			return fmt.Errorf("free list names page %d twice", f)
		}
		seen[f] = true
	}
	return nil
}
