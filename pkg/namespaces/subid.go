package namespaces

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The sub-id files (subuid(5), subgid(5)) and the choice of a sandbox's id
// range.

// RangeSize is the number of ids a sandbox maps for users and for groups
// with a full range: 0 to 65535 inside, as a container has.
const RangeSize = 65536

// RootRangeName is the /etc/subuid and /etc/subgid entry reserving the
// host ids of root-started sandboxes.
const RootRangeName = "nsbox"

// DefaultRootStart is the first host id of root-started sandboxes when
// /etc/subuid (subgid) has no nsbox entry: the last 65,536 ids below
// 0xFFFF0000, at the top of the 32-bit range, far from the ids useradd
// hands out and from 0xFFFFFFFF, which is (uid_t)-1.
const DefaultRootStart = 0xFFFF0000 - RangeSize

// ErrSubID is wrapped by every error about a sub-id file or the range
// chosen from it.
var ErrSubID = errors.New("id range")

// SubIDEntry is one line of /etc/subuid or /etc/subgid: Owner (a user name
// or a numeric uid) may use Count ids from Start.
type SubIDEntry struct {
	Owner        string
	Start, Count uint32
	Line         int
}

func (e SubIDEntry) end() uint64 { return uint64(e.Start) + uint64(e.Count) }

// ParseSubIDs reads a subuid(5)/subgid(5) file strictly: every line that is
// not blank or a # comment must be NAME:START:COUNT with decimal numbers, a
// COUNT above 0 and a range that stays below 2^32. Anything else is an
// error naming the file and line: a range chosen from a file nsbox cannot
// read completely could overlap an entry it skipped.
func ParseSubIDs(r io.Reader, name string) ([]SubIDEntry, error) {
	var out []SubIDEntry
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) != 3 || f[0] == "" {
			return nil, fmt.Errorf("%w: %s:%d: want NAME:START:COUNT, got %q", ErrSubID, name, n, line)
		}
		start, err1 := strconv.ParseUint(f[1], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil || count == 0 || start+count > 1<<32 {
			return nil, fmt.Errorf("%w: %s:%d: START and COUNT must be decimal, COUNT above 0 and START+COUNT at most 4294967296, got %q", ErrSubID, name, n, line)
		}
		out = append(out, SubIDEntry{Owner: f[0], Start: uint32(start), Count: uint32(count), Line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSubID, name, err)
	}
	return out, nil
}

// readSubIDs parses the file at path; a missing file has no entries.
func readSubIDs(path string) ([]SubIDEntry, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSubID, err)
	}
	defer f.Close()
	return ParseSubIDs(f, path)
}

// IDRange is one line of an id map: Count ids from Inside (in the
// sandbox) are host ids from Outside.
type IDRange struct {
	Inside  uint32 `json:"inside"`
	Outside uint32 `json:"outside"`
	Count   uint32 `json:"count"`
}

// Mode is how many ids a sandbox maps.
type Mode string

const (
	// ModeFull maps RangeSize ids for users and groups; setgroups works.
	ModeFull Mode = "full"
	// ModeSingle maps the caller's own uid and gid only, setgroups denied:
	// what any user may write without a helper (user_namespaces(7)).
	ModeSingle Mode = "single"
)

// Identity is what a sandbox's user namespace maps and who its worker is
// inside.
type Identity struct {
	Mode Mode
	// UID and GID are the worker's (and its commands') ids inside.
	UID, GID uint32
	// UIDMap and GIDMap are written to /proc/PID/{uid,gid}_map.
	UIDMap, GIDMap []IDRange
	// Helper: the maps are written by newuidmap and newgidmap (root-less,
	// full range); otherwise by this process directly.
	Helper bool
	// NewUIDMap and NewGIDMap are the helpers' paths when Helper is set.
	NewUIDMap, NewGIDMap string
	// Reason says why a single-id map was chosen (empty for a full range
	// and for an explicit single-id request).
	Reason string
}

// Setgroups says whether the sandbox may call setgroups(2). Refused with a
// single-id map: there a process could drop a supplementary group that a
// negative ACL or a "group may not" mode relies on, which is
// CVE-2014-8989; with a full range mapped by root or newgidmap the admin
// has granted the ids, as for any container.
func (id *Identity) Setgroups() bool { return id.Mode == ModeFull }

// HostUID is the host uid of the worker once it has taken id.UID.
func (id *Identity) HostUID() uint32 { return hostOf(id.UIDMap, id.UID) }

// HostGID is the host gid of the worker once it has taken id.GID.
func (id *Identity) HostGID() uint32 { return hostOf(id.GIDMap, id.GID) }

