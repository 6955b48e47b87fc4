package sandbox

import (
	"fmt"

	"github.com/nsbox/nsbox/pkg/seccomp"
)

// compileSeccomp builds the policy's filter in the supervisor, so that a bad
// profile is an error before any namespace exists, and the worker only
// loads ready BPF.
func compileSeccomp(p *Policy) ([]byte, error) {
	o := seccomp.Options{AllowUserns: p.AllowUserns}
	var (
		f   *seccomp.Filter
		err error
	)
	switch p.Seccomp {
	case "unconfined":
		return nil, nil
	case "", "default":
		// The built-in profile: the filter precompiled into the binary for
		// this architecture and these options when there is one, otherwise
		// compiled now (see seccomp.DefaultFilter).
		f, err = seccomp.DefaultFilter(o)
	default:
		prof, lerr := seccomp.LoadFile(p.Seccomp)
		if lerr != nil {
			return nil, lerr
		}
		f, err = seccomp.Compile(prof, o)
		if err == nil {
			// A custom profile must leave the worker the calls it makes
			// under the filter: one that kills them would leave a
			// half-dead PID 1 (see seccomp.WorkerNeeds).
			err = seccomp.CheckWorkerNeeds(f)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("seccomp profile %s: %w", seccompName(p.Seccomp), err)
	}
	return f.Bytes(), nil
}

// compileSetID builds the set-id filter commands get under a profile of
// the user's (--seccomp FILE), which may allow chmod 4755: a set-id file
// left in a writable bind runs on the host later with its owner's ids,
// host root's for a root caller (see seccomp.SetIDFilter; review 17).
func compileSetID() ([]byte, error) {
	f, err := seccomp.SetIDFilter()
	if err != nil {
		return nil, fmt.Errorf("seccomp set-id filter: %w", err)
	}
	return f.Bytes(), nil
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
