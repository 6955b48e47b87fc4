package policy

import (
	"encoding/hex"
	"io/fs"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/seccomp"
)

// The seccomp step of the resolution: the profile file named, checked
// and compiled once to report what it opens, kept read-only inside when
// it lies in a writable directory (trust.go checks its record).

// seccomp resolves the seccomp setting: "default", "unconfined" or a
// profile file.
func (r *resolver) seccomp() error {
	s := r.m.seccomp
	r.res.Policy.Seccomp = s.v
	switch s.v {
	case "", "default":
		r.res.Policy.Seccomp = "default"
		return nil
	case "unconfined":
		r.warn(s.at.warn(false, "seccomp unconfined: commands may use every system call, including the kernel interfaces the default profile closes, and leave set-user-ID files in writable directories"))
		return nil
	}
	p, err := expand(s.v, r.vars)
	if err != nil {
		// A filter that silently went missing would loosen the sandbox.
		return s.at.err(err, "%v", err)
	}
	rp, err := r.resolvePath(p, r.h.Cwd)
	if err != nil {
		return s.at.err(err, "%v", err)
	}
	if rp.Missing > 0 || rp.NotDir {
		return s.at.err(fs.ErrNotExist, "seccomp profile %s does not exist", rp.Path)
	}
	// Parsed now so that a bad profile is reported before anything starts.
	prof, err := seccomp.LoadFile(rp.Path)
	if err != nil {
		return s.at.err(err, "%v", err)
	}
	for _, w := range prof.Warnings() {
		r.warn(s.at.warn(false, "%s", w))
	}
	// A profile of the user's that opens what the default closes is a
	// loosening like unconfined, and said so (review 19): a project's
	// {"defaultAction":"SCMP_ACT_ALLOW"} is unconfined by another name.
	if f, err := seccomp.CompileShared(prof, seccomp.Options{AllowUserns: r.m.allowUserns.v}); err == nil {
		if open := seccomp.Opens(f); len(open) > 0 {
			r.warn(s.at.warn(false, "the seccomp profile %s lets through what the default profile closes: %s", rp.Path, someNames(open, 8)))
		}
	}
	r.res.Policy.Seccomp = rp.Path
	r.seccompFile, r.seccompDigest = rp.Path, prof.Digest
	r.seccompNamed = absPath(r.h, p)
	r.res.Policy.SeccompSHA256 = hex.EncodeToString(prof.Digest[:])
	// Invariant: like a policy file, a seccomp profile in a directory the
	// sandbox can write is read-only inside: a sandbox that rewrote it
	// with defaultAction SCMP_ACT_ALLOW would switch the next run's
	// filter off.
	for _, it := range r.mounts {
		if it.m.Kind == sandbox.MountBind && !it.m.ReadOnly && within(rp.Path, it.m.Source) {
			if err := r.trustedPolicyFile(s.at.layer, rp.Path, it.m.Source); err != nil {
				return err
			}
			r.policyFiles = append(r.policyFiles, entry{PathEntry: PathEntry{Path: rp.Path}, at: s.at})
			r.warn(s.at.warn(true, "the seccomp profile %s is inside %s, which the sandbox can write; it is kept read-only inside", rp.Path, it.m.Source))
			break
		}
	}
	return nil
}
