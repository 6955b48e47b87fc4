package policy

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// A project policy file is a profile or seccomp file in a .nsbox/policy/
// directory: the project's own, next to code that sandboxes write. Runs
// keep the directories they find read-only (profiles/base.toml), but not
// every run finds every one (below a --shallow directory, in a tree the
// walk skips, in a run with another writable set), and a rewritten profile
// chooses the next sandbox's policy: `network = "host"`, "!~/.ssh".
// So nsbox reads one only when the user has trusted its exact bytes at its
// path, as direnv does with .envrc and mise with its project files: `nsbox
// trust FILE` records the SHA-256, and a change, by anyone, needs the
// user's look again.

// TrustStoreName is the trust store's file name in nsbox's config
// directory.
const TrustStoreName = "trusted.json"

// maxTrustStore bounds the store's size: thousands of records.
const maxTrustStore = 4 << 20

// trustVersion is the store's format.
const trustVersion = 1

// TrustStore is the set of project policy files the user trusts: real
// path to the hex SHA-256 of the bytes trusted.
type TrustStore struct {
	// Path is the store's file ("" when the config directory is unknown:
	// nothing is trusted).
	Path  string
	Files map[string]string
}

// trustFile is the store's JSON form.
type trustFile struct {
	Version int               `json:"version"`
	Files   map[string]string `json:"files"`
}

// TrustStorePath is where the user's trust records are kept:
// $XDG_CONFIG_HOME/nsbox/trusted.json, "" when unknown. Every run
// protects the config directory (defaultsFor).
func (h Host) TrustStorePath() string {
	if d := h.withDefaults().ConfigDir(); d != "" {
		return filepath.Join(d, TrustStoreName)
	}
	return ""
}

// IsProjectPolicyFile reports whether the real path p lies in a
// .nsbox/policy/ directory (at any depth below it).
func IsProjectPolicyFile(p string) bool {
	parts := strings.Split(filepath.Dir(filepath.Clean(p)), string(filepath.Separator))
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == policyDir[0] && parts[i+1] == policyDir[1] {
			return true
		}
	}
	return false
}

// LoadTrustStore reads the store at path; a missing file is an empty
// store. A store that is not nsbox's format is an error, not an empty
// store: the user's trust is not silently dropped by the next save.
func LoadTrustStore(path string) (*TrustStore, error) {
	t := &TrustStore{Path: path, Files: map[string]string{}}
	if path == "" {
		return t, nil
	}
	data, err := readBounded(path, maxTrustStore)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, &Error{Source: path, Msg: "cannot read the trust store: " + errText(err), Err: err}
	}
	var f trustFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil || dec.More() {
		return nil, &Error{Source: path, Msg: "not an nsbox trust store (remove it to start again)", Err: err}
	}
	if f.Version != trustVersion {
		return nil, &Error{Source: path, Msg: fmt.Sprintf("trust store version %d, this nsbox reads version %d", f.Version, trustVersion)}
	}
	for p, sum := range f.Files {
		if b, err := hex.DecodeString(sum); err != nil || len(b) != sha256.Size || !filepath.IsAbs(p) {
			return nil, &Error{Source: path, Msg: fmt.Sprintf("bad record for %q (remove it with nsbox trust --remove)", p)}
		}
		t.Files[p] = sum
	}
	return t, nil
}

// Trusted reports whether the file at real path p, whose bytes hash to
// sum, is trusted.
func (t *TrustStore) Trusted(p string, sum [32]byte) bool {
	return t != nil && t.Files[p] == hex.EncodeToString(sum[:])
}

// readBounded reads a regular file of at most max bytes, without
// following a FIFO or a device.
func readBounded(path string, max int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}