func hostOf(m []IDRange, in uint32) uint32 {
	for _, r := range m {
		if in >= r.Inside && uint64(in) < uint64(r.Inside)+uint64(r.Count) {
			return r.Outside + (in - r.Inside)
		}
	}
	return 65534 // the overflow id: unmapped
}

// ChooseOptions are the inputs of ChooseIdentity.
type ChooseOptions struct {
	// EUID and EGID are the caller's effective ids, User its user name
	// ("" when it has none).
	EUID, EGID int
	User       string
	// SubUID and SubGID are the sub-id files ("": /etc/subuid and
	// /etc/subgid). Passwd and Group list the host's users and groups
	// ("": /etc/passwd and /etc/group), which a root range may not
	// contain.
	SubUID, SubGID, Passwd, Group string
	// Single asks for the single-id map whatever is available.
	Single bool
	// RootNotHostAdmin, for a caller of uid 0, says why it is not the
	// host's administrator (a container's root: no CAP_SYS_ADMIN, or a
	// user namespace of its own): the kernel refuses it the idmapped
	// mounts a root range needs, so it gets the single-id map, with this
	// as the reason.
	RootNotHostAdmin string
	// Helpers are the directories searched for newuidmap and newgidmap
	// (nil: /usr/bin, /bin, /usr/sbin, /sbin). Absolute directories
	// only: a helper found through $PATH could be anyone's program.
	Helpers []string
}

func orDefault(p, d string) string {
	if p == "" {
		return d
	}
	return p
}

// ChooseIdentity picks the ids of a sandbox:
//   - root (EUID 0): a full range of host ids that owns nothing, from the
//     nsbox entry of the sub-id files or DefaultRootStart; the worker is
//     root (0) inside, never host uid 0. A range that overlaps another
//     entry of the sub-id files or an id of /etc/passwd (/etc/group) is an
//     error, as is a malformed file.
//   - another user: the caller's own uid and gid mapped to themselves and
//     the rest of 0..65535 from its sub-id entries, written by
//     newuidmap/newgidmap; without the helpers or an entry, the single-id
//     map of the caller's own ids, with the Reason said.
func ChooseIdentity(o ChooseOptions) (*Identity, error) {
	single := &Identity{Mode: ModeSingle, UID: uint32(o.EUID), GID: uint32(o.EGID),
		UIDMap: []IDRange{{uint32(o.EUID), uint32(o.EUID), 1}},
		GIDMap: []IDRange{{uint32(o.EGID), uint32(o.EGID), 1}}}
	if o.Single {
		return single, nil
	}
	subuidPath := orDefault(o.SubUID, "/etc/subuid")
	subgidPath := orDefault(o.SubGID, "/etc/subgid")
	subuid, err := readSubIDs(subuidPath)
	if err != nil {
		return nil, err
	}
	subgid, err := readSubIDs(subgidPath)
	if err != nil {
		return nil, err
	}
	if o.EUID == 0 && o.RootNotHostAdmin != "" {
		single.Reason = o.RootNotHostAdmin
		return single, nil
	}
	if o.EUID == 0 {
		u, err := rootRange(subuid, subuidPath, orDefault(o.Passwd, "/etc/passwd"), "uid")
		if err != nil {
			return nil, err
		}
		g, err := rootRange(subgid, subgidPath, orDefault(o.Group, "/etc/group"), "gid")
		if err != nil {
			return nil, err
		}
		return &Identity{Mode: ModeFull, UID: 0, GID: 0,
			UIDMap: []IDRange{{0, u, RangeSize}}, GIDMap: []IDRange{{0, g, RangeSize}}}, nil
	}
	nu, ng := findHelper("newuidmap", o.Helpers), findHelper("newgidmap", o.Helpers)
	if nu == "" || ng == "" {
		single.Reason = "newuidmap/newgidmap are not installed (package uidmap)"
		return single, nil
	}
	um, err := callerRange(subuid, subuidPath, o.User, uint32(o.EUID), uint32(o.EUID))
	if err != nil || um == nil {
		single.Reason = reasonOr(err, fmt.Sprintf("%s has no entry for %s (uid %d) with %d ids", subuidPath, userName(o.User, o.EUID), o.EUID, RangeSize-1))
		return single, nil
	}
	gm, err := callerRange(subgid, subgidPath, o.User, uint32(o.EUID), uint32(o.EGID))
	if err != nil || gm == nil {
		single.Reason = reasonOr(err, fmt.Sprintf("%s has no entry for %s (gid %d) with %d ids", subgidPath, userName(o.User, o.EUID), o.EGID, RangeSize-1))
		return single, nil
	}
	return &Identity{Mode: ModeFull, UID: uint32(o.EUID), GID: uint32(o.EGID), UIDMap: um, GIDMap: gm,
		Helper: true, NewUIDMap: nu, NewGIDMap: ng}, nil
}

