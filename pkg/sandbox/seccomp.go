package sandbox

import (
	"encoding/hex"
	"fmt"

	"github.com/nsbox/nsbox/pkg/seccomp"
)

// compiledFilters are the filters the supervisor compiles for a run: the
// profile's, and for a profile of the user's nsbox's set-id filter and,
// when the profile lets openat2 through, the openat2 guard for commands.
type compiledFilters struct {
	profile, setID, openat2 []byte
}

// compileSeccomp builds the policy's filters in the supervisor, so that a
// bad profile is an error before any namespace exists, and the worker only
// loads ready BPF.
func compileSeccomp(p *Policy) (compiledFilters, error) {
	o := seccomp.Options{AllowUserns: p.AllowUserns}
	var (
		out compiledFilters
		f   *seccomp.Filter
		err error
	)
	switch p.Seccomp {
	case "unconfined":
		return out, nil
	case "", "default":
		// The built-in profile: the filter precompiled into the binary for
		// this architecture and these options when there is one, otherwise
		// compiled now (see seccomp.DefaultFilter).
		f, err = seccomp.DefaultFilter(o)
	default:
		prof, lerr := seccomp.LoadFile(p.Seccomp)
		if lerr != nil {
			return out, lerr
		}
		// Invariant: the filter compiled is the profile the policy was
		// resolved with. The file is read again here, and one rewritten
		// in between (by a session that can write it, or anyone else)
		// would install a filter nobody judged or trusted.
		if p.SeccompSHA256 != "" && hex.EncodeToString(prof.Digest[:]) != p.SeccompSHA256 {
			return out, fmt.Errorf("seccomp profile %s: %w", p.Seccomp, ErrSeccompChanged)
		}
		f, err = seccomp.CompileShared(prof, o)
		if err == nil {
			// A custom profile must leave the worker the calls it makes
			// under the filter: one that kills them would leave a
			// half-dead PID 1 (see seccomp.WorkerNeeds).
			err = seccomp.CheckWorkerNeeds(f)
		}
		if err == nil {
			out.setID, out.openat2, err = userProfileGuards(f)
		}
	}
	if err != nil {
		return out, fmt.Errorf("seccomp profile %s: %w", seccompName(p.Seccomp), err)
	}
	out.profile = f.Bytes()
	return out, nil
}

// userProfileGuards are what a profile of the user's (--seccomp FILE),
// which may allow chmod 4755, gets beside it: the set-id filter, and the
// openat2 guard when the profile lets openat2 through. A set-id file left
// in a writable bind runs on the host later with its owner's ids, host
// root's for a root caller (see seccomp.SetIDFilter; review 17).
func userProfileGuards(profile *seccomp.Filter) (setID, openat2 []byte, err error) {
	s, err := seccomp.SetIDFilter()
	if err != nil {
		return nil, nil, fmt.Errorf("set-id filter: %w", err)
	}
	need, err := seccomp.NeedsOpenAt2Guard(profile)
	if err != nil || !need {
		return s.Bytes(), nil, err
	}
	g, err := seccomp.OpenAt2Guard()
	if err != nil {
		return nil, nil, fmt.Errorf("openat2 guard: %w", err)
	}
	return s.Bytes(), g.Bytes(), nil
}

func seccompName(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

// installFilter loads the compiled filter on every thread of the worker
// (TSYNC); every command inherits it.
func installFilter(b []byte) error {
	f, err := seccomp.FilterFromBytes(b)
	if err != nil {
		return err
	}
	return f.Install()
}