// hashFile is the record of the file at p: the SHA-256 of its bytes and
// its real path, both taken from one open file.
//
// Invariant: the path recorded is the file whose bytes were hashed. Had
// the path been resolved first and the file opened after, a sandbox
// running beside `nsbox trust` could swap a link in an unprotected
// .nsbox/policy/ in between, and its own bytes would be recorded at the
// trusted file's path, ready to be written there later.
func hashFile(p string) (TrustedFile, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return TrustedFile{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return TrustedFile{}, err
	}
	if !st.Mode().IsRegular() {
		return TrustedFile{}, errors.New("not a regular file")
	}
	// The kernel's name of the open file (proc(5), /proc/self/fd).
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil || !filepath.IsAbs(real) {
		return TrustedFile{}, fmt.Errorf("cannot name the open file: %v", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxTrustedFile+1))
	if err != nil {
		return TrustedFile{}, err
	}
	if n > maxTrustedFile {
		return TrustedFile{}, fmt.Errorf("larger than %d bytes", maxTrustedFile)
	}
	return TrustedFile{Path: real, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// TrustedFile is one record `nsbox trust` made or removed.
type TrustedFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// ErrNotProjectPolicy: nsbox trust was given a directory that is not a
// .nsbox/policy/ one (a tree is trusted only there).
var ErrNotProjectPolicy = errors.New("not a project policy file")

// maxTrustedFile bounds a file nsbox trust hashes: larger than any
// profile or seccomp file nsbox would read.
const maxTrustedFile = 4 << 20

// maxTrustFiles bounds the files one `nsbox trust DIR` records.
const maxTrustFiles = 1000

// Trust records the current bytes of each file named in paths (a file,
// or a .nsbox/policy/ directory: every regular file below it) in the store at h.TrustStorePath(), replacing earlier records of
// the same paths. Nothing is written when any path is refused.
func Trust(h Host, paths []string) ([]TrustedFile, error) {
	var out []TrustedFile
	for _, p := range paths {
		fs, err := trustTargets(h, p)
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			rec, err := hashFile(f)
			if err != nil {
				return nil, &Error{Source: f, Msg: "cannot read: " + errText(err), Err: err}
			}
			out = append(out, rec)
		}
	}
	if len(out) > maxTrustFiles {
		return nil, &Error{Msg: fmt.Sprintf("%d files to trust, more than %d: name them, not a tree", len(out), maxTrustFiles)}
	}
	err := updateTrustStore(h, func(t *TrustStore) {
		for _, f := range out {
			t.Files[f.Path] = f.SHA256
		}
	})
	return out, err
}

// Untrust removes the records of paths (a file or a directory: every
// record below it), whether or not the files still exist.
func Untrust(h Host, paths []string) ([]TrustedFile, error) {
	var out []TrustedFile
	err := updateTrustStore(h, func(t *TrustStore) {
		for _, p := range paths {
			// The records at the path as named and where it leads.
			names := []string{absPath(h, p)}
			if rp, err := filepath.EvalSymlinks(names[0]); err == nil {
				names = append(names, rp)
			}
			for _, n := range names {
				for f, sum := range t.Files {
					if within(f, n) {
						out = append(out, TrustedFile{Path: f, SHA256: sum})
						delete(t.Files, f)
					}
				}
			}
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// TrustList is the store's records, sorted by path.
func TrustList(h Host) ([]TrustedFile, error) {
	t, err := LoadTrustStore(h.TrustStorePath())
	if err != nil {
		return nil, err
	}
	out := make([]TrustedFile, 0, len(t.Files))
	for p, sum := range t.Files {
		out = append(out, TrustedFile{Path: p, SHA256: sum})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func absPath(h Host, p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(h.Cwd, p)
	}
	return filepath.Clean(p)
}

// trustTargets is the real paths of the project policy files p names.
func trustTargets(h Host, p string) ([]string, error) {
	rp, err := filepath.EvalSymlinks(absPath(h, p))
	if err != nil {
		return nil, &Error{Source: p, Msg: "cannot trust: " + errText(err), Err: err}
	}
	st, err := os.Stat(rp)
	if err != nil {
		return nil, &Error{Source: p, Msg: "cannot trust: " + errText(err), Err: err}
	}
	if st.Mode().IsRegular() {
		// Any file: one outside .nsbox/policy/ needs a record when a
		// project profile extends it.
		return []string{rp}, nil
	}
	if !st.IsDir() {
		return nil, &Error{Source: p, Msg: "not a regular file or a directory"}
	}
	if !IsProjectPolicyFile(filepath.Join(rp, "x")) {
		return nil, &Error{Source: p, Msg: "not a .nsbox/policy/ directory: name the project's .nsbox/policy/ or files in it", Err: ErrNotProjectPolicy}
	}
	var out []string
	err = filepath.WalkDir(rp, func(f string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// Regular files only: a symlink below is trusted where it leads,
		// by naming that file.
		if d.Type().IsRegular() {
			out = append(out, f)
		}
		if len(out) > maxTrustFiles {
			return fmt.Errorf("more than %d files", maxTrustFiles)
		}
		return nil
	})
	if err != nil {
		return nil, &Error{Source: p, Msg: "cannot trust: " + errText(err), Err: err}
	}
	return out, nil
}

// updateTrustStore applies fn to the store under an exclusive lock and
// replaces the file atomically (a new file renamed over the old one), so
// that two `nsbox trust` at once lose no record and a crash leaves the
// old store or the new one, never half of one.
func updateTrustStore(h Host, fn func(*TrustStore)) error {
	path := h.TrustStorePath()
	if path == "" {
		return &Error{Msg: "no config directory to keep trust records in: set HOME or XDG_CONFIG_HOME"}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return &Error{Source: dir, Msg: "cannot make the config directory: " + errText(err), Err: err}
	}
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &Error{Source: path, Msg: "cannot lock the trust store: " + errText(err), Err: err}
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return &Error{Source: path, Msg: "cannot lock the trust store: " + errText(err), Err: err}
	}
	t, err := LoadTrustStore(path)
	if err != nil {
		return err
	}
	fn(t)
	data, err := json.MarshalIndent(trustFile{Version: trustVersion, Files: t.Files}, "", "  ")
	if err != nil {
		return err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := path + ".tmp-" + hex.EncodeToString(rnd[:])
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &Error{Source: path, Msg: "cannot write the trust store: " + errText(err), Err: err}
	}
	_, werr := f.Write(append(data, '\n'))
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return &Error{Source: path, Msg: "cannot write the trust store: " + errText(werr), Err: werr}
	}
	return nil
}

// trust is the resolution step that refuses a project policy file of the
// run (a profile of the chain, the config file, the seccomp file) whose
// bytes the user has not trusted at its path.
//
// Invariant: no sandbox chooses a later sandbox's policy, even where no
// run kept the file read-only (a .nsbox/policy/ below a --shallow
// directory or a skipped tree, one a run with another writable set
// reached, docs/profiles.md): what is read is what the user looked at.
// The digest compared is that of the bytes parsed (Layer.Digest,
// seccomp's Profile.Digest), not of a second read.
func (r *resolver) trust() error {
	type need struct {
		l      *Layer
		f      string
		digest [32]byte
	}
	var needs []need
	// Each layer's file, resolved once.
	files := map[*Layer]string{}
	for _, l := range r.layers {
		if f, ok := r.policyFile(l); ok {
			files[l] = f
		}
	}
	project := false
	for _, l := range r.layers {
		if f, ok := files[l]; ok && (IsProjectPolicyFile(f) || namesProjectPolicy(l.Name)) {
			needs = append(needs, need{l, f, l.Digest})
			// A project config chooses a profile (and a seccomp file)
			// as a project profile does (review 29).
			project = true
		}
	}
	// A project profile's chain is trusted whole: a file it extends
	// outside .nsbox/policy/ (extend = "../../base.toml") decides the
	// policy as much as the profile, and could be anyone's. Built-in
	// profiles and the user's own (the config directory) need no record.
	cfg := r.h.ConfigDir()
	if c, err := filepath.EvalSymlinks(cfg); err == nil {
		cfg = c
	}
	if project {
		for _, l := range r.layers {
			f, ok := files[l]
			if !ok || l.Kind != KindProfile || (cfg != "" && within(f, cfg)) || slices.ContainsFunc(needs, func(n need) bool { return n.l == l }) {
				continue
			}
			needs = append(needs, need{l, f, l.Digest})
		}
	}
	// The seccomp file: one in or named through .nsbox/policy/, and any
	// file outside the config directory that a project layer names (its
	// seccomp = "/home/u/shared/sc.json" decides the filter as much as
	// the profile does; review 29). One the command line names is the
	// user's choice.
	sl := r.m.seccomp.at.layer
	fromProject := sl != nil && slices.ContainsFunc(needs, func(n need) bool { return n.l == sl })
	if f := r.seccompFile; f != "" && (IsProjectPolicyFile(f) || namesProjectPolicy(r.seccompNamed) || (fromProject && !(cfg != "" && within(f, cfg)))) {
		needs = append(needs, need{r.m.seccomp.at.layer, f, r.seccompDigest})
	}
	if len(needs) == 0 {
		return nil
	}
	path := r.h.TrustStorePath()
	// Invariant: the store is read only from a place no earlier sandbox
	// wrote, as config.toml is (trustedPolicyFile): a store in a
	// writable directory of this run, other than the user database's
	// config directory that every run protects, could hold a record a
	// sandbox added for its own profile.
	// Compared by its real path, as the roots are: a config directory
	// reached through a symlink into a writable tree is in it (review 27).
	real := path
	if d, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		real = filepath.Join(d, filepath.Base(path))
	}
	for _, root := range r.rwRoots {
		if path != "" && within(real, root) && !r.configDirProtectedEverywhere() {
			return errorf(needs[0].l, "", ErrUntrustedPolicyFile, "the trust store %s lies in %s, which sandboxes can write: keep nsbox's config directory outside every writable directory", path, root)
		}
	}
	store, err := LoadTrustStore(path)
	if err != nil {
		return err
	}
	for _, n := range needs {
		if store.Trusted(n.f, n.digest) {
			continue
		}
		what := n.f
		if files[n.l] == n.f {
			what = "this file"
		}
		state := "is new to nsbox trust"
		if _, ok := store.Files[n.f]; ok {
			state = "changed since it was trusted"
		}
		return errorf(n.l, "", ErrUntrustedPolicyFile, "%s, a project policy file, %s: a sandbox that could write it would choose this run's policy. Read it, then run: nsbox trust %s", what, state, n.f)
	}
	return nil
}

// namesProjectPolicy reports whether the absolute path p, as named, or
// any symlink met on the way from it to the file, lies in a
// .nsbox/policy/ directory. The real path alone is not enough: a sandbox
// that could write an unprotected .nsbox/policy/ (below a --shallow
// directory) would replace the trusted ci.toml with a link to a file of
// its own elsewhere, and the run that names .nsbox/policy/ci.toml would
// read that file as one needing no trust (review 27). More links than a
// path resolution follows count as yes: fail closed.
func namesProjectPolicy(p string) bool {
	if !filepath.IsAbs(p) {
		return false
	}
	p = filepath.Clean(p)
	for hops := 0; hops < 40; hops++ {
		if IsProjectPolicyFile(p) {
			return true
		}
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			return false
		}
		p = filepath.Join(dir, filepath.Base(p))
		if IsProjectPolicyFile(p) {
			return true
		}
		t, err := os.Readlink(p)
		if err != nil {
			return false // not a link: p is the file
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(dir, t)
		}
		p = filepath.Clean(t)
	}
	return true
}

// configDirProtectedEverywhere reports whether nsbox's config directory
// is the user database's default one, which every run protects whatever
// its environment (defaultsFor).
func (r *resolver) configDirProtectedEverywhere() bool {
	c := r.h.ConfigDir()
	return c != "" && r.h.UserHome != "" && c == filepath.Join(r.h.UserHome, ".config", "nsbox")
}