func reasonOr(err error, r string) string {
	if err != nil {
		return err.Error()
	}
	return r
}

func userName(u string, uid int) string {
	if u == "" {
		return strconv.Itoa(uid)
	}
	return u
}

func findHelper(name string, dirs []string) string {
	if dirs == nil {
		dirs = []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin"}
	}
	for _, d := range dirs {
		if !strings.HasPrefix(d, "/") {
			continue
		}
		p := d + "/" + name
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// rootRange is the first host id of a root-started sandbox's range.
func rootRange(ents []SubIDEntry, path, hostDB, kind string) (uint32, error) {
	r := SubIDEntry{Owner: RootRangeName, Start: DefaultRootStart, Count: RangeSize}
	from := fmt.Sprintf("the default range %d-%d", r.Start, r.end()-1)
	for _, e := range ents {
		if e.Owner == RootRangeName {
			if e.Count < RangeSize {
				return 0, fmt.Errorf("%w: %s:%d: the %s entry has %d ids; a sandbox needs %d", ErrSubID, path, e.Line, RootRangeName, e.Count, RangeSize)
			}
			r = SubIDEntry{Owner: RootRangeName, Start: e.Start, Count: RangeSize, Line: e.Line}
			from = fmt.Sprintf("%s:%d", path, e.Line)
			break
		}
	}
	// The range must own nothing: ids another entry was given to (a user's
	// containers) would let a sandbox act on that user's files, and so
	// would ids of host users and groups.
	for _, e := range ents {
		if e.Line == r.Line && r.Line != 0 {
			continue
		}
		if uint64(e.Start) < r.end() && e.end() > uint64(r.Start) {
			return 0, fmt.Errorf("%w: root sandboxes' %s range (%s) overlaps %s:%d (%s:%d:%d); give %s a range of its own in %s, e.g. %s:%d:%d",
				ErrSubID, kind, from, path, e.Line, e.Owner, e.Start, e.Count, RootRangeName, path, RootRangeName, DefaultRootStart, RangeSize)
		}
	}
	ids, err := hostIDs(hostDB)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		if uint64(id.id) >= uint64(r.Start) && uint64(id.id) < r.end() {
			return 0, fmt.Errorf("%w: root sandboxes' %s range (%s) contains %s %q (%d) of %s; give %s a free range in %s",
				ErrSubID, kind, from, kind, id.name, id.id, hostDB, RootRangeName, path)
		}
	}
	return r.Start, nil
}

type hostID struct {
	name string
	id   uint32
}

// hostIDs lists the ids of /etc/passwd or /etc/group (the third field).
// Lines it cannot read are skipped: this only keeps a range clear of known
// ids, and nss sources other than files are not consulted.
func hostIDs(path string) ([]hostID, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSubID, err)
	}
	defer f.Close()
	var out []hostID
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), ":")
		if len(fs) < 3 {
			continue
		}
		if n, err := strconv.ParseUint(fs[2], 10, 32); err == nil {
			out = append(out, hostID{fs[0], uint32(n)})
		}
	}
	return out, sc.Err()
}

// callerRange maps own (the caller's uid, or gid) to itself and the rest of
// 0..RangeSize-1 from the first entry of the caller large enough; nil when
// there is none. subuid(5) and subgid(5) both name the owner by login name
// or by numeric uid, as newuidmap and newgidmap match them.
func callerRange(ents []SubIDEntry, path, user string, uid, own uint32) ([]IDRange, error) {
	need := uint32(RangeSize)
	if own < RangeSize {
		need-- // own is mapped to itself
	}
	for _, e := range ents {
		if !(e.Owner == user && user != "") && e.Owner != strconv.FormatUint(uint64(uid), 10) {
			continue
		}
		if e.Count < need {
			continue
		}
		if uint64(own) >= uint64(e.Start) && uint64(own) < uint64(e.Start)+uint64(need) {
			return nil, fmt.Errorf("%w: %s:%d: the range %d-%d holds the caller's own id %d", ErrSubID, path, e.Line, e.Start, uint64(e.Start)+uint64(need)-1, own)
		}
		var m []IDRange
		if own >= RangeSize {
			return []IDRange{{0, e.Start, RangeSize}, {own, own, 1}}, nil
		}
		if own > 0 {
			m = append(m, IDRange{0, e.Start, own})
		}
		m = append(m, IDRange{own, own, 1})
		if rest := RangeSize - 1 - own; rest > 0 {
			m = append(m, IDRange{own + 1, e.Start + own, rest})
		}
		return m, nil
	}
	return nil, nil
}
