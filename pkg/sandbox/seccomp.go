package sandbox

import (
	"fmt"

	"github.com/nsbox/nsbox/pkg/seccomp"
)

// compileSeccomp builds the policy's filter in the supervisor, so that a bad
// profile is an error before any namespace exists, and the worker only
// loads ready BPF.
func compileSeccomp(p *Policy) ([]byte, error) {
	var (
		prof *seccomp.Profile
		err  error
	)
	switch p.Seccomp {
	case "unconfined":
		return nil, nil
	case "", "default":
		prof, err = seccomp.Default()
	default:
		prof, err = seccomp.LoadFile(p.Seccomp)
	}
	if err != nil {
		return nil, err
	}
	f, err := seccomp.Compile(prof, seccomp.Options{AllowUserns: p.AllowUserns})
	if err != nil {
		return nil, fmt.Errorf("seccomp profile %s: %w", seccompName(p.Seccomp), err)
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
